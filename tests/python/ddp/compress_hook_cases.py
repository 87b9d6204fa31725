#!/usr/bin/python3
"""chorus.hooks' compression hooks under DistributedDataParallel, one rank of it (run_ranks.py
starts them). For every kind, on the chorus group and on a gloo group: a small classifier
trains for a few dozen steps, the loss must fall well below where it started, every rank's
parameters must equal rank 0's bit for bit (checked over gloo), and the hook must have sent fewer
bytes than the float32 buckets. Prints "rank R: KIND on BACKEND ok" for each."""

import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from chorus import hooks
from ddp_support import assert_identical_on_all_ranks, init

IN, HIDDEN, OUT = 32, 64, 4
STEPS = 40
KINDS = ("none", "bf16", "fp16", "int8", "powersgd:1", "powersgd:4")
# Payload per step relative to float32 (upper bounds; PowerSGD also sends the small biases).
MAX_BYTES_RATIO = {"none": 1.0, "bf16": 0.5, "fp16": 0.5, "int8": 0.3, "powersgd:1": 0.2,
                   "powersgd:4": 0.5}


def teacher_batch(rank, step, size=32):
    """A learnable task: labels from a fixed random linear teacher; rank-specific inputs."""
    w = torch.Generator().manual_seed(7)
    teacher = torch.randn(IN, OUT, generator=w)
    g = torch.Generator().manual_seed(1000 * step + rank + 1)
    x = torch.randn(size, IN, generator=g)
    return x, (x @ teacher).argmax(1)


def train(kind, group, rank):
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT))
    ddp = DDP(model, process_group=group)
    state = hooks.CompressionState(kind, group=group, min_elements=256)
    ddp.register_comm_hook(state, hooks.compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        x, y = teacher_batch(rank, step)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    floats = sum(p.numel() for p in model.parameters()) * 4 * STEPS
    return model, state, losses, floats


def check(kind, name, group, rank, gloo):
    model, state, losses, floats = train(kind, group, rank)
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.6 * first, f"{kind} on {name}: loss {first:.3f} -> {last:.3f}, not falling"
    assert_identical_on_all_ranks(model, gloo, f"{kind} on {name}")
    assert state.calls >= STEPS, f"{kind} on {name}: the hook ran {state.calls} times"
    ratio = state.bytes_sent / floats
    assert ratio <= MAX_BYTES_RATIO[kind], f"{kind} on {name}: sent {ratio:.3f} of float32"
    if state.error_feedback and kind != "none":
        assert any(e.abs().max() > 0 for e in state.errors.values()), f"{kind}: no error kept"
    print(f"rank {rank}: {kind} on {name} ok (loss {first:.4f} -> {last:.5f}, "
          f"{ratio:.3f} of the float32 bytes)", flush=True)


def main():
    kinds = sys.argv[1:] or KINDS
    rank, _, gloo = init()
    # The same hooks from the backend's module, where its users look for them.
    import chorus.torch

    assert chorus.torch.compress_hook is hooks.compress_hook
    assert chorus.torch.CompressionState is hooks.CompressionState
    for kind in kinds:
        for name, group in (("chorus", None), ("gloo", gloo)):
            check(kind, name, group, rank, gloo)
            dist.barrier(group=gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""A data-parallel MLP trainer that survives a lost rank the torchelastic way: it saves a checkpoint
after every step and, when torchrun restarts the whole worker group, resumes from it.

Run under torchrun (gloo backend). Every rank appends one JSON line per event to
$ELASTIC_BENCH_DIR/events-<rank>.jsonl ("start", "ready", "resumed", "step", "kill"), with the
wall-clock time, so that measure.py can time the recovery. With ELASTIC_KILL_RANK=R and
ELASTIC_KILL_STEP=S, rank R SIGKILLs itself when step S begins in the first attempt (as kill -9).
"""

import time

STARTED = time.time()  # before importing torch: the start-up cost is part of a restart

# pylint: disable=wrong-import-position
import argparse
import json
import os
import signal

import torch
import torch.distributed as dist
from torch import nn


def log_event(kind, **fields):
    path = os.path.join(os.environ["ELASTIC_BENCH_DIR"], f"events-{os.environ['RANK']}.jsonl")
    fields.update(kind=kind, time=time.time(), attempt=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(fields) + "\n")


def mlp():
    """784-512-256-10, chorus-train's MLP (535,818 parameters)."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def batch(step, rank, size):
    """A synthetic batch that depends only on the step and the rank (a restart sees the same data)."""
    gen = torch.Generator().manual_seed(step * 65537 + rank)
    return torch.randn(size, 784, generator=gen), torch.randint(0, 10, (size,), generator=gen)


def save_atomically(state, path):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)  # a reader sees the old checkpoint or the new one, never half of one


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    log_event("start", process_started=STARTED)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(mlp())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    checkpoint = os.path.join(os.environ["ELASTIC_BENCH_DIR"], "checkpoint.pt")
    first_step = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_step = state["step"]
        log_event("resumed", step=first_step)
    log_event("ready")

    kill_rank = int(os.environ.get("ELASTIC_KILL_RANK", "-1"))
    kill_step = int(os.environ.get("ELASTIC_KILL_STEP", "-1"))
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    loss_fn = nn.CrossEntropyLoss()
    for step in range(first_step, args.steps):
        if rank == kill_rank and step == kill_step and attempt == 0:
            log_event("kill", step=step)
            os.kill(os.getpid(), signal.SIGKILL)
        inputs, labels = batch(step, rank, args.batch)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), labels)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        if rank == 0:
            save_atomically(
                {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step + 1},
                checkpoint,
            )
        # Every rank waits for the checkpoint: a step counts as done once it is saved.
        dist.barrier()
        log_event("step", step=step, loss=loss.item(), world=world)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

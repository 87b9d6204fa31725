#!/usr/bin/env python3
"""Plain FSDP2 (fully_shard) training of Fashion-MNIST; the backend is one word.

    torchrun --standalone --nproc_per_node 4 train_fsdp.py --backend chorus
    chorus-run -n 4 python train_fsdp.py --backend chorus

Needs torch 2.6 or later (torch.distributed.fsdp.fully_shard). Each Linear/Conv layer and the
whole model are sharded over a 1-D CPU device mesh of all ranks: every step all-gathers the
parameters a layer needs and reduce-scatters its gradients. The options, the data and the output
are train_ddp.py's; at the end every rank gathers the full parameters and rank 0 prints whether
all ranks hold bit-identical ones (exit status 3 if not).
"""

import os
import sys
import time

import torch
import torch.distributed as dist

import models
import train_ddp


def shard(model, mesh):
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if any(p.requires_grad for p in layer.parameters(recurse=False)):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def full_parameters(model):
    """The unsharded parameters, the same tensor on every rank (an all-gather per parameter)."""
    return torch.cat([p.full_tensor().detach().reshape(-1) for p in model.parameters()])


def main():
    args = train_ddp.parse_args()
    if args.no_communication:
        sys.exit("train_fsdp: --no-communication is DDP's (a sharded model cannot skip gathering)")
    torch.set_num_threads(args.threads)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        sys.exit(f"train_fsdp: torch {torch.__version__} has no FSDP2 (fully_shard): use torch 2.6+")
    rank, world, say = train_ddp.join_group(args, "train_fsdp")

    # Every rank builds the same initial model: fully_shard keeps each rank's slice of it.
    torch.manual_seed(args.seed)
    mesh = init_device_mesh("cpu", (world,))
    model = shard(models.MODELS[args.model](), mesh)
    n_params = sum(p.numel() for p in model.parameters())
    train_set, test_set = train_ddp.load_data(args)
    say(f"train_fsdp: {world} ranks, backend {args.backend}, {args.model} ({n_params} parameters, "
        f"fully_shard over {world} ranks), batch {args.batch} per rank, SGD lr {args.lr} "
        f"momentum {args.momentum}, {'synthetic data' if args.synthetic else args.data}, "
        f"pid {os.getpid()} local rank {os.environ.get('LOCAL_RANK', '?')}")

    start = time.perf_counter()
    times = train_ddp.train(args, model, train_set, rank, world, say)
    elapsed = time.perf_counter() - start
    mean_ms, slowest_ms = train_ddp.step_time_stats(times)
    accuracy = train_ddp.test_accuracy(model, test_set, rank, world)
    last_tensors = []
    differing = train_ddp.ranks_with_other_values(full_parameters(model), last_tensors)

    say(f"time per step: {mean_ms:.2f} ms (rank 0), {slowest_ms:.2f} ms (slowest rank), over "
        f"{len(times)} steps after {args.warmup} warm-up; {elapsed:.1f} s in all")
    say(f"test accuracy: {accuracy * 100:.2f} %")
    if differing == 0:
        say(f"parameters: bit-identical on all {world} ranks")
    else:
        say(f"parameters: {differing} of {world} ranks differ from rank 0")
    if args.save:
        state = {k: v.full_tensor() for k, v in model.state_dict().items()}
        if rank == 0:
            torch.save(state, args.save)
    del model
    dist.destroy_process_group()
    del last_tensors
    sys.exit(0 if differing == 0 else 3)


if __name__ == "__main__":
    main()

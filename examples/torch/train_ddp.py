#!/usr/bin/python3
"""Plain DistributedDataParallel training of Fashion-MNIST; the backend is one word.

    torchrun --nproc_per_node 4 --redirects 2 --tee 2 train_ddp.py --backend chorus
    chorus-run -n 4 /usr/bin/python3 train_ddp.py --backend chorus

(Debian's torchrun under Python 3.11 needs --redirects 2 --tee 2; see examples/torch/README.md.)
Each rank trains on its shard with batch 64 and SGD; rank 0 prints the time per step, the test
accuracy and whether every rank ends with bit-identical parameters (exit status 3 if not).
"""

import argparse
import contextlib
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import fashion_mnist
import models


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["chorus", "gloo"], default="chorus")
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the step time")
    p.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--synthetic", action="store_true", help="random learnable data, no files")
    p.add_argument("--timeout", type=float, default=120, help="seconds, for every collective")
    p.add_argument("--save", metavar="PATH", help="rank 0 saves the final state_dict here")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--no-communication", action="store_true",
                   help="train inside DDP's no_sync() (no gradient all-reduce, the ranks drift "
                        "apart): the compute-only step time, a floor for any backend")
    return p.parse_args()


def load_data(args):
    if args.synthetic:
        return (fashion_mnist.synthetic("train", 2048, args.seed),
                fashion_mnist.synthetic("t10k", 256, args.seed))
    cache = getattr(args, "data_cache", None)
    return (fashion_mnist.load("train", args.data, cache),
            fashion_mnist.load("t10k", args.data, cache))


def train(args, model, train_set, rank, world, say):
    """Returns the per-step times (seconds) after the warm-up, measured on this rank."""
    x_all, y_all = train_set
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    times, step = [], 0
    for epoch in range(args.epochs):
        idx = fashion_mnist.shard(len(x_all), rank, world, epoch, args.seed)
        for start in range(0, len(idx) - args.batch + 1, args.batch):
            if args.steps and step >= args.steps:
                return times
            batch = idx[start : start + args.batch]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with model.no_sync() if args.no_communication else contextlib.nullcontext():
                loss = F.cross_entropy(model(x_all[batch]), y_all[batch])
                loss.backward()  # DDP all-reduces the gradient buckets during backward
            opt.step()
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
            step += 1
            if step % args.log_every == 0:
                say(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    return times


def test_accuracy(model, test_set, rank, world):
    """Accuracy on the whole test set, each rank evaluating its share."""
    x, y = test_set
    mine = torch.arange(rank, len(x), world)
    with torch.no_grad():
        correct = (model(x[mine]).argmax(dim=1) == y[mine]).sum()
    counts = torch.tensor([correct.item(), len(mine)], dtype=torch.float64)
    dist.all_reduce(counts)
    return (counts[0] / counts[1]).item()


def ranks_with_other_parameters(model, keep):
    """How many ranks hold parameters that differ, in any bit, from rank 0's."""
    return ranks_with_other_values(torch.cat([p.detach().reshape(-1) for p in model.parameters()]),
                                   keep)


def ranks_with_other_values(flat, keep):
    """How many ranks hold a flat tensor that differs, in any bit, from rank 0's."""
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    differs = torch.tensor([0 if torch.equal(flat, reference) else 1], dtype=torch.int64)
    dist.all_reduce(differs)
    keep += [reference, differs]
    return int(differs.item())


def step_time_stats(times):
    """(mean, slowest rank's mean) step time in ms; the slowest rank sets the pace."""
    mean = sum(times) / len(times) if times else float("nan")
    t = torch.tensor([mean * 1e3], dtype=torch.float64)
    slowest = t.clone()
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return t.item(), slowest.item()


def join_group(args, script):
    """Registers the backend "chorus" when it is the one asked for, joins the default process
    group (env://) and returns (rank, world size, say), say printing on rank 0 only."""
    if args.backend == "chorus":
        try:
            import chorus.torch  # noqa: F401  registers the backend "chorus"
        except ImportError as e:
            sys.exit(f"{script}: cannot import chorus.torch ({e}); pip install the package, or "
                     "build it and set PYTHONPATH=<build>/python")
    # env:// : torchrun and chorus-run set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()

    def say(text):
        if rank == 0:
            print(text, flush=True)

    return rank, world, say


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world, say = join_group(args, "train_ddp")

    torch.manual_seed(args.seed)  # DDP broadcasts rank 0's initial parameters anyway
    train_set, test_set = load_data(args)
    model = DDP(models.MODELS[args.model]())
    n_params = sum(p.numel() for p in model.parameters())
    say(f"train_ddp: {world} ranks, backend {args.backend}, {args.model} ({n_params} parameters), "
        f"batch {args.batch} per rank, SGD lr {args.lr} momentum {args.momentum}, "
        f"{'synthetic data' if args.synthetic else args.data}, "
        f"pid {os.getpid()} local rank {os.environ.get('LOCAL_RANK', '?')}")

    start = time.perf_counter()
    times = train(args, model, train_set, rank, world, say)
    elapsed = time.perf_counter() - start
    mean_ms, slowest_ms = step_time_stats(times)
    accuracy = test_accuracy(model, test_set, rank, world)
    last_tensors = []
    differing = ranks_with_other_parameters(model, last_tensors)

    say(f"time per step: {mean_ms:.2f} ms (rank 0), {slowest_ms:.2f} ms (slowest rank), over "
        f"{len(times)} steps after {args.warmup} warm-up; {elapsed:.1f} s in all")
    say(f"test accuracy: {accuracy * 100:.2f} %")
    if args.no_communication:
        say(f"parameters: not synchronised (--no-communication), {differing} of {world} ranks "
            "differ from rank 0")
        differing = 0
    elif differing == 0:
        say(f"parameters: bit-identical on all {world} ranks")
    else:
        say(f"parameters: {differing} of {world} ranks differ from rank 0")
    if args.save and rank == 0:
        torch.save(model.module.state_dict(), args.save)
    # The group goes first, while Python still holds the tensors of the last collectives: torch
    # 1.13's gloo group frees a finished collective's tensors on its worker thread, which needs
    # the GIL for a tensor Python has let go, while destroying the group joins that thread with
    # the GIL held (a hang at exit, seen one run in three). DDP holds the group too.
    del model
    dist.destroy_process_group()
    del last_tensors
    sys.exit(0 if differing == 0 else 3)


if __name__ == "__main__":
    main()

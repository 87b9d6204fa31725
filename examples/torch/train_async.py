#!/usr/bin/python3
"""Fashion-MNIST with delayed updates, local SGD or DiLoCo (chorus.async_training), or DDP.

    chorus-run -n 4 -- python3 train_async.py --backend chorus --mode diloco --sync-every 32 \\
        --compress int8 --check-every 16
    torchrun --nproc_per_node 2 train_async.py --backend gloo --mode localsgd --sync-every 8

--mode sync is plain DistributedDataParallel (--compress: chorus.hooks' comm hook); delayed,
localsgd and diloco wrap the model and optimizer (--compress: diloco only). Rank 0 prints the
bytes this rank sent per step (mean, as a ring algorithm sends them), the divergence of the
replicas (--check-every), the final test accuracy and whether every rank ends with bit-identical
parameters (exit status 3 if not).

--eval-every K evaluates the test set every K steps (each rank its own replica, on its share of
the test set: with localsgd and diloco choose K a multiple of H to see the synchronised model) and
prints "step S: test accuracy A % after T s of training"; T leaves the evaluations out.
--elastic (chorus-run --elastic; delayed, localsgd or diloco): lost ranks are survived and
replacements admitted (chorus.torch.elastic.AsyncTrainer); --fail-rank R --fail-step S
[--fail-signal kill|stop] makes rank R die inside a synchronisation at step S, first life only
(async_elastic.py).

--target-accuracy A prints when the first evaluation reaches A ("target accuracy 85.00 % reached
at step S after T s of training"; --stop-at-target ends the run there). --results FILE.json
(rank 0) holds the run's settings, the evaluations, the summary and the wrappers' divergence
history (bench/torch/async_bench.py and async_plot.py read it).
"""

import argparse
import csv
import dataclasses
import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import async_elastic
import fashion_mnist
import models
import train_ddp


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["chorus", "gloo"], default="chorus")
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--mode", choices=["sync", "delayed", "localsgd", "diloco"], default="diloco")
    p.add_argument("--sync-every", type=int, default=32, help="H, localsgd and diloco")
    p.add_argument("--compress", choices=["none", "bf16", "int8"], default="none")
    p.add_argument("--fragments", type=int, default=1, help="diloco: streamed in F fragments")
    p.add_argument("--overlap", action="store_true",
                   help="diloco: each sync overlaps the next inner step")
    p.add_argument("--outer-lr", type=float, default=0.7)
    p.add_argument("--outer-momentum", type=float, default=0.9)
    p.add_argument("--check-every", type=int, default=0, help="divergence every K steps (0: no)")
    p.add_argument("--divergence-limit", type=float, default=None,
                   help="synchronise at once past this relative divergence")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default=None,
                   help="default: adam for diloco, sgd otherwise")
    p.add_argument("--lr", type=float, default=None, help="default: 1e-3 adam, 0.05 sgd")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--synthetic", action="store_true", help="random learnable data, no files")
    p.add_argument("--timeout", type=float, default=120, help="seconds, for every collective")
    p.add_argument("--metrics", metavar="CSV",
                   help="rank 0 writes one row per step: loss, bytes sent in the step, "
                        "divergence (max, rms) where measured, forced_sync, test accuracy "
                        "(--eval-every), training seconds so far (evaluations left out)")
    p.add_argument("--eval-every", type=int, default=0, help="test accuracy every K steps")
    p.add_argument("--target-accuracy", type=float, default=None,
                   help="with --eval-every: say when an evaluation first reaches this (0.85)")
    p.add_argument("--stop-at-target", action="store_true",
                   help="end the training at the first evaluation that reaches the target")
    p.add_argument("--results", metavar="JSON",
                   help="rank 0 writes the settings, evaluations, summary and divergence history")
    p.add_argument("--log-every", type=int, default=100)
    async_elastic.add_args(p)
    args = p.parse_args()
    async_elastic.check_args(p, args)
    if args.compress != "none" and args.mode in ("delayed", "localsgd"):
        p.error(f"--compress {args.compress}: for --mode sync or diloco only")
    if args.eval_every < 0:
        p.error(f"--eval-every must be >= 0, got {args.eval_every}")
    if (args.target_accuracy is not None or args.stop_at_target) and not args.eval_every:
        p.error("--target-accuracy and --stop-at-target need --eval-every K")
    if args.stop_at_target and args.target_accuracy is None:
        p.error("--stop-at-target needs --target-accuracy")
    args.optimizer = args.optimizer or ("adam" if args.mode == "diloco" else "sgd")
    args.lr = args.lr or (1e-3 if args.optimizer == "adam" else 0.05)
    return args


def make_trainer(args, model, opt, world, say):
    """(the module to call, a step function, a function giving the bytes sent so far)."""
    from chorus import async_training as at
    from chorus import hooks

    common = dict(check_every=args.check_every, divergence_limit=args.divergence_limit, log=say)
    if args.mode == "sync":
        ddp = DDP(model)
        n_bytes = 4 * sum(p.numel() for p in model.parameters())
        if args.compress == "none":
            return ddp, opt.step, lambda steps: steps * 2 * n_bytes * (world - 1) // world, None
        state = hooks.CompressionState(args.compress, min_elements=0)
        ddp.register_comm_hook(state, hooks.compress_hook)

        def sent(_steps):  # the hooks count the payload; all-reduced or all-gathered
            ring = 2 * (world - 1) / world
            gathered = args.compress == "int8" or state.gather_16bit
            return int(state.bytes_sent * ((world - 1) if gathered else ring))

        return ddp, opt.step, sent, None
    if args.mode == "delayed":
        w = at.DelayedUpdates(model, opt, **common)
    elif args.mode == "localsgd":
        w = at.LocalSGD(model, opt, sync_every=args.sync_every, **common)
    else:
        w = at.DiLoCo(model, opt, sync_every=args.sync_every, outer_lr=args.outer_lr,
                      outer_momentum=args.outer_momentum, compress=args.compress,
                      fragments=args.fragments, overlap=args.overlap, **common)
    return model, w.step, lambda _steps: w.bytes_sent, w


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world, say = train_ddp.join_group(args, "train_async")

    torch.manual_seed(args.seed)
    train_set, test_set = train_ddp.load_data(args)

    def build(say):  # a model, its optimizer and what makes the wrapper
        model = models.MODELS[args.model]()
        if args.optimizer == "adam":
            opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
        return model, opt, lambda: make_trainer(args, model, opt, world, say)[3]

    if args.elastic:
        async_elastic.main(args, build, train_set, test_set)
    model, opt, _ = build(say)
    module, step, sent, wrapper = make_trainer(args, model, opt, world, say)
    say(f"train_async: {world} ranks, backend {args.backend}, {args.model}, mode {args.mode}"
        + (f" H={args.sync_every}" if args.mode in ("localsgd", "diloco") else "")
        + f", compress {args.compress}, {args.optimizer} lr {args.lr}, batch {args.batch} per "
        f"rank, {'synthetic data' if args.synthetic else args.data}")

    rows, steps, start, sent_before = [], 0, time.perf_counter(), 0
    evals, eval_s, reached = [], 0.0, None  # (step, train_s, accuracy); seconds evaluating
    x_all, y_all = train_set
    done = False
    for epoch in range(args.epochs):
        idx = fashion_mnist.shard(len(x_all), rank, world, epoch, args.seed)
        for first in range(0, len(idx) - args.batch + 1, args.batch):
            if args.steps and steps >= args.steps:
                done = True
                break
            b = idx[first:first + args.batch]
            opt.zero_grad()
            loss = F.cross_entropy(module(x_all[b]), y_all[b])
            loss.backward()
            step()
            steps += 1
            d = wrapper.divergence if wrapper else None
            sent_now = sent(steps)
            row = dict(step=steps, loss=loss.item(), bytes_sent=sent_now - sent_before,
                       divergence_max=d.max if d and d.step == steps else "",
                       divergence_rms=d.rms if d and d.step == steps else "",
                       forced_sync=int(d.forced_sync) if d and d.step == steps else "",
                       test_accuracy="", train_s=time.perf_counter() - start - eval_s)
            rows.append(row)
            sent_before = sent_now
            if steps % args.log_every == 0:
                say(f"epoch {epoch} step {steps} loss {loss.item():.4f}")
            if args.eval_every and steps % args.eval_every == 0:
                t0 = time.perf_counter()
                train_s = t0 - start - eval_s
                accuracy = train_ddp.test_accuracy(model, test_set, rank, world)
                eval_s += time.perf_counter() - t0
                evals.append((steps, train_s, accuracy))
                row["test_accuracy"] = accuracy
                say(f"step {steps}: test accuracy {accuracy * 100:.2f} % after {train_s:.1f} s "
                    "of training")
                if reached is None and args.target_accuracy is not None \
                        and accuracy >= args.target_accuracy:
                    reached = (steps, train_s)
                    say(f"target accuracy {args.target_accuracy * 100:.2f} % reached at step "
                        f"{steps} after {train_s:.1f} s of training "
                        f"({time.perf_counter() - start:.1f} s with evaluations)")
                    if args.stop_at_target:
                        done = True
                        break
        if done:
            break
    elapsed = time.perf_counter() - start
    train_s = elapsed - eval_s
    if args.target_accuracy is not None and reached is None:
        say(f"target accuracy {args.target_accuracy * 100:.2f} % not reached in {steps} steps")
    train_bytes = sent(steps)
    before = None
    if wrapper:
        before = train_ddp.test_accuracy(model, test_set, rank, world)
        wrapper.synchronize()
        say(f"replicas' test accuracy before the final synchronisation: {before * 100:.2f} %")
        forced = sum(d.forced_sync for d in wrapper.history)
        if wrapper.history:
            worst = max(d.max for d in wrapper.history)
            say(f"divergence: {len(wrapper.history)} measurements, largest {worst:.3e} relative "
                f"to the parameter norm, {forced} forced synchronisations")
    accuracy = train_ddp.test_accuracy(model, test_set, rank, world)
    last_tensors = []
    differing = train_ddp.ranks_with_other_parameters(model, last_tensors)
    say(f"{steps} steps in {elapsed:.1f} s ({train_s:.1f} s of training, evaluations left out); "
        f"bytes sent per step (mean, rank 0): {train_bytes / max(steps, 1):.0f}")
    say(f"final test accuracy: {accuracy * 100:.2f} %")
    if differing == 0:
        say(f"parameters: bit-identical on all {world} ranks")
    else:
        say(f"parameters: {differing} of {world} ranks differ from rank 0")
    if args.metrics and rank == 0:
        with open(args.metrics, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["step"])
            out.writeheader()
            out.writerows(rows)
    if args.results and rank == 0:
        settings = {k: v for k, v in vars(args).items()
                    if k not in ("results", "metrics", "data", "log_every")}
        with open(args.results, "w") as f:
            json.dump({"settings": settings, "world": world, "torch": torch.__version__,
                       "steps": steps, "train_s": train_s, "wall_s": elapsed,
                       "bytes_sent": train_bytes, "bytes_per_step": train_bytes / max(steps, 1),
                       "evaluations": [dict(step=s_, train_s=t_, accuracy=a_)
                                       for s_, t_, a_ in evals],
                       "target": None if reached is None else dict(step=reached[0],
                                                                  train_s=reached[1]),
                       "accuracy_before_sync": before, "final_accuracy": accuracy,
                       "bit_identical": differing == 0,
                       "divergence": [dataclasses.asdict(d) for d in
                                      (wrapper.history if wrapper else [])]}, f, indent=1)
    del module, wrapper
    dist.destroy_process_group()
    sys.exit(0 if differing == 0 else 3)


if __name__ == "__main__":
    main()

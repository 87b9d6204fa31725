#!/usr/bin/env python3
"""One replica group of torchft's fault-tolerant DDP (one process), on train_elastic.py's model
and data, for torch_recovery.py's side-by-side measurement.

    TORCHFT_LIGHTHOUSE=http://127.0.0.1:PORT torchft_trainer.py --replica R --steps 120 \\
        [--fail-step S] [--pg gloo|chorus] --events FILE

Each replica group is one process with its own TCPStore (torchft's Manager needs one per group)
and torchft's ProcessGroupGloo across groups (--pg chorus: chorus.torchft.ProcessGroupChorus,
the chorus backend rebuilt by the Manager at every quorum); torchft's Manager makes every step a
quorum + commit: the optimizer steps only when every participant's all-reduce succeeded. The gradients
go through the Manager's all-reduce in one flat buffer. The batch of a
step is the replica's slice of the global batch, as in train_elastic.py (64 samples per rank).
--fail-step S: this process SIGKILLs itself in step S's backward (its first life only). Events
(one JSON object per line, wall-clock seconds) go to --events: "kill" before the kill, and per
step "commit" (after a committed optimizer step) or "discard", with the manager's step and the
number of participants.
"""

import argparse
import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))

import fashion_mnist  # noqa: E402
import models  # noqa: E402
from train_elastic import process_start_time  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replica", type=int, required=True)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--data-cache", metavar="DIR", help="as train_elastic.py's")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--timeout", type=float, default=10, help="seconds, collectives and RPCs")
    p.add_argument("--quorum-timeout", type=float, default=None,
                   help="seconds for the Manager's quorum (default: --timeout); the lighthouse "
                        "waits for a dead replica's heartbeat to go stale (5 s) before a quorum "
                        "without it, and a survivor whose quorum times out first raises")
    p.add_argument("--fail-step", type=int, default=-1)
    p.add_argument("--events", required=True)
    p.add_argument("--min-replicas", type=int, default=1)
    p.add_argument("--pg", choices=["gloo", "chorus"], default="gloo",
                   help="the process group across replica groups")
    # For torch_goodput.py: the driver ends the run and replica 0 evaluates.
    p.add_argument("--stop-file", help="once this file holds a step number, stop at that step")
    p.add_argument("--evaluate", action="store_true",
                   help="replica 0 logs the test accuracy at the end (event \"accuracy\")")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--host-addr", default="127.0.0.1",
                   help="the address this replica's store and Manager advertise (a namespace's "
                        "own on the emulated cluster, where every host has the machine's name)")
    return p.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    if args.host_addr != "127.0.0.1":
        # torchft's checkpoint server (a replacement's recovery from a peer) advertises
        # socket.gethostname(), which on the emulated cluster names every namespace alike.
        import socket

        socket.gethostname = lambda: args.host_addr
    from torchft import Manager, Optimizer, ProcessGroupGloo
    from torch.distributed import TCPStore

    events = open(args.events, "a", buffering=1)

    def log(kind, **fields):
        events.write(json.dumps(dict(t=time.time(), kind=kind, replica=args.replica,
                                     pid=os.getpid(), **fields)) + "\n")

    replacement = bool(os.environ.get("TORCHFT_BENCH_REPLACEMENT"))
    log("start", replacement=replacement, process_start=process_start_time())

    torch.manual_seed(args.seed)
    model = models.MODELS[args.model]()
    if args.synthetic:
        x_all, y_all = fashion_mnist.synthetic("train", 8192, 1)
    else:
        x_all, y_all = fashion_mnist.load("train", args.data, args.data_cache)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    def state_dict():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optim"])

    store = TCPStore(args.host_addr, 0, is_master=True, wait_for_workers=False)
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.pg == "chorus":
        from chorus.torchft import ProcessGroupChorus

        pg = ProcessGroupChorus(timeout=timeout)
    else:
        pg = ProcessGroupGloo(timeout=timeout)
    manager = Manager(
        pg=pg,
        min_replica_size=args.min_replicas,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        replica_id=f"chorus_bench_{args.replica}",
        timeout=timeout,
        quorum_timeout=(timeout if args.quorum_timeout is None
                        else datetime.timedelta(seconds=args.quorum_timeout)),
        connect_timeout=timeout,
        rank=0,
        world_size=1,
        store_addr=args.host_addr,
        **({} if args.host_addr == "127.0.0.1" else {"hostname": args.host_addr}),
        store_port=store.port,
    )
    # Gradients averaged by the Manager's own all-reduce in one flat buffer (DDP's bucketing in
    # one piece): torchft 0.2.0's DDP wrapper fails an assertion in its communication hook once
    # a collective has failed, where the Manager itself records the error and discards the step.
    params = [p for p in model.parameters()]
    optimizer = Optimizer(manager, opt)
    fail_here = args.fail_step >= 0 and not replacement
    stop_at = []
    while manager.current_step() < args.steps:
        step = manager.current_step()
        if not stop_at and args.stop_file and os.path.exists(args.stop_file):
            with open(args.stop_file) as f:
                stop_at.append(int(f.read().strip() or args.steps))
        if stop_at and step >= stop_at[0]:
            break
        optimizer.zero_grad()
        # The replica's slice of the step's global batch (participants known after the quorum,
        # which zero_grad started; the slice only decides which samples, not the arithmetic).
        lo = (step * 4 + args.replica) * args.batch % (len(x_all) - args.batch)
        x, y = x_all[lo : lo + args.batch], y_all[lo : lo + args.batch]
        loss = F.cross_entropy(model(x), y)
        if fail_here and step == args.fail_step:
            log("kill", step=step)
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        manager.allreduce(flat).wait()  # the average over the participants; errors recorded
        at = 0
        for p in params:
            n = p.grad.numel()
            p.grad.copy_(flat[at : at + n].view_as(p.grad))
            at += n
        before = manager.current_step()
        optimizer.step()
        committed = manager.current_step() > before
        log("commit" if committed else "discard", step=before,
            participants=manager.num_participants())
    if args.evaluate and args.replica == 0:
        if args.synthetic:
            x_test, y_test = fashion_mnist.synthetic("t10k", 256, 1)
        else:
            x_test, y_test = fashion_mnist.load("t10k", args.data, args.data_cache)
        with torch.no_grad():
            correct = (model(x_test).argmax(dim=1) == y_test).sum().item()
        log("accuracy", accuracy=correct / len(x_test), step=manager.current_step())
    log("done", step=manager.current_step())


if __name__ == "__main__":
    main()

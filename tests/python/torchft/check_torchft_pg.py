#!/usr/bin/python3
"""chorus.torchft.ProcessGroupChorus under torchft's Manager, a replica SIGKILLed mid-step:

  a torchft lighthouse started here on loopback and --replicas replica groups of one process
  each (this file with --worker R): each its own TCPStore, torchft's Manager on
  ProcessGroupChorus, a small MLP on synthetic data, the gradients averaged by manager.allreduce,
  the optimizer stepped through torchft's Optimizer (only on a committed step). The last replica
  SIGKILLs itself in the backward of the first step from --fail-step on at which every replica
  takes part. The survivors must discard that step, get a new quorum, rebuild the chorus group
  and commit again within --bound seconds of the kill (far below the collective --timeout: a
  survivor's pending all-reduce fails as soon as the peer is gone), train to --steps with the
  others only, and end with identical parameters. Four replicas by default: with three, every
  survivor is a ring neighbour of the dead one and notices on any backend.

    check_torchft_pg.py [--replicas 4] [--steps 16] [--fail-step 6] [--timeout 20] [--bound 8]
                        [--pg chorus|gloo] [--fail-signal kill|stop]

--pg gloo runs torchft's own ProcessGroupGloo instead, for comparison: a survivor whose gloo peer
is alive but waiting sits out the collective timeout (20.06 s here against chorus's 1.16 s, the
lighthouse's 1 s join timeout included), so it misses the bound. --fail-signal stop: the replica
SIGSTOPs itself instead (killed by this script once the others are done); the chorus group's
survivors learn of it from the backend's heartbeat (CHORUS_HEARTBEAT_SECONDS, 5 s by default):
5.85 s here with --bound 12, gloo 20.06 s. Exits 77 (skipped) where torchft is not installed.
"""

import argparse
import datetime
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--replicas", type=int, default=4)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--fail-step", type=int, default=6)
    p.add_argument("--timeout", type=float, default=20, help="collective and RPC timeout, s")
    p.add_argument("--bound", type=float, default=8, help="kill to the next commit, s")
    p.add_argument("--pg", choices=["chorus", "gloo"], default="chorus")
    p.add_argument("--fail-signal", choices=["kill", "stop"], default="kill")
    p.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--events", help=argparse.SUPPRESS)
    return p.parse_args()


def ready_count(events):
    with open(events) as f:
        return sum(1 for line in f if '"kind": "ready"' in line)


def worker(args):
    import torch
    import torch.nn.functional as F
    from torch.distributed import TCPStore
    from torchft import Manager, Optimizer, ProcessGroupGloo

    from chorus.torchft import ProcessGroupChorus

    torch.set_num_threads(1)
    events = open(args.events, "a", buffering=1)

    def log(kind, **fields):
        events.write(json.dumps(dict(t=time.time(), kind=kind, replica=args.worker, **fields))
                     + "\n")

    torch.manual_seed(1)  # the same initial model everywhere
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + args.worker)  # each replica its own samples
    timeout = datetime.timedelta(seconds=args.timeout)
    pg = ProcessGroupChorus(timeout=timeout) if args.pg == "chorus" else ProcessGroupGloo(
        timeout=timeout)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    manager = Manager(
        pg=pg,
        min_replica_size=args.replicas - 1,
        load_state_dict=lambda sd: (model.load_state_dict(sd["model"]),
                                    opt.load_state_dict(sd["optim"])),
        state_dict=lambda: {"model": model.state_dict(), "optim": opt.state_dict()},
        replica_id=f"chorus_test_{args.worker}",
        timeout=timeout,
        quorum_timeout=timeout,
        connect_timeout=timeout,
        rank=0,
        world_size=1,
        store_addr="127.0.0.1",
        store_port=store.port,
    )
    optimizer = Optimizer(manager, opt)
    params = list(model.parameters())
    # Start together: a replica that came up late (imports on a loaded machine) would find the
    # others done, and the kill must hit a step that every replica takes part in.
    log("ready")
    deadline = time.monotonic() + args.timeout
    while ready_count(args.events) < args.replicas:
        if time.monotonic() > deadline:
            raise RuntimeError(f"replica {args.worker}: the others were not ready in time")
        time.sleep(0.05)
    dying = args.worker == args.replicas - 1
    try:
        while manager.current_step() < args.steps:
            optimizer.zero_grad()  # starts the step's quorum
            x = torch.randn(16, 32, generator=data)
            y = torch.randint(0, 4, (16,), generator=data)
            loss = F.cross_entropy(model(x), y)
            step = manager.current_step()
            if step == 1 and args.pg == "chorus":
                # The collectives run on the chorus backend, not on a fallback.
                name = manager._pg.parent._get_backend(torch.device("cpu")).name()
                assert name == "chorus", f"the group's CPU backend is {name}"
            if (dying and step >= args.fail_step
                    and manager.num_participants() == args.replicas):
                log("kill", step=step)
                os.kill(os.getpid(), signal.SIGSTOP if args.fail_signal == "stop" else
                        signal.SIGKILL)
            loss.backward()
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            manager.allreduce(flat).wait()  # average over the participants; errors recorded
            at = 0
            for p in params:
                p.grad.copy_(flat[at:at + p.numel()].view_as(p.grad))
                at += p.numel()
            optimizer.step()  # only where should_commit says every participant succeeded
            committed = manager.current_step() > step
            log("commit" if committed else "discard", step=step,
                participants=manager.num_participants())
        digest = hashlib.sha256()
        for p in params:
            digest.update(p.detach().numpy().tobytes())
        log("done", step=manager.current_step(), params=digest.hexdigest())
    finally:
        manager.shutdown(wait=False)
    return 0


def main():
    args = parse_args()
    if args.worker >= 0:
        return worker(args)
    try:
        from torchft.coordination import LighthouseServer
    except ImportError as e:
        print(f"skipped: torchft is not installed here ({e})")
        return 77

    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=args.replicas - 1,
                                  join_timeout_ms=1000, quorum_tick_ms=100)
    fd, events = tempfile.mkstemp(prefix="torchft-pg-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, TORCHFT_LIGHTHOUSE=lighthouse.address(), OMP_NUM_THREADS="1")
    procs = []
    try:
        for r in range(args.replicas):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(r), "--events",
                   events, "--replicas", str(args.replicas), "--steps", str(args.steps),
                   "--fail-step", str(args.fail_step), "--timeout", str(args.timeout),
                   "--pg", args.pg, "--fail-signal", args.fail_signal]
            procs.append(subprocess.Popen(cmd, env=env))
        deadline = time.monotonic() + 3 * args.timeout + 30
        for proc in procs[:-1]:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        if args.fail_signal == "stop":
            procs[-1].kill()  # stopped since its step: the others are done
        procs[-1].wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print("FAIL: the replicas did not finish in time")
        return 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        lighthouse.shutdown()
    with open(events) as f:
        ev = [json.loads(line) for line in f]
    os.unlink(events)
    survivors = range(args.replicas - 1)
    errors = []
    for r in survivors:
        if procs[r].returncode != 0:
            errors.append(f"replica {r} exited {procs[r].returncode}")
    if procs[-1].returncode != -signal.SIGKILL:
        errors.append(f"replica {args.replicas - 1} exited {procs[-1].returncode}, not killed")
    kills = [e for e in ev if e["kind"] == "kill"]
    if not kills:
        print("FAIL: the last replica never reached its kill step:", *errors, sep="\n  ")
        return 1
    kill = kills[0]
    for r in survivors:
        after = [e for e in ev if e["replica"] == r and e["kind"] == "commit"
                 and e["t"] > kill["t"]]
        if not after:
            errors.append(f"replica {r} committed no step after the kill")
            continue
        took = after[0]["t"] - kill["t"]
        print(f"replica {r}: {args.fail_signal} (step {kill['step']}) to its next commit (step "
              f"{after[0]['step']}, {after[0]['participants']} replicas) {took:.3f} s")
        if took > args.bound:
            errors.append(f"replica {r}: {took:.3f} s from the {args.fail_signal} to the next "
                          f"commit, over {args.bound} s")
        if after[-1]["participants"] != args.replicas - 1:
            errors.append(f"replica {r}: last commit with {after[-1]['participants']} replicas")
        discards = [e for e in ev if e["replica"] == r and e["kind"] == "discard"
                    and e["t"] > kill["t"]]
        print(f"replica {r}: {len(discards)} step(s) discarded after the kill")
    done = {e["replica"]: e for e in ev if e["kind"] == "done"}
    if sorted(done) != list(survivors):
        errors.append(f"replicas that finished: {sorted(done)}")
    elif len({done[r]["params"] for r in survivors}) != 1:
        errors.append("the survivors' parameters differ")
    elif any(done[r]["step"] != args.steps for r in survivors):
        errors.append(f"steps committed: {[done[r]['step'] for r in survivors]}")
    if errors:
        print("FAIL:", *errors, sep="\n  ")
        return 1
    print(f"ok: {args.pg} group under torchft's Manager; {args.replicas - 1} survivors committed "
          f"{args.steps} steps, parameters identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())

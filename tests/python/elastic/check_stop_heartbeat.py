#!/usr/bin/python3
"""A rank stopped (SIGSTOP) in the middle of a DDP step, caught by the heartbeat; or (--signal
stall) a rank alive but stuck before a step (a hung data loader), caught by the stall check:

  examples/torch/train_elastic.py on 4 ranks (env://, no launcher to kill anything); rank
  --fail-rank stops itself in step --fail-step's backward. With CHORUS_HEARTBEAT_SECONDS=H the
  survivors must declare it dead and commit the redone step within --bound seconds (H plus
  slack for a loaded machine, far below the group's --timeout, which is what they would wait
  without the heartbeat), and end bit-identical on 3 ranks. Rank 0 then wakes the stopped rank
  (SIGCONT; a stalled one comes back by itself): it must say that it was removed from the job
  and exit 4, not hang or go on.

With --hsdp S the example runs HSDP (replica groups of S ranks): the stopped rank's replica-mates
leave too (exit 4, saying so), and the 4 - S ranks of the other replica groups go on.

    check_stop_heartbeat.py --example PATH [--signal stop|stall] [--heartbeat H] [--bound S]
                            [--timeout T] [--hsdp S]
Exits 77 (skipped) where this torch cannot shrink a group in place.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ddp"))
from run_ranks import free_port, start, stop  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--example", required=True)
    p.add_argument("--fail-rank", type=int, default=2)
    p.add_argument("--fail-step", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--signal", choices=["stop", "stall"], default="stop")
    p.add_argument("--heartbeat", type=float, default=2)
    p.add_argument("--bound", type=float, default=15)
    p.add_argument("--timeout", type=float, default=60, help="the group's (collective) timeout")
    p.add_argument("--hsdp", type=int, default=0, metavar="S")
    args = p.parse_args()
    import chorus.torch
    import torch

    if not chorus.torch.can_shrink():
        print(f"skipped: torch {torch.__version__} cannot shrink a group in place")
        return 77
    os.environ["CHORUS_HEARTBEAT_SECONDS"] = str(args.heartbeat)  # for the ranks started here
    command = [sys.executable, args.example, "--synthetic", "--batch", "16", "--steps",
               str(args.steps), "--timeout", str(args.timeout), "--log-every", "1000",
               "--fail-rank", str(args.fail_rank), "--fail-step", str(args.fail_step),
               "--fail-signal", args.signal]
    if args.signal == "stall":
        # Stuck well past the bound, so that only the stall check can let the others go on.
        command += ["--stall-for", str(args.bound + 3)]
    lost = [args.fail_rank]
    if args.hsdp:
        command += ["--hsdp", str(args.hsdp)]
        first = args.fail_rank // args.hsdp * args.hsdp
        lost = list(range(first, first + args.hsdp))
    left = 4 - len(lost)
    print("+", " ".join(command), f"(4 ranks, CHORUS_HEARTBEAT_SECONDS={args.heartbeat})",
          flush=True)
    logs = [tempfile.TemporaryFile(mode="w+") for _ in range(4)]
    procs = start(4, command, free_port(), logs)
    deadline = time.monotonic() + args.timeout + 30
    try:
        while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop(procs)
    outputs = []
    for rank, log in enumerate(logs):
        log.seek(0)
        outputs.append(log.read())
        print(f"----- rank {rank} (exit {procs[rank].returncode}) -----\n{outputs[-1]}")
    failures = []
    codes = [proc.returncode for proc in procs]
    want = [4 if r in lost else 0 for r in range(4)]
    if codes != want:
        failures.append(f"exit statuses {codes}, expected {want}")
    out = outputs[0]
    for text in [f"4 -> {left} ranks (lost {','.join(map(str, lost))})",
                 f"parameters: bit-identical on all {left} ranks",
                 f"{args.steps} steps committed"]:
        if text not in out:
            failures.append(f"rank 0's output lacks {text!r}")
    found = re.search(r"recovered in ([0-9.]+) s", out)
    if not found:
        failures.append("rank 0 printed no recovery time")
    elif float(found.group(1)) > args.bound:
        failures.append(f"recovered in {found.group(1)} s, more than {args.bound} s (heartbeat "
                        f"{args.heartbeat} s, group timeout {args.timeout} s)")
    removed = outputs[args.fail_rank]
    told = [f"rank {args.fail_rank} was removed from the job", "was declared dead"]
    if args.hsdp:  # it finds its replica group gone, or that it was declared dead
        told = [f"rank {args.fail_rank} was removed from the job"
                if "was removed from the job" in removed else
                f"rank {args.fail_rank} leaves the job"]
    for text in told:
        if text not in removed:
            failures.append(f"the woken rank's output lacks {text!r}")
    for mate in lost:  # it finds its replica group broken, or comes late to the change
        if mate != args.fail_rank and not any(
                f"rank {mate} {what}" in outputs[mate]
                for what in ("leaves the job", "was removed from the job")):
            failures.append(f"rank {mate}'s output says neither that it leaves the job nor "
                            "that it was removed")
    if failures:
        print("check_stop_heartbeat: FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    print(f"{'stopped' if args.signal == 'stop' else 'stalled'} rank declared dead and left out: "
          f"recovered in {found.group(1)} s "
          f"(heartbeat {args.heartbeat} s, bound {args.bound} s); the woken rank was told")
    return 0


if __name__ == "__main__":
    sys.exit(main())

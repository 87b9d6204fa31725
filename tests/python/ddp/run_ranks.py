#!/usr/bin/python3
"""Starts N ranks of a Python script with what torch.distributed's env:// reads, and fails
unless every rank exits 0 in time.

    run_ranks.py --world 2 --timeout 60 [--expect TEXT]... -- script.py [args...]

Each rank is `python3 script.py args` with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port). When one rank fails, the others are stopped
at once instead of waiting for their group's timeout; past --timeout every rank is killed.
--expect TEXT: each rank's output must contain TEXT ("{rank}" is replaced by the rank).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(world, command, port, logs):
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        procs.append(subprocess.Popen(command, env=env, stdout=logs[rank],
                                      stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def stop(procs):
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()


def supervise(procs, timeout):
    """Returns a failure description, or None when every rank exited 0."""
    deadline = time.monotonic() + timeout
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            time.sleep(1.0)  # let the others report what they saw, then stop them
            stop(procs)
            return ", ".join(f"rank {r} exited with {procs[r].returncode}" for r in failed)
        if all(c == 0 for c in codes):
            return None
        if time.monotonic() > deadline:
            stop(procs)
            return f"timed out after {timeout} s"
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--expect", action="append", default=[])
    p.add_argument("script", nargs=argparse.REMAINDER)
    args = p.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    command = [sys.executable] + script

    logs = [tempfile.TemporaryFile(mode="w+") for _ in range(args.world)]
    procs = start(args.world, command, free_port(), logs)
    try:
        failure = supervise(procs, args.timeout)
    finally:
        stop(procs)
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
    for rank, out in enumerate(outputs):
        for text in args.expect:
            if failure is None and text.replace("{rank}", str(rank)) not in out:
                failure = f"rank {rank} did not print {text.replace('{rank}', str(rank))!r}"
    for rank, out in enumerate(outputs):
        print(f"----- rank {rank} -----\n{out}", end="" if out.endswith("\n") else "\n")
    if failure:
        print(f"run_ranks: FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"run_ranks: all {args.world} ranks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

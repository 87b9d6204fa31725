#!/usr/bin/python3
"""Starts N rank processes of one Python script, the way torch's env:// rendezvous expects them.

    launch.py -n N [--timeout S] [--python EXE] [--pythonpath DIR] [--expect RANK=CODE ...]
              -- script.py args...

Every rank runs EXE (default /usr/bin/python3, the interpreter with torch) with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, and PYTHONPATH=DIR in front of the
inherited one.
Each rank is its own process group, so that on a timeout everything it started is killed too.
Exits 0 when every rank exits with its expected code (0 unless --expect says otherwise); else
prints every rank's output and exits 1.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

PYTHON = "/usr/bin/python3"  # the first python3 on PATH may be an interpreter without torch


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds before every rank is killed")
    p.add_argument("--python", default=PYTHON,
                   help="interpreter of the ranks (default %(default)s)")
    p.add_argument("--pythonpath", default="",
                   help="put in front of PYTHONPATH (the built package)")
    p.add_argument("--expect", action="append", default=[], metavar="RANK=CODE",
                   help="exit code expected from a rank (negative: killed by that signal)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- script.py args...")
    args = p.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        p.error("no script given")
    expected = {r: 0 for r in range(args.nproc)}
    for item in args.expect:
        rank, _, code = item.partition("=")
        expected[int(rank)] = int(code)
    args.expected = expected
    return args


def rank_env(args, rank, port):
    env = dict(os.environ)
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.nproc),
               LOCAL_WORLD_SIZE=str(args.nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    if args.pythonpath:
        paths = (args.pythonpath, env.get("PYTHONPATH"))
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# torch's store on rank 0 listens on MASTER_PORT, which free_port() found free a moment before:
# another test can take it meanwhile. Such a run is started again on a new port, a few times.
PORT_TAKEN = ("address already in use", "eaddrinuse")
PORT_TRIES = 3


def run_once(args, port, procs):
    """Starts the ranks on `port` and waits for them: (timed_out, exit codes, outputs, seconds)."""
    logs = []
    start = time.monotonic()
    try:
        for rank in range(args.nproc):
            log = tempfile.TemporaryFile(mode="w+b")
            logs.append(log)
            procs.append(subprocess.Popen([args.python] + args.command,
                                          env=rank_env(args, rank, port),
                                          stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
        deadline = start + args.timeout
        timed_out = False
        while any(p.poll() is None for p in procs):
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                kill_group(p)
        for p in procs:
            p.wait()
    texts = []
    for log in logs:
        log.seek(0)
        texts.append(log.read().decode(errors="replace"))
        log.close()
    return timed_out, [p.returncode for p in procs], texts, time.monotonic() - start


def main(argv):
    args = parse_args(argv)
    procs = []

    def stop(signum, _frame):
        # Stopped from outside (ctest's own timeout, ^C): the ranks, in their own sessions, go too.
        for p in procs:
            kill_group(p)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for attempt in range(1, PORT_TRIES + 1):
        port = free_port()
        procs.clear()
        timed_out, codes, texts, elapsed = run_once(args, port, procs)
        ok = not timed_out and all(codes[r] == args.expected[r] for r in range(args.nproc))
        taken = not ok and any(w in t.lower() for t in texts for w in PORT_TAKEN)
        if not taken or attempt == PORT_TRIES:
            break
        print(f"launch.py: MASTER_PORT {port} was taken before rank 0 listened on it (address "
              f"already in use): starting the ranks again on another port")
    if timed_out:
        print(f"launch.py: timed out after {args.timeout:.0f} s; killed the ranks still running")
    for rank, text in enumerate(texts):
        if not ok or os.environ.get("CHORUS_TEST_VERBOSE"):
            print(f"----- rank {rank}: exit {codes[rank]} (expected {args.expected[rank]}) -----")
            sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    print(f"launch.py: {args.nproc} ranks of {' '.join(args.command)}: exit codes {codes}, "
          f"{elapsed:.1f} s: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

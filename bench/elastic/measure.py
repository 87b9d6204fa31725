"""Measures torchelastic's restart-everything recovery on this machine: torchrun --max-restarts 1
with the gloo backend runs ckpt_trainer.py (a checkpoint after every step), one rank SIGKILLs
itself at a chosen step, torchrun stops the survivors and starts every rank again, and they resume
from the checkpoint. Reported per world size: the time from the kill to the first step completed
after the restart (median over the runs), split into the agent's reaction (kill to the new
processes' start), the start-up (importing torch, the process group, loading the checkpoint) and
the first step.

    /usr/bin/python3 bench/elastic/measure.py --sizes 2 4 8 --runs 3
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))


def free_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_events(directory):
    events = []
    for name in os.listdir(directory):
        if name.startswith("events-"):
            rank = int(name[len("events-") : -len(".jsonl")])
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                events += [dict(json.loads(line), rank=rank) for line in f]
    return events


def one_run(args, size, workdir):
    env = dict(os.environ, ELASTIC_BENCH_DIR=workdir, ELASTIC_KILL_RANK=str(size - 1),
               ELASTIC_KILL_STEP=str(args.kill_step), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node",
           str(size), "--max_restarts", "1", "--monitor_interval", str(args.monitor_interval),
           "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_loopback_port()}",
           "--rdzv_id", str(uuid.uuid4()), "--redirects", "2", "--tee", "2",
           "--log_dir", os.path.join(workdir, "logs"), os.path.join(HERE, "ckpt_trainer.py"),
           "--steps", str(args.steps)]
    begun = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.run_timeout,
                          check=False)
    wall = time.time() - begun
    if proc.returncode != 0:
        raise RuntimeError(f"torchrun exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    events = read_events(workdir)
    kill = [e for e in events if e["kind"] == "kill"]
    if len(kill) != 1:
        raise RuntimeError(f"expected one kill event, got {len(kill)}")
    killed_at = kill[0]["time"]
    again = [e for e in events if e["attempt"] == 1]
    started = min(e["process_started"] for e in again if e["kind"] == "start")
    ready = max(e["time"] for e in again if e["kind"] == "ready")
    resumed = {e["step"] for e in again if e["kind"] == "resumed"}
    first_steps = {}
    for e in again:
        if e["kind"] == "step" and e["rank"] not in first_steps:
            first_steps[e["rank"]] = e["time"]
    if len(first_steps) != size:
        raise RuntimeError(f"only {len(first_steps)} of {size} ranks completed a step after the restart")
    stepped = max(first_steps.values())
    return {
        "total": stepped - killed_at,
        "react": started - killed_at,
        "startup": ready - started,
        "first_step": stepped - ready,
        "resumed_step": sorted(resumed),
        "wall": wall,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--kill-step", type=int, default=4)
    parser.add_argument("--monitor-interval", type=float, default=5.0,
                        help="torchrun --monitor_interval (its default: 5 s)")
    parser.add_argument("--run-timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="keep the runs' event files")
    args = parser.parse_args()

    print(f"# torch {__import__('torch').__version__}, {os.cpu_count()} CPUs, monitor_interval "
          f"{args.monitor_interval} s, kill at step {args.kill_step} of {args.steps}, {args.runs} runs")
    print(f"{'ranks':>5} {'median_s':>9} {'min_s':>7} {'max_s':>7} {'react_s':>8} {'startup_s':>9} "
          f"{'step_s':>7}  runs_s")
    for size in args.sizes:
        results = []
        for _ in range(args.runs):
            workdir = tempfile.mkdtemp(prefix=f"torchelastic-{size}-")
            try:
                results.append(one_run(args, size, workdir))
            finally:
                if not args.keep:
                    shutil.rmtree(workdir, ignore_errors=True)
        totals = [r["total"] for r in results]
        med = statistics.median

        def col(key, rows=results):
            return med([r[key] for r in rows])

        print(f"{size:>5} {med(totals):>9.2f} {min(totals):>7.2f} {max(totals):>7.2f} {col('react'):>8.2f} "
              f"{col('startup'):>9.2f} {col('first_step'):>7.2f}  " + " ".join(f"{t:.2f}" for t in totals),
              flush=True)
        for r in results:
            if r["resumed_step"] != [args.kill_step]:
                print(f"#   note: resumed at step {r['resumed_step']}, killed at {args.kill_step}")


if __name__ == "__main__":
    main()

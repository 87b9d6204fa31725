#!/usr/bin/env python3
"""PyTorch training that loses a rank, Chorus against torchft in the same run: the time from the
kill to the next committed step on the survivors.

    bench/elastic/torch_recovery.py --build build --ranks 4 --runs 5 --timeout 5 \
        [--torchft-pg gloo,chorus]

Chorus: `chorus-run -n N --elastic --max-restarts 0 --min-ranks 2 -- train_elastic.py --fail-rank
N-2 --fail-step S` (chorus.torch.elastic.Trainer; rank 0 prints "recovered in X s", from the
failure to the next committed step). torchft (PyPI `torchft`, scripts/install-torch2 --torchft):
its lighthouse (`torchft_lighthouse --min_replicas N-1 --quorum_tick_ms 100 --join_timeout_ms
1000`) and N replica groups of one process each (torchft_trainer.py: its Manager, its
ProcessGroupGloo, the same MLP, data, batch and learning rate), replica N-2 SIGKILLing itself in
step S's backward; the figure is the time from the kill to replica 0's commit of step S (which
the dead replica never joined). Both use the
same collective timeout (--timeout; torchft's Manager also takes it for its quorum and RPCs; the
lighthouse's heartbeat timeout is its default, 5 s). --torchft-pg: the process group(s) torchft's
Manager gets, gloo (its own ProcessGroupGloo, the default) and/or chorus
(chorus.torchft.ProcessGroupChorus), each a system of its own in the table. Runs alternate between
the systems. Prints a table and, with --json, writes every run.
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chorus_run(args, python):
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"), OMP_NUM_THREADS="1")
    cmd = [os.path.join(args.build, "tools", "chorus-run", "chorus-run"), "-n", str(args.ranks),
           "--elastic", "--max-restarts", "0", "--min-ranks", "2", "--", python,
           os.path.join(ROOT, "examples", "torch", "train_elastic.py"), "--backend", "chorus",
           "--fail-rank", str(args.ranks - 2), "--fail-step", str(args.fail_step),
           "--steps", str(args.steps), "--timeout", str(args.timeout)]
    if args.synthetic:
        cmd.append("--synthetic")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.run_timeout)
    text = out.stdout + out.stderr
    m = re.search(r"recovered in ([0-9.]+) s", text)
    if not m:
        raise RuntimeError(f"chorus run: no 'recovered in' line (exit {out.returncode}):\n"
                           + text[-3000:])
    return float(m.group(1))


def torchft_run(args, python, pg="gloo"):
    bindir = os.path.dirname(python)
    lighthouse = os.path.join(bindir, "torchft_lighthouse")
    port = free_port()
    events = tempfile.NamedTemporaryFile(prefix="torchft-events-", suffix=".jsonl", delete=False)
    events.close()
    lh = subprocess.Popen([lighthouse, "--min_replicas", str(args.ranks - 1), "--quorum_tick_ms",
                           "100", "--join_timeout_ms", "1000", "--bind", f"127.0.0.1:{port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = []
    try:
        time.sleep(0.5)
        env = dict(os.environ, TORCHFT_LIGHTHOUSE=f"http://127.0.0.1:{port}", OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.join(args.build, "python"))
        for r in range(args.ranks):
            cmd = [python, os.path.join(HERE, "torchft_trainer.py"), "--replica", str(r),
                   "--steps", str(args.steps), "--timeout", str(args.timeout), "--events",
                   events.name, "--min-replicas", str(args.ranks - 1),
                   "--fail-step", str(args.fail_step if r == args.ranks - 2 else -1),
                   "--pg", pg]
            if args.synthetic:
                cmd.append("--synthetic")
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + args.run_timeout
        for p in procs:
            p.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        lh.kill()
        lh.wait()
    with open(events.name) as f:
        ev = [json.loads(line) for line in f]
    os.unlink(events.name)
    kills = [e for e in ev if e["kind"] == "kill"]
    if not kills:
        raise RuntimeError("torchft run: the replica never reached its kill step")
    t_kill = kills[0]["t"]
    # The step the replica died in, committed without it (a commit of an earlier step can land
    # just after the kill on a replica a step behind).
    after = [e for e in ev if e["kind"] == "commit" and e["replica"] == 0
             and e["step"] >= kills[0]["step"]]
    if not after:
        raise RuntimeError("torchft run: replica 0 committed no step after the kill")
    return after[0]["t"] - t_kill


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.expanduser(
        "~/.cache/chorus/venv-torch-2.15.0/bin/python"))
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--fail-step", type=int, default=30)
    p.add_argument("--timeout", type=float, default=5, help="collective timeout, seconds, both")
    p.add_argument("--run-timeout", type=float, default=300)
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--torchft-pg", default="gloo",
                   help="torchft's process group(s), comma-separated: gloo, chorus")
    p.add_argument("--json")
    args = p.parse_args()
    pgs = args.torchft_pg.split(",")
    if not pgs or any(pg not in ("gloo", "chorus") for pg in pgs):
        sys.exit(f"--torchft-pg {args.torchft_pg}: a comma-separated list of gloo and chorus")
    if not os.path.exists(os.path.join(os.path.dirname(args.python), "torchft_lighthouse")):
        sys.exit(f"{args.python}: no torchft beside it (scripts/install-torch2 --torchft)")
    systems = [("chorus", chorus_run)]
    for pg in pgs:
        name = "torchft" if pg == "gloo" else "torchft+chorus-pg"
        systems.append((name, lambda a, py, pg=pg: torchft_run(a, py, pg)))
    results = {name: [] for name, _ in systems}
    for run in range(args.runs):
        for system, fn in systems:
            t = fn(args, args.python)
            results[system].append(t)
            print(f"run {run + 1} {system}: kill to next committed step {t:.3f} s", flush=True)
    print(f"\nN = {args.ranks}, rank/replica {args.ranks - 2} killed at step {args.fail_step}, "
          f"collective timeout {args.timeout} s, {args.runs} runs each")
    print("| system | median s | min s | max s |\n|---|---:|---:|---:|")
    for system, ts in results.items():
        print(f"| {system} | {statistics.median(ts):.3f} | {min(ts):.3f} | {max(ts):.3f} |")
    for system in results:
        if system != "chorus":
            ratio = statistics.median(results[system]) / statistics.median(results["chorus"])
            print(f"{system} / chorus (medians): {ratio:.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(vars(args), results=results), f, indent=1)


if __name__ == "__main__":
    main()

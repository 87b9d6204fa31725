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
lighthouse's heartbeat timeout is its default, 5 s). Runs alternate between the systems. Prints a
table and, with --json, writes every run. --ranks takes a list (2,4,8): at N = 2 rank/replica 1
is killed and the job goes on with one (--min-ranks 1, --min_replicas 1).

--replacement: the killed rank is started again (chorus-run --max-restarts 1; for torchft this
script starts the replica again once the killed one has exited, as a launcher would), and the
figure is the time from the kill to the replacement's first committed step, split into: the
launcher's reaction (kill to the replacement's exec), the process's start-up (exec to the end of
its imports, `import torch` mostly, measured in the process from /proc) and the rest (joining,
admission at the next check, state from a peer, its first step). Every rank logs its start and
its committed steps (train_elastic.py --step-log, torchft_trainer.py --events); the run is ended
(--stop-file) 20 steps after the replacement's first commit.
--spares K (with --replacement): chorus-run keeps K spares waiting, set up; one takes the killed
rank's place in the survivors' membership change (its launch and start-up come before the kill,
negative and apart).
--torchft-pg: the process group(s) torchft's Manager gets, gloo (its own ProcessGroupGloo, the
default) and/or chorus (chorus.torchft.ProcessGroupChorus), each a system of its own in the table.
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


def fail_rank(n):
    return n - 2 if n > 2 else 1


def read_events(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def replacement_times(ev, is_replacement):
    """{total, launch, startup, join}: kill to the replacement's first commit, and its parts."""
    kill = [e["t"] for e in ev if e["kind"] == "kill"]
    starts = [e for e in ev if e["kind"] == "start" and is_replacement(e)]
    first = {}
    for e in ev:
        if e["kind"] == "commit":
            first.setdefault(e["pid"], e["t"])
    # The joiner that took the killed rank's place: the first to commit after the kill (a spare
    # started before it: its launch is negative).
    took = sorted((first[s["pid"]], i) for i, s in enumerate(starts)
                  if s["pid"] in first and kill and first[s["pid"]] > kill[0])
    if not kill or not took:
        return None
    commit, start = took[0][0], starts[took[0][1]]
    return {"total": commit - kill[0], "launch": start["process_start"] - kill[0],
            "startup": start["t"] - start["process_start"], "join": commit - start["t"]}


def stop_after_replacement(args, events_path, stop_path, is_replacement, done, deadline):
    """Polls the log until the replacement committed a step, then writes the stop step; returns
    the events. `done()` says the job has ended (all processes gone)."""
    while time.monotonic() < deadline and not done():
        ev = read_events(events_path)
        if replacement_times(ev, is_replacement):
            last = max(e["step"] for e in ev if e["kind"] == "commit")
            with open(stop_path + ".tmp", "w") as f:
                f.write(str(last + 20))
            os.rename(stop_path + ".tmp", stop_path)
            return
        time.sleep(0.1)


def wait_then_end(procs, deadline, outs=()):
    """Waits for every process until the deadline, then kills what is left and closes the
    output files: the end of a run, also when it failed."""
    try:
        for p in procs:
            p.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for out in outs:
            out.close()


def joiner(e):
    """A Chorus process that joined the running job: a restart or a spare."""
    return e["restart"] > 0 or e.get("spare")


def chorus_run(args, python, n):
    env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"), OMP_NUM_THREADS="1")
    workdir = tempfile.mkdtemp(prefix="torch-recovery-")
    events, stop = os.path.join(workdir, "steps.jsonl"), os.path.join(workdir, "stop")
    cmd = [os.path.join(args.build, "tools", "chorus-run", "chorus-run"), "-n", str(n),
           "--elastic", "--max-restarts", "1" if args.replacement else "0", "--min-ranks",
           str(min(2, n - 1)), "--spares", str(args.spares), "--", python,
           os.path.join(ROOT, "examples", "torch", "train_elastic.py"), "--backend", "chorus",
           "--fail-rank", str(fail_rank(n)), "--fail-step", str(args.fail_step),
           "--timeout", str(args.timeout)]
    if args.replacement:
        cmd += ["--steps", "1000000", "--epochs", "1000", "--step-log", events, "--stop-file",
                stop]  # runs until the stop file, past the first epoch
    else:
        cmd += ["--steps", str(args.steps)]
    if args.synthetic:
        cmd.append("--synthetic")
    with open(os.path.join(workdir, "out"), "w+") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + args.run_timeout
            if args.replacement:
                stop_after_replacement(args, events, stop, joiner,
                                       lambda: proc.poll() is not None, deadline)
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        text = out.read()
    m = re.search(r"recovered in ([0-9.]+) s", text)
    if not m:
        raise RuntimeError(f"chorus run: no 'recovered in' line (exit {proc.returncode}):\n"
                           + text[-3000:])
    result = {"shrink": float(m.group(1))}
    if args.replacement:
        r = replacement_times(read_events(events), joiner)
        if r is None:
            raise RuntimeError(f"chorus run: the replacement committed no step (exit "
                               f"{proc.returncode}):\n" + text[-3000:])
        m = re.search(r"joined\) at step \d+; [0-9.]+ s after the failure \(admission and "
                      r"state transfer ([0-9.]+) s\)", text)
        result.update(r, admission=float(m.group(1)) if m else None)
    return result


def torchft_run(args, python, n, pg="gloo"):
    bindir = os.path.dirname(python)
    lighthouse = os.path.join(bindir, "torchft_lighthouse")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="torchft-recovery-")
    events, stop = os.path.join(workdir, "events.jsonl"), os.path.join(workdir, "stop")
    open(events, "w").close()
    quiet = dict(os.environ, RUST_LOG="warn")
    lh = subprocess.Popen([lighthouse, "--min_replicas", str(n - 1), "--quorum_tick_ms",
                           "100", "--join_timeout_ms", "1000", "--bind", f"127.0.0.1:{port}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=quiet)
    procs = []
    failing = fail_rank(n)
    deadline = time.monotonic() + args.run_timeout
    try:
        time.sleep(0.5)
        env = dict(quiet, TORCHFT_LIGHTHOUSE=f"http://127.0.0.1:{port}", OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.join(args.build, "python"))

        def start(r, extra_env=None):
            cmd = [python, os.path.join(HERE, "torchft_trainer.py"), "--replica", str(r),
                   "--timeout", str(args.timeout), "--events", events, "--min-replicas",
                   str(n - 1), "--fail-step", str(args.fail_step if r == failing else -1),
                   "--pg", pg]
            if args.torchft_quorum_timeout:
                cmd += ["--quorum-timeout", str(args.torchft_quorum_timeout)]
            cmd += (["--steps", "1000000", "--stop-file", stop] if args.replacement
                    else ["--steps", str(args.steps)])
            if args.synthetic:
                cmd.append("--synthetic")
            return subprocess.Popen(cmd, env=dict(env, **(extra_env or {})),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        procs = [start(r) for r in range(n)]
        if args.replacement:
            # The launcher's part: start the replica again once the killed one has exited.
            while procs[failing].poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            procs.append(start(failing, {"TORCHFT_BENCH_REPLACEMENT": "1"}))
            stop_after_replacement(args, events, stop, lambda e: e.get("replacement"),
                                   lambda: all(p.poll() is not None for p in procs), deadline)
    finally:
        wait_then_end(procs, deadline)
        lh.kill()
        lh.wait()
    ev = read_events(events)
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
    result = {"shrink": after[0]["t"] - t_kill}
    if args.replacement:
        r = replacement_times(ev, lambda e: e.get("replacement"))
        if r is None:
            raise RuntimeError("torchft run: the replacement committed no step")
        result.update(r)
    return result


def stats(ts):
    return f"{statistics.median(ts):.3f} | {min(ts):.3f} | {max(ts):.3f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.expanduser(
        "~/.cache/chorus/venv-torch-2.15.0/bin/python"))
    p.add_argument("--ranks", type=lambda t: [int(n) for n in t.split(",")], default=[4],
                   metavar="N[,N...]")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--fail-step", type=int, default=30)
    p.add_argument("--timeout", type=float, default=5, help="collective timeout, seconds, both")
    p.add_argument("--run-timeout", type=float, default=300)
    p.add_argument("--replacement", action="store_true",
                   help="restart the killed rank; time until the replacement's first commit")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--spares", type=int, default=0,
                   help="chorus: spares chorus-run keeps waiting (with --replacement, one takes "
                        "the killed rank's place: its start-up is done before the kill)")
    p.add_argument("--torchft-pg", default="gloo",
                   help="torchft's process group(s), comma-separated: gloo, chorus")
    p.add_argument("--torchft-quorum-timeout", type=float, default=None,
                   help="torchft's quorum timeout, seconds (default: --timeout); see "
                        "torchft_trainer.py --quorum-timeout")
    p.add_argument("--json")
    args = p.parse_args()
    pgs = args.torchft_pg.split(",")
    if not pgs or any(pg not in ("gloo", "chorus") for pg in pgs):
        sys.exit(f"--torchft-pg {args.torchft_pg}: a comma-separated list of gloo and chorus")
    if not os.path.exists(os.path.join(os.path.dirname(args.python), "torchft_lighthouse")):
        sys.exit(f"{args.python}: no torchft beside it (scripts/install-torch2 --torchft)")
    results = {}
    for n in args.ranks:
        systems = [("chorus", chorus_run)]
        for pg in pgs:
            name = "torchft" if pg == "gloo" else "torchft+chorus-pg"
            systems.append((name, lambda a, py, n, pg=pg: torchft_run(a, py, n, pg)))
        results[n] = {name: [] for name, _ in systems}
        for run in range(args.runs):
            for system, fn in systems:
                r = fn(args, args.python, n)
                results[n][system].append(r)
                text = f"N = {n} run {run + 1} {system}: kill to next committed step " \
                       f"{r['shrink']:.3f} s"
                if args.replacement:
                    text += (f"; to the replacement's first committed step {r['total']:.3f} s "
                             f"(launch {r['launch']:.3f}, start-up {r['startup']:.3f}, join to "
                             f"first commit {r['join']:.3f})")
                print(text + f"; load {open('/proc/loadavg').read().split()[0]}", flush=True)
    for n, per in results.items():
        print(f"\nN = {n}, rank/replica {fail_rank(n)} killed at step {args.fail_step}, "
              f"collective timeout {args.timeout} s, {args.runs} runs each"
              + (", the killed rank restarted" if args.replacement else ""))
        print("| system | median s | min s | max s |\n|---|---:|---:|---:|")
        for system, rs in per.items():
            print(f"| {system}, kill to the next committed step | "
                  f"{stats([r['shrink'] for r in rs])} |")
        for system in per:
            if system != "chorus":
                ratio = (statistics.median(r["shrink"] for r in per[system])
                         / statistics.median(r["shrink"] for r in per["chorus"]))
                print(f"{system} / chorus (medians): {ratio:.1f}x")
        if args.replacement:
            for part, what in (("total", "kill to the replacement's first committed step"),
                               ("launch", "of which kill to the replacement's exec"),
                               ("startup", "of which exec to the end of its imports"),
                               ("join", "of which joining to its first committed step")):
                for system, rs in per.items():
                    print(f"| {system}, {what} | {stats([r[part] for r in rs])} |")
            adm = [r["admission"] for r in per["chorus"] if r.get("admission") is not None]
            if adm:
                print(f"chorus: admission and state transfer (survivors' pause) median "
                      f"{statistics.median(adm):.3f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(vars(args), results=results), f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Goodput of PyTorch training under repeated failures, Chorus against torchft: a rank killed
every T seconds from outside, replacements restarted, committed steps and useful samples per
second against the same run with no failure.

    bench/elastic/torch_goodput.py --build build --system chorus --every 60 --seconds 600 \\
        --out /tmp/goodput/chorus-60.json

Both systems train the CNN on Fashion-MNIST on 4 ranks (64 samples per rank and step, SGD lr
0.05 momentum 0.9, one compute thread per rank), with the same collective timeout (--timeout).
Chorus: `chorus-run -n 4 --elastic --max-restarts 100000 --min-ranks 2 -- train_elastic.py
--model cnn` (chorus.torch.elastic.Trainer; chorus-run starts the replacements, which join at
the next admission check, every 10 steps; with --spares K, chorus-run keeps K processes waiting,
set up, and one takes a lost rank's place in the survivors' membership change, the restarted
process becoming the next spare). torchft (PyPI `torchft`): its lighthouse
(`--min_replicas 2 --quorum_tick_ms 100 --join_timeout_ms 1000`) and 4 replica groups of one
process each (torchft_trainer.py, its Manager and ProcessGroupGloo, min_replica_size 2); this
driver restarts a killed replica at once, as a launcher would.

The measured window starts at the first committed step and lasts --seconds. Every --every
seconds in it (not in its last 20 s, so that the last replacement joins before the end) the
driver SIGKILLs one rank chosen at random (seeded) among the ranks that have committed a step,
never rank 0 / replica 0 (it ends the run and evaluates). At the end of the window it writes the
last committed step + 20 to a stop file; every rank stops after that step, rank 0 / replica 0
evaluates the test accuracy. Every rank appends one JSON line per committed step (time, step,
ranks in it) to a log; the useful samples of a step are its ranks x batch (torchft: its
participants; a healing replica contributes none).

Prints committed steps, useful samples per second, failures and the test accuracy; --out writes
them with the samples per second in --window-second windows and the kill times (for
torch_goodput_plot.py and the efficiency table, torch_goodput.py --table FILE...).
"""

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
RANKS = 4
BATCH = 64
QUIET_END = 20.0  # no kill in the window's last seconds
STOP_MARGIN = 20  # steps after the last logged commit


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Log:
    """Reads the trainers' JSON-lines log as it grows."""

    def __init__(self, path):
        self.path, self.offset, self.events = path, 0, []

    def poll(self):
        with open(self.path) as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind("\n") + 1  # a line being written is read next time
        self.offset += len(data[:end].encode())
        for line in data[:end].splitlines():
            if line.strip():
                self.events.append(json.loads(line))
        return self.events


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a child of chorus-run not yet reaped is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Chorus:
    name = "chorus"

    def __init__(self, args, log_path, stop_path):
        env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"), OMP_NUM_THREADS="1")
        cmd = [os.path.join(args.build, "tools", "chorus-run", "chorus-run"), "-n", str(RANKS),
               "--elastic", "--max-restarts", str(args.restarts), "--min-ranks", "2",
               "--spares", str(args.spares), "--", args.python,
               os.path.join(ROOT, "examples", "torch", "train_elastic.py"), "--backend",
               "chorus", "--model", "cnn", "--epochs", "100000", "--batch", str(BATCH),
               "--timeout", str(args.timeout), "--log-every", "1000000", "--step-log", log_path,
               "--stop-file", stop_path, "--seed", str(args.seed)]
        if args.data_cache:
            cmd += ["--data-cache", args.data_cache]
        self.out = open(log_path + ".out", "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.out, stderr=subprocess.STDOUT)

    def candidates(self, events):
        """Processes that have committed a step and still run, other than rank 0's."""
        starts = {e["pid"]: e for e in events if e["kind"] == "start"}
        joined = {e["pid"] for e in events if e["kind"] == "commit"}
        return sorted(pid for pid, e in starts.items()
                      if pid in joined and e["env_rank"] != 0 and alive(pid))

    def restart(self, pid):
        pass  # chorus-run starts the replacement

    def finished(self):
        return self.proc.poll() is not None

    def stop(self):
        try:  # the ranks end on their own after the stop step (and check their parameters)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()
        with open(self.out.name) as f:
            text = f.read()
        self.identical = "parameters: bit-identical" in text


class Torchft:
    name = "torchft"

    def __init__(self, args, log_path, stop_path):
        self.args, self.log_path, self.stop_path = args, log_path, stop_path
        lighthouse = os.path.join(os.path.dirname(args.python), "torchft_lighthouse")
        port = free_port()
        self.out = open(log_path + ".out", "w")
        self.lighthouse = subprocess.Popen(
            [lighthouse, "--min_replicas", "2", "--quorum_tick_ms", "100", "--join_timeout_ms",
             "1000", "--bind", f"127.0.0.1:{port}"], stdout=self.out, stderr=subprocess.STDOUT,
            env=dict(os.environ, RUST_LOG="warn"))
        time.sleep(0.5)
        # RUST_LOG=warn: its Rust side logs every quorum at INFO by default (thousands of lines
        # a minute), CPU the ranks share; left out in its favour.
        self.env = dict(os.environ, TORCHFT_LIGHTHOUSE=f"http://127.0.0.1:{port}",
                        OMP_NUM_THREADS="1", RUST_LOG="warn")
        self.procs = {}  # replica -> Popen
        self.replica_of = {}  # pid -> replica
        self.crashes = []  # replicas that ended by themselves (not killed by this driver)
        for r in range(RANKS):
            self.start(r, replacement=False)

    def start(self, replica, replacement):
        cmd = [self.args.python, os.path.join(HERE, "torchft_trainer.py"), "--replica",
               str(replica), "--model", "cnn", "--steps", "100000000", "--batch", str(BATCH),
               "--timeout", str(self.args.timeout), "--events", self.log_path,
               "--min-replicas", "2", "--stop-file", self.stop_path, "--evaluate",
               "--seed", str(self.args.seed)]
        if self.args.data_cache:
            cmd += ["--data-cache", self.args.data_cache]
        env = dict(self.env, TORCHFT_BENCH_REPLACEMENT="1") if replacement else self.env
        p = subprocess.Popen(cmd, env=env, stdout=self.out, stderr=subprocess.STDOUT)
        self.procs[replica] = p
        self.replica_of[p.pid] = replica

    def candidates(self, events):
        joined = {e["pid"] for e in events if e["kind"] == "commit"}
        return sorted(p.pid for r, p in self.procs.items()
                      if r != 0 and p.pid in joined and p.poll() is None)

    def restart(self, pid):
        replica = self.replica_of[pid]
        self.procs[replica].wait()
        self.start(replica, replacement=True)

    def finished(self):
        """A replica that ended on its own before the stop (its quorum timed out: torchft's
        Manager raises then) is started again, as a launcher would, and counted apart."""
        if not os.path.exists(self.stop_path):
            for r, p in list(self.procs.items()):
                if p.poll() is not None:
                    self.crashes.append({"t": time.time(), "replica": r, "exit": p.returncode})
                    print(f"torchft: replica {r} (pid {p.pid}) exited {p.returncode} by itself; "
                          "starting it again", flush=True)
                    self.start(r, replacement=True)
        return False

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        self.lighthouse.kill()
        self.lighthouse.wait()
        self.out.close()


def steps_of(events):
    """Committed steps: {step: (first commit time, ranks in it)}, from every rank's lines
    (the first rank to log a step gives its time)."""
    steps = {}
    for e in events:
        if e["kind"] == "commit":
            world = e.get("world", e.get("participants"))
            if e["step"] not in steps or e["t"] < steps[e["step"]][0]:
                steps[e["step"]] = (e["t"], world)
    return steps


def run(args):
    workdir = tempfile.mkdtemp(prefix=f"goodput-{args.system}-")
    log_path, stop_path = os.path.join(workdir, "steps.jsonl"), os.path.join(workdir, "stop")
    open(log_path, "w").close()
    system = (Chorus if args.system == "chorus" else Torchft)(args, log_path, stop_path)
    log, rng, kills = Log(log_path), random.Random(args.seed), []
    t0, loads, next_load = None, [], 0.0
    deadline = time.monotonic() + args.seconds + args.startup_timeout
    try:
        while True:
            time.sleep(0.05)
            events = log.poll()
            if system.finished():
                raise RuntimeError(f"{args.system}: the job ended before the window did; see "
                                   f"{log_path}.out")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args.system}: no committed step in "
                                   f"{args.startup_timeout} s")
            if t0 is None:
                first = [e["t"] for e in events if e["kind"] == "commit"]
                if not first:
                    continue
                if args.spares_first:
                    spares = {e["pid"] for e in events if e["kind"] == "start" and e.get("spare")}
                    ready = {e["pid"] for e in events if e["kind"] == "model"} & spares
                    if len(ready) < args.spares:
                        continue
                    t0 = time.time()
                    print(f"{args.system}: all {args.spares} spares set up and waiting, "
                          f"{t0 - min(first):.1f} s after the first committed step", flush=True)
                else:
                    t0 = min(first)
                next_kill = t0 + args.every if args.every > 0 else float("inf")
                print(f"{args.system}: first committed step; window of {args.seconds} s starts "
                      f"(log {log_path})", flush=True)
            now = time.time()
            if now >= t0 + args.seconds:
                break
            if now >= next_load:  # the machine's load through the window (1-minute average)
                with open("/proc/loadavg") as f:
                    loads.append(float(f.read().split()[0]))
                next_load = now + 10
            if now >= next_kill and next_kill <= t0 + args.seconds - QUIET_END:
                pids = system.candidates(events)
                if pids:
                    pid = rng.choice(pids)
                    os.kill(pid, signal.SIGKILL)
                    kills.append({"t": time.time(), "pid": pid})
                    print(f"{args.system}: kill {len(kills)} at {time.time() - t0:.1f} s "
                          f"(pid {pid})", flush=True)
                    system.restart(pid)
                    next_kill += args.every
                # none to kill yet (all replacements still joining): try again at once
        last = max(e["step"] for e in log.poll() if e["kind"] == "commit")
        with open(stop_path + ".tmp", "w") as f:
            f.write(str(last + STOP_MARGIN))
        os.rename(stop_path + ".tmp", stop_path)
        end_deadline = time.monotonic() + args.end_timeout
        accuracy = None
        while accuracy is None and time.monotonic() < end_deadline:
            time.sleep(0.2)
            acc = [e for e in log.poll() if e["kind"] == "accuracy"]
            if acc:
                accuracy = acc[0]["accuracy"]
    finally:
        system.stop()
    events = log.poll()
    steps = steps_of(events)
    in_window = {s: v for s, v in steps.items() if t0 <= v[0] <= t0 + args.seconds}
    samples = sum(w for _, w in in_window.values()) * BATCH
    windows = []
    for i in range(int(args.seconds // args.window_seconds)):
        lo, hi = t0 + i * args.window_seconds, t0 + (i + 1) * args.window_seconds
        n = sum(w for t, w in in_window.values() if lo <= t < hi) * BATCH
        windows.append(n / args.window_seconds)
    starts = [e for e in events if e["kind"] == "start" and e.get("restart", 0) != 0
              or e["kind"] == "start" and (e.get("replacement") or e.get("spare"))]
    result = {
        "system": args.system, "spares": args.spares if args.system == "chorus" else 0,
        "restarts": args.restarts if args.system == "chorus" else None, "t0": t0,
        "spares_first": bool(args.spares_first), "data_cache": bool(args.data_cache),
        "every": args.every, "seconds": args.seconds, "ranks": RANKS,
        "batch": BATCH, "timeout": args.timeout, "seed": args.seed,
        "committed_steps": len(in_window), "useful_samples": samples,
        "samples_per_second": samples / args.seconds,
        "steps_after_window": sum(1 for t, _ in steps.values() if t > t0 + args.seconds),
        "accuracy": accuracy,
        "kills": [dict(k, at=k["t"] - t0) for k in kills],
        "replacements_started": len(starts),
        "window_seconds": args.window_seconds, "samples_per_second_windows": windows,
        "load": open("/proc/loadavg").read().split()[:3], "log": log_path,
        "load_in_window": [min(loads), sum(loads) / len(loads), max(loads)] if loads else None,
        "full_steps": (max(steps) - min(steps) + 1) if steps else 0,
        "bit_identical": getattr(system, "identical", None),
        "crashes": getattr(system, "crashes", []),
    }
    acc_text = f"{accuracy * 100:.2f} %" if accuracy is not None else "none (no evaluation)"
    print(f"{args.system}, a kill every {args.every or 'never'} s, {args.seconds} s: "
          f"{len(kills)} kills, {len(result['crashes'])} replicas ended by themselves, "
          f"{len(in_window)} committed steps, "
          f"{result['samples_per_second']:.1f} useful samples/s, test accuracy {acc_text}, "
          f"load in the window {fmt_load(result['load_in_window'])}", flush=True)
    return result


def fmt_load(load):
    return "min {:.1f} mean {:.1f} max {:.1f}".format(*load) if load else "-"


def short_load(load):
    return "{:.1f}/{:.1f}/{:.1f}".format(*load) if load else "-"


def failure_costs(run):
    """Medians over the run's kills, from its step log (None where the log is gone): the kill to
    the next committed step; the kill to the replacement's first committed step; of which the
    replacement's start-up (exec to the end of its imports, from /proc in the process)."""
    if not run["kills"] or not os.path.exists(run["log"]):
        return None
    with open(run["log"]) as f:
        events = [json.loads(line) for line in f if line.strip()]
    steps = sorted(t for t, _ in steps_of(events).values())
    first = {}
    for e in events:
        if e["kind"] == "commit" and e["pid"] not in first:
            first[e["pid"]] = e["t"]
    # Joiners (replacements, spares) by their first committed step: the one that took a kill's
    # place is the first to commit after it (a spare started long before the kill).
    joins = sorted((first[e["pid"]], e["t"] - e["process_start"]) for e in events
                   if e["kind"] == "start" and e.get("process_start") and e["pid"] in first
                   and (e.get("restart") or e.get("replacement") or e.get("spare")))
    next_commit, replaced, startup = [], [], []
    taken = set()
    for k in run["kills"]:
        after = [t for t in steps if t > k["t"]]
        if after:
            next_commit.append(after[0] - k["t"])
        mine = [j for j in joins if j[0] > k["t"] and j not in taken]
        if mine:
            taken.add(mine[0])
            replaced.append(mine[0][0] - k["t"])
            startup.append(mine[0][1])
    med = statistics.median
    return {"next_commit": med(next_commit) if next_commit else None,
            "replacement_commit": med(replaced) if replaced else None,
            "startup": med(startup) if startup else None}


def kill_window_loss(run):
    """What the 10 s windows holding a kill made less than the mean of their neighbours without
    one, in seconds of the run's mean throughput, and as a share of the run: a measure within
    the run, which the machine's drift between runs moves less than the efficiency (where kills
    come more often than every other window, neighbours carry some of the cost: a lower bound)."""
    w, width = run["samples_per_second_windows"], run["window_seconds"]
    hit = sorted({int(k["at"] // width) for k in run["kills"]})
    lost = 0.0
    for i in hit:
        near = [w[j] for j in (i - 1, i + 1) if 0 <= j < len(w) and j not in hit]
        if near and i < len(w):
            lost += (sum(near) / len(near) - w[i]) * width
    mean = sum(w) / len(w) if w else 0
    if not hit or not mean:
        return None
    return lost / mean, lost / (mean * run["seconds"])


def table(paths):
    runs = [json.load(open(p)) for p in paths]
    base = {r["system"]: r for r in runs if not r["every"]}
    print("| system | kill every | kills | committed steps | useful samples/s | efficiency | "
          "test accuracy | vs no failure | load (min/mean/max) |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in sorted(runs, key=lambda r: (r["system"], -(r["every"] or 1e9))):
        b = base.get(r["system"])
        name = r["system"] + (f" + {r['spares']} spare" if r.get("spares") else "")
        eff = f"{r['samples_per_second'] / b['samples_per_second'] * 100:.1f} %" if b else "-"
        acc = f"{r['accuracy'] * 100:.2f} %" if r["accuracy"] is not None else "-"
        dacc = (f"{(r['accuracy'] - b['accuracy']) * 100:+.2f}" if b and r["accuracy"]
                is not None and b["accuracy"] is not None else "-")
        every = f"{r['every']:g} s" if r["every"] else "never"
        print(f"| {name} | {every} | {len(r['kills'])} | "
              f"{r['committed_steps']} in {r['seconds']:.0f} s | "
              f"{r['samples_per_second']:.1f} | {eff} | {acc} | {dacc} | "
              f"{short_load(r.get('load_in_window'))} |")
    print("\nWithin each run: the windows holding a kill against their neighbours without one")
    for r in runs:
        k = kill_window_loss(r)
        if k:
            print(f"{r['system']}, every {r['every']:g} s: {k[0] / len(r['kills']):.2f} s of the "
                  f"run's mean throughput per kill, {k[1] * 100:.1f} % of the run")
    print("\nPer kill, medians: kill to the next committed step; kill to the replacement's first "
          "committed step (of which its start-up, exec to the end of its imports)")
    for r in runs:
        c = failure_costs(r)
        if c:
            f = lambda x: f"{x:.3f} s" if x is not None else "-"  # noqa: E731
            print(f"{r['system']}, every {r['every']:g} s: {f(c['next_commit'])}; "
                  f"{f(c['replacement_commit'])} ({f(c['startup'])})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.expanduser(
        "~/.cache/chorus/venv-torch-2.15.0/bin/python"))
    p.add_argument("--system", choices=["chorus", "torchft"])
    p.add_argument("--every", type=float, default=0, help="seconds between kills (0: none)")
    p.add_argument("--seconds", type=float, default=600, help="the measured window")
    p.add_argument("--timeout", type=float, default=5, help="collective timeout, both systems")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--spares", type=int, default=0,
                   help="chorus: processes chorus-run keeps waiting to take a lost rank's place")
    p.add_argument("--restarts", type=int, default=100000,
                   help="chorus-run --max-restarts (chorus)")
    p.add_argument("--spares-first", action="store_true",
                   help="the window starts once every spare is set up and waiting (chorus; "
                        "with --restarts 0 and a spare per kill, no process starts in the "
                        "window: the replacements' start-up is off the ranks' CPUs, as where "
                        "they start on other hosts)")
    p.add_argument("--data-cache", metavar="DIR",
                   help="both systems keep the decoded data here and map it when a process "
                        "starts (fashion_mnist.load's cache_dir): a restart spends no CPU "
                        "decoding it")
    p.add_argument("--window-seconds", type=float, default=10)
    p.add_argument("--startup-timeout", type=float, default=180,
                   help="seconds to the start of the window")
    p.add_argument("--end-timeout", type=float, default=120)
    p.add_argument("--out", help="write the result here (JSON)")
    p.add_argument("--table", nargs="+", metavar="JSON", help="print the table of these runs")
    args = p.parse_args()
    if args.table:
        table(args.table)
        return
    if not args.system:
        p.error("--system is required")
    if args.system == "torchft" and not os.path.exists(
            os.path.join(os.path.dirname(args.python), "torchft_lighthouse")):
        sys.exit(f"{args.python}: no torchft beside it (scripts/install-torch2 --torchft)")
    result = run(args)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

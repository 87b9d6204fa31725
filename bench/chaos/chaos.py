#!/usr/bin/env python3
"""The chaos campaign (`make chaos`): elastic CNN training on the emulated cluster under injected
faults, with checked collectives beside it.

    sudo nice -n 19 python3 bench/chaos/chaos.py --build build --seconds 600 --seed 1 --out chaos-out

4 hosts (scripts/cluster, network namespaces), one rank per host: host h runs
`chorus-run -n 1 --first-rank h --world-size 4 --elastic` with `chorus-train --model cnn --elastic`;
an etcd member on each of hosts 1-3 serves the job's store (CHORUS_STORE=etcd://...);
authentication required (a job key) and every rank connection encrypted (CHORUS_ENCRYPT=1).
Beside the training, rounds of chorus-bench (results checked) run on the same hosts.

First a clean run of the same training (same seed, no faults); then rounds of that training for
--seconds, faults injected at random (seeded) while a round runs, each kind at least once: kill a
rank (SIGKILL; its chorus-run restarts it), stop a rank (SIGSTOP, SIGCONT later; shorter or longer
than the timeout), kill the etcd leader (restarted later), take a host's link down for 2-10 s,
netem (1% loss, 50 ms delay, reordering) on a host's link for 10-20 s, partition a host from the
others. Faults hit hosts 1-3 (host 0's rank stays rank 0, whose metrics file times the steps).

After every fault: no wrong result in the checked collectives, no hang (a watchdog on the
training's progress lines and on every chorus-bench round), the doctor's verdict names the stopped
rank when it reports a stall. At the end of each round: every launcher exits 0, chorus-train's
final check says the parameters are identical on all ranks, and the accuracy is within
--accuracy-tolerance points of the clean run. Writes report.json and report.md to --out; exits 1
when a check failed (2 on a usage error, 77 when it cannot run here).
"""

import argparse
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import faults  # noqa: E402
import hosts  # noqa: E402
import jobs  # noqa: E402
import report  # noqa: E402

START = re.compile(r"^chorus-train: (\d+) ranks, ")
PROGRESS = re.compile(r"epoch \d+/\d+ \[|membership change|first step of the new membership")
ACCURACY = re.compile(r"^final test accuracy ([0-9.]+)%")
PARAMS = re.compile(r"^parameters (identical on all \d+ ranks|DIFFER.*)")


class Campaign:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.timeout = a.timeout
        self.recovery_bound = 4 * a.timeout + 60
        self.doctor_after = a.doctor_after
        self.doctor_stale = a.doctor_stale
        self.build = os.path.abspath(a.build)
        self.doctor = os.path.join(self.build, "tools", "chorus-doctor", "chorus-doctor")
        self.out = os.path.abspath(a.out)
        os.makedirs(self.out, exist_ok=True)
        self.work = os.path.join(self.out, "work")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.log = jobs.Log(os.path.join(self.out, "campaign.log"))
        self.cluster = hosts.Cluster(a.prefix, 4)
        self.etcd = hosts.Etcd(self.cluster, [1, 2, 3], self.work)
        self.key_file = os.path.join(self.work, "job.key")
        with open(self.key_file, "wb") as f:
            f.write(os.urandom(32))
        os.chmod(self.key_file, 0o600)
        self.training = None
        self.train_url = None
        self.bench = None
        self.failures = []
        self.injected = 0
        self.netem_ok = None  # probed at the first netem fault

    def say(self, text):
        self.log.add("chaos", text)
        print(f"chaos: {text}", flush=True)

    def chorus_env(self, h):
        return jobs.chorus_env(self.key_file, self.timeout, self.cluster.dev(h))

    def signal(self, pid, sig):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def train_args(self, name):
        a = self.a
        args = ["--model", "cnn", "--elastic", "--seed", str(a.seed), "--batch", "32", "--limit",
                str(a.limit), "--epochs", str(a.epochs), "--threads", "1", "--admit-every", "5",
                "--optimizer", "adam", "--lr", "1e-3"]
        metrics = [os.path.join(self.work, f"{name}-h{h}.csv") for h in range(4)]
        return args, metrics

    # ---- one training run (a round)

    def run_round(self, name, inject):
        """A training run; while it runs and inject() says so, faults. Returns the round's
        record."""
        t_start = time.time()
        args, metrics = self.train_args(name)
        self.train_url = self.etcd.url(f"chaos-{os.getpid()}-{name}")
        # Each launcher names its own metrics file: the rank that is rank 0 at the end writes it.
        self.training = tr = jobs.Training(self.cluster, self.log, self.build, self.train_url,
                                           self.chorus_env, lambda h: args + ["--metrics", metrics[h]],
                                           name)
        launch = [" ".join(shlex.quote(x) for x in tr.commands[0])]
        self.say(f"{name}: started; host 0 runs: {launch[0]}")
        started = None
        while time.time() < t_start + 180 and tr.running():
            s = self.log.first(t_start, START)
            if s:
                started = s[0]
                break
            time.sleep(0.2)
        rec = dict(round=name, started=started, events=0, hang=False)
        events = []
        if started is None:
            self.fail(f"{name}: training did not start within 180 s")
        else:
            events = self.watch(name, tr, started, inject)
        rec["events"] = len(events)
        codes = tr.wait(self.recovery_bound)
        if any(c is None for c in codes.values()):
            self.fail(f"{name}: launchers still running {self.recovery_bound} s after the end: "
                      f"{codes}; killed")
            tr.kill()
            codes = {h: p.poll() for h, p in tr.launchers.items()}
            rec["hang"] = True
        time.sleep(0.5)  # the last lines
        rec["exit_codes"] = ",".join(str(codes[h]) for h in sorted(codes))
        acc = self.log.first(t_start, ACCURACY)
        rec["accuracy"] = float(ACCURACY.search(acc[2]).group(1)) if acc else None
        par = self.log.first(t_start, PARAMS)
        rec["parameters"] = PARAMS.search(par[2]).group(1) if par else None
        rec["duration_s"] = time.time() - t_start
        written = [m for m in metrics if os.path.exists(m)]
        rec["metrics"] = written[0] if written else None
        if rec["metrics"] and started:
            steps = report.read_steps(rec["metrics"], started)
            for i, e in enumerate(events):
                until = events[i + 1]["injected"] if i + 1 < len(events) else None
                e["steps"] = report.step_effects(steps, e, until)
            rec["steps"] = len(steps)
        return rec, events

    def watch(self, name, tr, started, inject):
        """Runs faults while the round trains; the watchdog: no progress line for longer than
        stall_limit is a hang."""
        events = []
        stall_limit = 3 * self.timeout + 30
        last_event_end = started
        next_gap = self.rng.uniform(self.a.gap_min, self.a.gap_max)
        while tr.running():
            now = time.time()
            prog = self.log.since(max(now - stall_limit, started), PROGRESS)
            if now - started > stall_limit and not prog:
                self.fail(f"{name}: no training progress for {stall_limit:.0f} s (watchdog); "
                          "killing the round")
                tr.kill()
                break
            if now >= last_event_end + next_gap and inject(now - started):
                kind = self.next_kind()
                h = self.rng.choice([1, 2, 3])
                self.say(f"{name}: injecting {kind} on h{h}")
                bench_before = len(self.bench.rounds) if self.bench else 0
                r = faults.KINDS[kind](self).run(h)
                if r is None:
                    self.say(f"{name}: {kind} not injected (no target now)")
                    if kind not in self.kinds_done:
                        self.kinds_left.insert(0, kind)
                else:
                    self.kinds_done.add(kind)
                    self.injected += 1
                    r["round"] = name
                    self.check_bench(r, bench_before)
                    for check, ok in r["checks"].items():
                        if not ok:
                            self.fail(f"{name}: {kind} on h{h}: {check}")
                    events.append(r)
                    self.say(f"{name}: {kind} done: detected {report.fmt(r['detected'])} s, "
                             f"recovered {report.fmt(r['recovered'])} s; "
                             + "; ".join(r["notes"][:2]))
                last_event_end = time.time()
                next_gap = self.rng.uniform(self.a.gap_min, self.a.gap_max)
            time.sleep(0.5)
        return events

    def check_bench(self, r, before):
        """The checked collectives that ran during this fault: no wrong result, no hang."""
        if not self.bench:
            return
        time.sleep(0.1)
        during = self.bench.rounds[before:]
        r["bench_rounds"] = len(during)
        r["bench_errors"] = sum(1 for b in during if b["errors"] and not b["hang"])
        r["checks"]["no wrong result in the checked collectives"] = \
            all(b["wrong"] == 0 for b in during)
        r["checks"]["no hang of the checked collectives"] = not any(b["hang"] for b in during)

    def next_kind(self):
        if self.kinds_left:
            return self.kinds_left.pop(0)
        return self.rng.choice(self.a.events)

    def fail(self, why):
        self.failures.append(why)
        self.say("FAIL: " + why)

    # ---- the campaign

    def run(self):
        a = self.a
        t0 = time.time()
        self.kinds_left = list(a.events)
        self.rng.shuffle(self.kinds_left)
        self.kinds_done = set()
        self.say(f"cluster {a.prefix}: 4 hosts; etcd members on h1-h3")
        self.cluster.up()
        self.etcd.start_all()
        if not self.etcd.wait_healthy(30):
            self.fail("etcd did not become healthy")
            return self.finish(t0, None, [], [])
        clean = None
        if not a.no_clean:
            self.say("clean run (no faults)")
            clean, _ = self.run_round("clean", lambda _: False)
            self.say(f"clean run: accuracy {clean['accuracy']}, {clean['duration_s']:.0f} s")
            if clean["accuracy"] is None:
                self.fail("the clean run did not end with an accuracy")
        # Faults while a round has most of its training ahead (a fault in its last steps would
        # leave a replacement with no round to join).
        window = (clean["duration_s"] * 0.75) if clean else a.inject_window
        self.bench = jobs.BenchLoop(self.cluster, self.log, self.build, self.etcd, self.key_file,
                                    self.timeout, watchdog=4 * self.timeout + 30,
                                    outdir=self.work)
        self.bench.start()
        end = t0 + a.seconds
        rounds, events, i = [], [], 0
        while time.time() < end:
            name = f"round{i}"
            rec, evs = self.run_round(
                name, lambda since: since < window and time.time() < end and
                (not a.max_events or self.injected < a.max_events))
            rounds.append(rec)
            events.extend(evs)
            i += 1
            if a.max_events and len(events) >= a.max_events:
                break
        self.bench.stop()
        return self.finish(t0, clean, rounds, events)

    def finish(self, t0, clean, rounds, events):
        a = self.a
        b = self.bench.rounds if self.bench else []
        bench = dict(rounds=len(b), ok=sum(1 for x in b if x["ok"]),
                     errors=sum(1 for x in b if x["errors"] and not x["hang"]),
                     wrong=sum(x["wrong"] for x in b), hangs=sum(1 for x in b if x["hang"]),
                     error_lines=[e for x in b for e in x["errors"]][:50])
        checks = {}
        missing = [k for k in a.events if k not in {e["kind"] for e in events}]
        checks["every kind of fault injected at least once"] = not missing or bool(a.max_events)
        checks["no wrong result in the checked collectives"] = bench["wrong"] == 0
        checks["no hang of the checked collectives"] = bench["hangs"] == 0
        # A chorus-bench round may fail while a host is cut off or etcd has no leader (its ranks
        # time out, naming the peer); one that failed with no such fault around it is a finding.
        net = [(e["injected"], (e["removed"] or e["injected"]) + 2 * a.timeout) for e in events
               if e["kind"] in ("link_down", "partition", "netem", "kill_etcd_leader")]
        unexplained = [x for x in b if x["errors"] and not x["hang"] and
                       not any(x["start"] < hi and x["end"] > lo for lo, hi in net)]
        bench["unexplained"] = [dict(round=x["round"], at=x["start"] - t0, errors=x["errors"])
                                for x in unexplained]
        checks["no checked collective failed outside a fault of the network or of etcd"] = \
            not unexplained
        for r in rounds:
            checks[f"{r['round']}: every launcher exited 0"] = set(r["exit_codes"].split(",")) == {"0"}
            checks[f"{r['round']}: parameters identical on all live ranks"] = \
                bool(r["parameters"]) and r["parameters"].startswith("identical")
            if clean and clean.get("accuracy") is not None:
                ok = r["accuracy"] is not None and \
                    abs(r["accuracy"] - clean["accuracy"]) <= a.accuracy_tolerance
                checks[f"{r['round']}: accuracy within {a.accuracy_tolerance} points of the "
                       "clean run"] = ok
        for e in events:
            for name, ok in e["checks"].items():
                checks.setdefault(f"every {e['kind']}: {name}", True)
                checks[f"every {e['kind']}: {name}"] &= ok
        for f in self.failures:
            checks.setdefault("no failure during the campaign: " + f, False)
        result = dict(config=dict(seed=a.seed, seconds=a.seconds, timeout=a.timeout,
                                  events=a.events, limit=a.limit, epochs=a.epochs,
                                  accuracy_tolerance=a.accuracy_tolerance,
                                  etcd_election_ms=self.etcd.election_ms,
                                  etcd_heartbeat_ms=self.etcd.heartbeat_ms),
                      command=" ".join(shlex.quote(x) for x in sys.argv),
                      started=t0, elapsed_s=time.time() - t0, clean=clean, rounds=rounds,
                      events=events, bench=bench, checks=checks, failures=self.failures,
                      missing_kinds=missing, passed=all(checks.values()))
        report.write(result, os.path.join(self.out, "report.json"),
                     os.path.join(self.out, "report.md"))
        print(report.markdown(result))
        return 0 if result["passed"] else 1

    def cleanup(self):
        if self.bench:
            self.bench.stop_flag.set()
        if self.training:
            self.training.kill()
        self.etcd.stop_all()
        self.cluster.down()


def can_run(build):
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for t in ("ip", "tc", "etcd", "curl", "pgrep"):
        if not shutil.which(t):
            return f"'{t}' not found"
    for p in ("tools/chorus-run/chorus-run", "trainer/chorus-train", "tools/chorus-bench/chorus-bench",
              "tools/chorus-doctor/chorus-doctor"):
        if not os.access(os.path.join(build, p), os.X_OK):
            return f"{os.path.join(build, p)} is not built"
    if subprocess.run(["ip", "netns", "add", "chaosprobe"], capture_output=True).returncode != 0:
        return "'ip netns add' does not work here"
    subprocess.run(["ip", "netns", "del", "chaosprobe"], capture_output=True)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=600, help="fault injection for this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="chaos-out")
    ap.add_argument("--prefix", default="chaos", help="scripts/cluster prefix (namespaces)")
    ap.add_argument("--timeout", type=float, default=10, help="CHORUS_TIMEOUT of every rank")
    ap.add_argument("--events", nargs="+", default=list(faults.KINDS), choices=list(faults.KINDS))
    ap.add_argument("--max-events", type=int, default=0, help="stop after this many faults")
    ap.add_argument("--limit", type=int, default=60000, help="chorus-train --limit")
    ap.add_argument("--epochs", type=int, default=3, help="chorus-train --epochs")
    ap.add_argument("--gap-min", type=float, default=5, help="seconds between faults, at least")
    ap.add_argument("--gap-max", type=float, default=12)
    ap.add_argument("--no-clean", action="store_true", help="no clean run (no accuracy check)")
    ap.add_argument("--inject-window", type=float, default=60,
                    help="without a clean run: faults in the first S s of each round")
    ap.add_argument("--accuracy-tolerance", type=float, default=0.5)
    ap.add_argument("--doctor-after", type=float, default=6,
                    help="ask the doctor this long into a stop longer than the timeout")
    ap.add_argument("--doctor-stale", type=float, default=3)
    a = ap.parse_args()
    why = can_run(os.path.abspath(a.build))
    if why:
        print(f"chaos: SKIP: {why}")
        return 77
    camp = Campaign(a)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    try:
        return camp.run()
    except KeyboardInterrupt:
        camp.say("interrupted")
        return 130
    finally:
        camp.cleanup()


if __name__ == "__main__":
    sys.exit(main())

"""The faults of the chaos campaign, one function each. Every one injects its fault, waits for
the job to get over it (within a bound) and returns what happened: when it was injected and
removed, when it was detected and recovered from, as the logs say (Log: the arrival time of each
line), and notes. The step times around it come later, from the metrics file (report.py)."""

import json
import re
import signal
import subprocess
import time

MEMBERSHIP = re.compile(r"chorus-train: membership change before step (\d+): (\d+) -> (\d+) ranks")
FIRST_STEP = re.compile(r"first step of the new membership completed \(step (\d+), (\d+) ranks, "
                        r"generation (\d+)\) at unix time (\d+) ms")
LAUNCHER_SAW = re.compile(r"chorus-run: rank \d+ \(pid \d+\) (was killed|exited|was declared dead)")
FAILURE_SEEN = re.compile(r"chorus-train: membership change|chorus-run: rank \d+ \(pid \d+\) "
                          r"(was killed|exited|was declared dead)|error|Error|timed out")
PID_OF_RANK = re.compile(r"rank (\d+) \([^,]*, pid (\d+)")


class Fault:
    def __init__(self, camp):
        self.camp = camp  # the Campaign: cluster, etcd, training, log, rng, timeout, ...

    def record(self, kind, target, t0, t_end, **more):
        r = dict(kind=kind, target=target, injected=t0, removed=t_end, detected=None,
                 recovered=None, degraded=None, notes=[], checks={})
        r.update(more)
        return r

    def ask_doctor(self, pid, t0):
        """chorus-doctor --live on the training's store: its verdict must name the stopped rank
        (the rank whose record carries that pid) when it reports a stall."""
        c = self.camp
        argv = [c.doctor, "--live", "--store", c.train_url, "--key-file", c.key_file, "--json",
                "--stale-seconds", str(c.doctor_stale)]
        t = time.time()
        p = subprocess.run(c.cluster.cmd(0, argv), capture_output=True, text=True,
                           env=c.chorus_env(0), timeout=60)
        out = dict(asked_after=t - t0, exit=p.returncode, ok=True, stall=False, verdict=None)
        try:
            v = json.loads(p.stdout)
        except ValueError:
            out.update(ok=False, verdict=(p.stdout + p.stderr).strip()[-300:])
            return out
        out["verdict"] = v.get("verdict")
        out["kind"] = v.get("kind")
        if v.get("kind") in (None, "healthy"):
            return out
        out["stall"] = True
        comm = next((x for x in v.get("communicators", [])
                     if x.get("communicator") == v.get("communicator")), None)
        culprits = []
        if comm:
            d = comm.get("details", {})
            culprits = d.get("culprits") or [x.get("rank") for x in d.get("lost", [])]
            pids = {}
            for line in comm.get("evidence", []):
                m = PID_OF_RANK.search(line)
                if m:
                    pids[int(m.group(1))] = int(m.group(2))
            out["culprit_pids"] = [pids.get(r) for r in culprits]
            out["ok"] = bool(culprits) and all(pids.get(r) == pid for r in culprits)
        else:
            out["ok"] = False
        out["culprits"] = culprits
        return out

    def doctor_during(self, r, pid, t0, seconds):
        """Asks the doctor doctor_after s into a fault that lasts longer than that, when the
        host's rank is known: it must name that rank if it reports a stall."""
        c = self.camp
        if pid is None or seconds < c.doctor_after + 1:
            return
        time.sleep(max(0.0, t0 + c.doctor_after - time.time()))
        r["doctor"] = self.ask_doctor(pid, t0)
        r["checks"]["doctor names the rank of the faulty host (if it reports a stall)"] = \
            r["doctor"]["ok"]

    def wait_full(self, t0, bound):
        """Waits (at most bound seconds from t0) for the first step on all hosts' ranks after a
        membership change seen after t0; returns that step's unix time, or None."""
        log, n = self.camp.log, self.camp.cluster.hosts
        while time.time() < t0 + bound:
            for _, _, text in log.since(t0, FIRST_STEP):
                m = FIRST_STEP.search(text)
                if int(m.group(2)) == n:
                    return int(m.group(4)) / 1000.0
            if not self.camp.training.running():
                return None
            time.sleep(0.2)
        return None

    def fill_from_logs(self, r, t0, full_at=None):
        """detected: the first line after t0 that shows the failure (a launcher that saw its rank
        end, or the survivors' membership change); degraded: the first step after a change;
        recovered: the first step on every host again."""
        log = self.camp.log
        seen = log.first(t0, FAILURE_SEEN)
        if seen:
            r["detected"] = seen[0] - t0
            r["notes"].append(f"first sign: [{seen[1]}] {seen[2].strip()[:160]}")
        first = log.first(t0, FIRST_STEP)
        if first:
            r["degraded"] = int(FIRST_STEP.search(first[2]).group(4)) / 1000.0 - t0
        if full_at is not None:
            r["recovered"] = full_at - t0
        r["membership_changes"] = [x[2].strip() for x in log.since(t0, MEMBERSHIP)]


class KillRank(Fault):
    def run(self, h):
        c = self.camp
        pid = c.training.trainer_pid(h)
        if pid is None:
            return None
        t0 = time.time()
        c.signal(pid, signal.SIGKILL)
        r = self.record("kill_rank", f"h{h} (pid {pid})", t0, t0)
        full = self.wait_full(t0, c.recovery_bound)
        self.fill_from_logs(r, t0, full)
        r["checks"]["recovered on all hosts"] = full is not None
        return r


class StopRank(Fault):
    def run(self, h):
        c = self.camp
        pid = c.training.trainer_pid(h)
        if pid is None:
            return None
        # Below the timeout the job should only wait; above it the survivors go on without the
        # rank and its launcher kills and restarts it.
        long_stop = c.rng.random() < 0.6
        seconds = (c.rng.uniform(c.timeout + 4, c.timeout + 8) if long_stop
                   else c.rng.uniform(1.0, max(1.5, c.timeout / 3)))
        t0 = time.time()
        c.signal(pid, signal.SIGSTOP)
        r = self.record("stop_rank", f"h{h} (pid {pid}) for {seconds:.1f} s", t0, None,
                        stopped_seconds=seconds)
        if long_stop:
            self.doctor_during(r, pid, t0, seconds)
        time.sleep(max(0.0, t0 + seconds - time.time()))
        c.signal(pid, signal.SIGCONT)
        r["removed"] = time.time()
        if long_stop:
            full = self.wait_full(t0, c.recovery_bound)
            self.fill_from_logs(r, t0, full)
            r["checks"]["recovered on all hosts"] = full is not None
        else:
            time.sleep(2)
            self.fill_from_logs(r, t0)
            r["notes"].append("stopped for less than the timeout: the job only waits")
        return r

class KillEtcdLeader(Fault):
    def run(self, _h):
        c = self.camp
        lead = c.etcd.leader()
        if lead is None:
            return None
        t0 = time.time()
        c.etcd.kill(lead)
        r = self.record("kill_etcd_leader", f"member on h{lead}", t0, None)
        others = [m for m in c.etcd.hosts if m != lead]
        while time.time() < t0 + 30:
            new = c.etcd.leader()
            if new is not None and new != lead:
                r["detected"] = time.time() - t0
                r["notes"].append(f"new leader on h{new}")
                break
            time.sleep(0.1)
        down = c.rng.uniform(3, 8)
        time.sleep(max(0.0, t0 + down - time.time()))
        c.etcd.start(lead, existing=True)
        r["removed"] = time.time()
        healthy = c.etcd.wait_healthy(30)
        r["recovered"] = time.time() - t0 if healthy else None
        r["notes"].append(f"member restarted after {down:.1f} s" + ("" if healthy else
                                                                       "; cluster NOT healthy"))
        r["notes"].append("the others: " + ",".join(f"h{m}" for m in others))
        r["checks"]["a new leader among the other members"] = r["detected"] is not None
        r["checks"]["etcd healthy again"] = healthy
        time.sleep(2)
        r["membership_changes"] = [x[2].strip() for x in c.log.since(t0, MEMBERSHIP)]
        return r


class LinkDown(Fault):
    def run(self, h):
        c = self.camp
        seconds = c.rng.uniform(2, 10)
        pid = c.training.trainer_pid(h)
        t0 = time.time()
        c.cluster.link(h, up=False)
        r = self.record("link_down", f"h{h} for {seconds:.1f} s", t0, None, down_seconds=seconds)
        self.doctor_during(r, pid, t0, seconds)
        time.sleep(max(0.0, t0 + seconds - time.time()))
        c.cluster.link(h, up=True)
        r["removed"] = time.time()
        self.after_network_fault(r, t0, seconds)
        return r

    def after_network_fault(self, r, t0, seconds):
        c = self.camp
        if seconds >= c.timeout:
            full = self.wait_full(t0, c.recovery_bound)
            self.fill_from_logs(r, t0, full)
            changed = bool(r["membership_changes"])
            r["checks"]["recovered on all hosts"] = full is not None or not changed
        else:
            time.sleep(3)
            self.fill_from_logs(r, t0)
            if r["membership_changes"]:
                full = self.wait_full(t0, c.recovery_bound)
                self.fill_from_logs(r, t0, full)
                r["checks"]["recovered on all hosts"] = full is not None
            else:
                r["notes"].append("shorter than the timeout: ridden out without a change")


class Netem(Fault):
    """1% loss, 50 ms delay and reordering on a host's link (netem, both ways) for 10-20 s. Where
    the kernel has no netem (tc: "Specified qdisc kind is unknown"), the nearest this cluster can
    do instead: the link slowed to 10 Mbit/s (HTB), whose queue adds delay; no loss, no
    reordering. The record says which ran."""
    PARAMS = ["delay", "50ms", "10ms", "loss", "1%", "reorder", "25%", "50%"]
    SLOW_RATE = "10mbit"

    def run(self, h):
        c = self.camp
        seconds = c.rng.uniform(10, 20)
        if c.netem_ok is None:
            c.netem_ok = c.cluster.netem_available()
        t0 = time.time()
        if c.netem_ok:
            c.cluster.netem(h, self.PARAMS)
            what = " ".join(self.PARAMS)
        else:
            c.cluster.rate(h, self.SLOW_RATE)
            what = f"NO NETEM IN THIS KERNEL: rate cut to {self.SLOW_RATE} instead"
        r = self.record("netem", f"h{h} both ways: {what}; {seconds:.1f} s", t0, None,
                        netem=c.netem_ok)
        time.sleep(seconds)
        if c.netem_ok:
            c.cluster.heal(h)
        else:
            c.cluster.rate(h, None)
        r["removed"] = time.time()
        time.sleep(3)
        self.fill_from_logs(r, t0)
        if r["membership_changes"]:
            full = self.wait_full(t0, c.recovery_bound)
            self.fill_from_logs(r, t0, full)
            r["checks"]["recovered on all hosts"] = full is not None
        return r


class Partition(LinkDown):
    """Host h cut off from the others for longer than the timeout: its switch port leaves the
    bridge, both ends of its link stay up (the packets are lost silently, as in a partition, not
    refused as with a link down)."""

    def run(self, h):
        c = self.camp
        # Half of them longer than a timed-out step and the agreement after it together (2x the
        # timeout): the others go on without the host, which rejoins after.
        seconds = (c.rng.uniform(c.timeout + 3, c.timeout + 8) if c.rng.random() < 0.5
                   else c.rng.uniform(2 * c.timeout + 5, 2 * c.timeout + 15))
        pid = c.training.trainer_pid(h)
        t0 = time.time()
        c.cluster.detach(h, True)
        r = self.record("partition", f"h{h} from the others for {seconds:.1f} s", t0, None,
                        partition_seconds=seconds)
        self.doctor_during(r, pid, t0, seconds)
        time.sleep(max(0.0, t0 + seconds - time.time()))
        c.cluster.detach(h, False)
        r["removed"] = time.time()
        self.after_network_fault(r, t0, seconds)
        return r


KINDS = {"kill_rank": KillRank, "stop_rank": StopRank, "kill_etcd_leader": KillEtcdLeader,
         "link_down": LinkDown, "netem": Netem, "partition": Partition}

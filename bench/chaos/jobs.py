"""What runs on the cluster during the campaign: the elastic training (chorus-train under one
`chorus-run --elastic` per host) and the checked collectives (chorus-bench, its results checked)
beside it. Every line they print is kept with the wall-clock time it arrived (Log)."""

import os
import re
import subprocess
import threading
import time

BENCH_WRONG = re.compile(r"^\s+\d+\s+\d+\s+\S+\s+\S+\s+-?\d+\s+\S+\s+\S+\s+\S+\s+(\d+)")
BENCH_OOB = re.compile(r"Out of bounds values : (\d+)")


class Log:
    """Lines of every process of the campaign, each with its arrival time, also written to a file."""

    def __init__(self, path):
        self.lines = []  # (unix time, source, text)
        self.lock = threading.Lock()
        self.file = open(path, "a", buffering=1)

    def add(self, source, text):
        t = time.time()
        with self.lock:
            self.lines.append((t, source, text))
            self.file.write(f"{t:.3f} [{source}] {text}\n")

    def follow(self, source, stream):
        def pump():
            for line in stream:
                self.add(source, line.rstrip("\n"))
        th = threading.Thread(target=pump, daemon=True)
        th.start()
        return th

    def since(self, t, pattern, source=None):
        """Lines that arrived at t or later and match pattern (a compiled regex)."""
        with self.lock:
            return [(lt, s, x) for lt, s, x in self.lines
                    if lt >= t and (source is None or s == source) and pattern.search(x)]

    def first(self, t, pattern, source=None):
        m = self.since(t, pattern, source)
        return m[0] if m else None


def chorus_env(key_file, timeout, ifname):
    """What every Chorus process of the campaign runs with: authentication required, every rank
    connection encrypted, the campaign's timeout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_")}
    env.update(CHORUS_AUTH="required", CHORUS_AUTH_KEY_FILE=key_file, CHORUS_ENCRYPT="1",
               CHORUS_TIMEOUT=str(timeout), CHORUS_IFNAME=ifname, OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    return env


class Training:
    """One elastic training run: host h runs `chorus-run -n 1 --first-rank h --world-size N
    --elastic` with chorus-train."""

    def __init__(self, cluster, log, build, store_url, env_of, args_of, name, max_restarts=100):
        """env_of(h), args_of(h): the environment and chorus-train's arguments on host h."""
        self.cluster, self.log, self.name = cluster, log, name
        self.launchers, self.commands = {}, {}
        run = os.path.join(build, "tools", "chorus-run", "chorus-run")
        train = os.path.join(build, "trainer", "chorus-train")
        n = cluster.hosts
        for h in range(n):
            argv = ["nice", "-n", "19", run, "-n", "1", "--first-rank", str(h), "--world-size",
                    str(n), "--elastic", "--max-restarts", str(max_restarts), "--store",
                    store_url, "--", train] + args_of(h)
            p = subprocess.Popen(cluster.cmd(h, argv), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env_of(h),
                                 start_new_session=True)
            self.launchers[h] = p
            self.commands[h] = argv
            log.follow(f"{name}/h{h}", p.stdout)
            log.follow(f"{name}/h{h}", p.stderr)

    def trainer_pid(self, h):
        """The chorus-train process that host h's launcher runs now (None between restarts)."""
        p = self.launchers[h]
        # ip netns exec and nice exec: the Popen's pid is chorus-run's.
        r = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True)
        pids = [int(x) for x in r.stdout.split()]
        return pids[0] if pids else None

    def running(self):
        return any(p.poll() is None for p in self.launchers.values())

    def wait(self, seconds):
        end = time.time() + seconds
        for p in self.launchers.values():
            try:
                p.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                pass
        return {h: p.poll() for h, p in self.launchers.items()}

    def kill(self):
        for p in self.launchers.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
        for p in self.launchers.values():
            p.wait()


class BenchLoop:
    """Checked collectives beside the training: rounds of chorus-bench on every host, each a job
    of its own on the etcd store (a fresh prefix per round), the results checked (#wrong). A round
    that outlives its watchdog is killed and counted as a hang."""

    OPS = ["allreduce", "all_gather", "reduce_scatter", "broadcast"]

    def __init__(self, cluster, log, build, etcd, key_file, timeout, watchdog, outdir, pause=2.0):
        self.cluster, self.log, self.etcd = cluster, log, etcd
        self.bench = os.path.join(build, "tools", "chorus-bench", "chorus-bench")
        self.key_file, self.timeout, self.watchdog, self.pause = key_file, timeout, watchdog, pause
        self.outdir = outdir  # the output of the first round and of every round that failed
        self.rounds = []  # dicts: start, end, op, ok, wrong, hang, errors
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.procs = []

    def start(self):
        self.thread.start()

    def stop(self):
        self.stop_flag.set()
        self.thread.join(timeout=self.watchdog + 10)

    def _loop(self):
        i = 0
        while not self.stop_flag.is_set():
            self._round(i)
            i += 1
            self.stop_flag.wait(self.pause)

    def _round(self, i):
        op = self.OPS[i % len(self.OPS)]
        url = self.etcd.url(f"chaos-bench-{os.getpid()}-{i}")
        n = self.cluster.hosts
        procs, outs = [], []
        start = time.time()
        for h in range(n):
            env = chorus_env(self.key_file, self.timeout, self.cluster.dev(h))
            env.update(CHORUS_RANK=str(h), CHORUS_WORLD_SIZE=str(n), CHORUS_STORE=url)
            if i == 0:
                env["CHORUS_DEBUG"] = "1"  # its init line: authentication and encryption on
            argv = ["nice", "-n", "19", self.bench, "--op", op, "-b", "1K", "-e", "256K", "-f",
                    "8", "-n", "3", "-w", "1", "--in-place", "0"]
            procs.append(subprocess.Popen(self.cluster.cmd(h, argv), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, env=env,
                                          start_new_session=True))
        hang = False
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(0.1, start + self.watchdog - time.time()))
            except subprocess.TimeoutExpired:
                hang = True
                for q in procs:
                    if q.poll() is None:
                        os.killpg(q.pid, 9)
                out, _ = p.communicate()
            outs.append(out)
        wrong, errors = 0, []
        for h, out in enumerate(outs):
            for line in out.splitlines():
                m = BENCH_WRONG.match(line)
                if m:
                    wrong += int(m.group(1))
                m = BENCH_OOB.search(line)
                if m:
                    wrong += int(m.group(1))
            if procs[h].returncode != 0:
                tail = [x for x in out.splitlines() if x.strip()][-2:]
                errors.append(f"h{h} exit {procs[h].returncode}: " + " | ".join(tail))
        r = dict(round=i, op=op, start=start, end=time.time(), wrong=wrong, hang=hang,
                 ok=not hang and not errors and wrong == 0, errors=errors)
        self.rounds.append(r)
        if i == 0 or not r["ok"]:
            with open(os.path.join(self.outdir, f"bench-{i}.out"), "w") as f:
                for h, out in enumerate(outs):
                    f.write(f"===== host {h} (exit {procs[h].returncode})\n{out}")
        status = "ok" if r["ok"] else ("HANG" if hang else ("WRONG" if wrong else "error"))
        self.log.add("bench", f"round {i} {op}: {status} in {r['end'] - start:.1f} s, "
                              f"#wrong {wrong}" + (f"; {'; '.join(errors)}" if errors else ""))

"""The emulated cluster of the chaos campaign: hosts (scripts/cluster), the etcd members on them and
the faults of the network (link down, netem, partition). Needs root."""

import json
import os
import signal
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CLUSTER = os.path.join(REPO, "scripts", "cluster")
SUBNET = "10.77.0"  # scripts/cluster-lib/common.sh: CL_SUBNET


def addr(h):
    return f"{SUBNET}.{h + 1}"


class Cluster:
    """scripts/cluster with its own prefix: namespaces <prefix>-h<i>, switch <prefix>-sw."""

    def __init__(self, prefix, hosts):
        self.prefix, self.hosts = prefix, hosts
        self.env = dict(os.environ, CHORUS_CLUSTER_PREFIX=prefix)
        self.saved_leaf = {}  # (ns, dev) -> the leaf qdisc's parameters before a fault
        self.saved_rate = {}  # (ns, dev) -> the class's rate before a fault

    def ns(self, h):
        return f"{self.prefix}-h{h}"

    def dev(self, h):
        return f"{self.prefix}-h{h}"

    def switch_ns(self):
        return f"{self.prefix}-sw"

    def switch_dev(self, h):
        return f"{self.prefix}-s{h}"

    def up(self):
        subprocess.run([CLUSTER, "up", str(self.hosts)], env=self.env, check=True,
                       stdout=subprocess.DEVNULL)

    def down(self):
        subprocess.run([CLUSTER, "down"], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def cmd(self, h, argv):
        """argv run inside host h's namespace."""
        return ["ip", "netns", "exec", self.ns(h)] + list(argv)

    # ---- faults of the network

    def link(self, h, up):
        subprocess.run(["ip", "-n", self.ns(h), "link", "set", self.dev(h), "up" if up else "down"],
                       check=True)

    def detach(self, h, detached):
        """Partition: host h's switch port leaves the bridge (and comes back). Both ends of the
        link stay up, so nothing tells the host: its packets to the others are lost silently."""
        master = ["nomaster"] if detached else ["master", f"{self.prefix}-br"]
        subprocess.run(["ip", "-n", self.switch_ns(), "link", "set", self.switch_dev(h)] + master,
                       check=True)

    def netem_available(self):
        """Whether this kernel has the netem qdisc (tried on a scratch namespace's loopback)."""
        ns = f"{self.prefix}-nprobe"
        subprocess.run(["ip", "netns", "add", ns], capture_output=True)
        ok = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root",
                             "netem", "delay", "1ms"], capture_output=True).returncode == 0
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        return ok

    def rate(self, h, rate):
        """Host h's link shaped to rate (tc units) both ways; None: back to the cluster's rate."""
        for ns, dev in self._ends(h):
            if rate is None:
                rate_now = self.saved_rate.pop((ns, dev), None)
                if rate_now is None:
                    continue
            else:
                self.saved_rate.setdefault((ns, dev), self._class_rate(ns, dev))
                rate_now = rate
            subprocess.run(["tc", "-n", ns, "class", "change", "dev", dev, "parent", "1:",
                            "classid", "1:10", "htb", "rate", rate_now, "ceil", rate_now,
                            "burst", "125000b", "cburst", "125000b", "quantum", "18028"],
                           check=True)

    def _class_rate(self, ns, dev):
        out = subprocess.run(["tc", "-n", ns, "class", "show", "dev", dev], capture_output=True,
                             text=True, check=True).stdout.split()
        return out[out.index("rate") + 1]

    def _ends(self, h):
        """Both directions of host h's link: its own egress and the switch port's."""
        return [(self.ns(h), self.dev(h)), (self.switch_ns(), self.switch_dev(h))]

    def _leaf(self, ns, dev):
        out = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", dev, "parent", "1:10"],
                             capture_output=True, text=True, check=True).stdout.split()
        # "qdisc pfifo 10: parent 1:10 limit 1000p" -> ["pfifo", "limit", "1000"]
        kind = out[1]
        limit = out[out.index("limit") + 1]
        return [kind, "limit", limit.rstrip("pb") if kind == "pfifo" else limit]

    def netem(self, h, params):
        """Replaces the fifo under host h's shaping (both directions) by netem PARAMS."""
        for ns, dev in self._ends(h):
            self.saved_leaf.setdefault((ns, dev), self._leaf(ns, dev))
            self._set_leaf(ns, dev, ["netem"] + params + ["limit", "10000"])

    def heal(self, h):
        for ns, dev in self._ends(h):
            leaf = self.saved_leaf.pop((ns, dev), None)
            if leaf:
                self._set_leaf(ns, dev, leaf)

    def _set_leaf(self, ns, dev, leaf):
        # "replace" cannot change a qdisc's kind: delete it (the class has a default leaf in
        # between), then add the new one.
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "parent", "1:10"], check=True)
        subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:10", "handle",
                        "10:"] + leaf, check=True)


class Etcd:
    """One etcd member on each of `hosts`, started and killed by this object."""

    def __init__(self, cluster, hosts, workdir, heartbeat_ms=100, election_ms=1000):
        self.cluster, self.hosts, self.dir = cluster, list(hosts), workdir
        self.heartbeat_ms, self.election_ms = heartbeat_ms, election_ms
        self.procs = {}
        self.token = f"chaos-{os.getpid()}-{int(time.time())}"

    def url(self, prefix):
        return "etcd://" + ",".join(f"{addr(h)}:2379" for h in self.hosts) + "/" + prefix

    def start(self, h, existing=False):
        initial = ",".join(f"m{m}=http://{addr(m)}:2380" for m in self.hosts)
        a = addr(h)
        argv = ["etcd", "--name", f"m{h}", "--data-dir", os.path.join(self.dir, f"m{h}"),
                "--log-level", "warn", "--listen-client-urls", f"http://{a}:2379",
                "--advertise-client-urls", f"http://{a}:2379",
                "--listen-peer-urls", f"http://{a}:2380",
                "--initial-advertise-peer-urls", f"http://{a}:2380",
                "--initial-cluster", initial, "--initial-cluster-token", self.token,
                "--initial-cluster-state", "existing" if existing else "new",
                "--heartbeat-interval", str(self.heartbeat_ms),
                "--election-timeout", str(self.election_ms)]
        log = open(os.path.join(self.dir, f"m{h}.log"), "a")
        self.procs[h] = subprocess.Popen(self.cluster.cmd(h, argv), stdout=log, stderr=log,
                                         start_new_session=True)

    def start_all(self):
        for h in self.hosts:
            self.start(h)

    def kill(self, h):
        p = self.procs.pop(h, None)
        if p and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop_all(self):
        for h in list(self.procs):
            self.kill(h)

    def _status(self, h, from_host):
        r = subprocess.run(self.cluster.cmd(from_host, [
            "curl", "-sf", "-m", "1", "-X", "POST", f"http://{addr(h)}:2379/v3/maintenance/status",
            "-d", "{}"]), capture_output=True, text=True)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def leader(self, from_host=0):
        """The member that leads, as a live member says; None when none knows one."""
        for h in self.hosts:
            if h not in self.procs:
                continue
            s = self._status(h, from_host)
            if not s or "leader" not in s:
                continue
            for m in self.hosts:
                ms = self._status(m, from_host) if m != h else s
                if ms and ms.get("header", {}).get("member_id") == s["leader"]:
                    return m
        return None

    def wait_healthy(self, seconds, from_host=0):
        end = time.time() + seconds
        while time.time() < end:
            if all(self._status(h, from_host) for h in self.procs) and self.leader(from_host) is not None:
                return True
            time.sleep(0.2)
        return False

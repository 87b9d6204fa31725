"""The kill of chorus_recovery.py on the emulated cluster (scripts/cluster: one network namespace per
host, 1 Gbit/s links): examples/elastic_allreduce with its ranks spread over H hosts, L per host,
the last rank SIGKILLing itself at a chosen step; the time from the kill to the first step
completed on the new membership (median over the runs), without a replacement (the survivors
shrink and go on) and with one (a new process joins; the time is to the first step on all N ranks
again).

    sudo /usr/bin/python3 bench/elastic/cluster_recovery.py --build build --layouts 2x1 2x2 --runs 3

chorus-run starts ranks on one host only, so this script plays its part: chorus-store on host 0
(the ranks' CHORUS_STORE), rank i on host i / L through `ip netns exec`, and, like
`chorus-run --elastic`, it publishes chorus/elastic/restarts_left (1 with a replacement, 0
without), and once the killed rank's process has exited it adds 1 to
chorus/elastic/expected_joiners, sets restarts_left to 0 and starts the replacement on the killed
rank's host with CHORUS_JOIN=1 CHORUS_RESTART=1 and the killed rank's CHORUS_RANK. The store
requests go over the store's wire protocol (src/store/tcp_store_protocol.h) from a small client in
host 0's namespace, started and connected before the job. Also reported: when the replacement
process was started, after the kill (what this script's reaction costs, chorus-run's part).

Needs root (ip netns). The cluster (prefix $CHORUS_CLUSTER_PREFIX, default "crec") is brought up
per layout and taken down at the end, also on failure.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
CLUSTER = os.path.join(REPO, "scripts", "cluster")
PREFIX = os.environ.get("CHORUS_CLUSTER_PREFIX", "crec")
KILL = re.compile(r"killing myself \(SIGKILL\) at step \d+, time=([0-9.]+)")
FIRST = re.compile(r"first step of generation (\d+) \((\d+) ranks\) done at time=([0-9.]+)")

# A store client run inside host 0's namespace, started before the job so that neither its start
# nor its connection delays the replacement: one request per line of stdin ("set KEY VALUE" or
# "add KEY DELTA") over the TCP store's wire protocol, answered by one line on stdout.
STORE_CLIENT = r"""
import socket, struct, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
def field(b): return struct.pack("<I", len(b)) + b
def read(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: sys.exit("store closed the connection")
        b += c
    return b
for line in sys.stdin:
    op, key, value = line.split()
    if op == "set":
        code, body = 1, field(key.encode()) + field(value.encode())
    else:
        code, body = 3, field(key.encode()) + struct.pack("<q", int(value))
    s.sendall(struct.pack("<IHBBI", 0x54534843, 1, code, 0, len(body)) + body)
    magic, version, status, flags, n = struct.unpack("<IHBBI", read(12))
    reply = read(n)
    if status != 0: sys.exit("store error %d: %r" % (status, reply))
    print("ok", flush=True)
"""


class StoreClient:
    def __init__(self, port):
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns(0), "/usr/bin/python3", "-c", STORE_CLIENT,
                                      addr(0), str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def request(self, *words):
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"store request {words} failed")
        return reply.strip()


def ns(host):
    return f"{PREFIX}-h{host}"


def addr(host):
    return f"10.77.0.{host + 1}"


def start_store(build, logdir):
    out = open(os.path.join(logdir, "store.out"), "w+")
    proc = subprocess.Popen(["ip", "netns", "exec", ns(0), os.path.join(build, "tools/chorus-store/chorus-store"),
                             "--host", addr(0), "--port", "0"], stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    for _ in range(100):
        out.seek(0)
        m = re.search(r"tcp://[0-9.]+:([0-9]+)", out.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chorus-store did not start on host 0")


def start_rank(args, rank, size, per_host, port, logdir, extra):
    host = rank // per_host
    local_size = min(per_host, size - host * per_host)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CHORUS_RANK": str(rank),
           "CHORUS_WORLD_SIZE": str(size), "CHORUS_LOCAL_RANK": str(rank % per_host),
           "CHORUS_LOCAL_SIZE": str(local_size), "CHORUS_STORE": f"tcp://{addr(0)}:{port}",
           "CHORUS_IFNAME": ns(host), "CHORUS_TIMEOUT": "30", "CHORUS_AUTH": "off",
           "ELASTIC_KILL_RANK": str(size - 1), "ELASTIC_KILL_STEP": str(args.kill_step)}
    env.update(extra)
    tag = f"{rank}{'r' if extra else ''}"
    out = open(os.path.join(logdir, f"rank{tag}.out"), "w")
    cmd = ["ip", "netns", "exec", ns(host), "env", "-i"] + [f"{k}={v}" for k, v in env.items()] + [
        os.path.join(args.build, "examples/elastic_allreduce"), "--steps", str(args.steps), "--step-ms", "10",
        "--count", "535818", "--admit-every", "5"]
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def one_run(args, size, per_host, replace, logdir):
    store, port = start_store(args.build, logdir)
    procs = []
    started = None
    client = StoreClient(port)
    try:
        # What chorus-run --elastic publishes: the restarts it has left (the decider of a shrink
        # waits up to 2 s for the announced replacements when some are left).
        client.request("set", "chorus/elastic/restarts_left", 1 if replace else 0)
        procs = [start_rank(args, r, size, per_host, port, logdir, {}) for r in range(size)]
        victim = procs[-1]
        victim.wait(timeout=120)
        if replace:
            client.request("add", "chorus/elastic/expected_joiners", 1)
            client.request("set", "chorus/elastic/restarts_left", 0)
            procs.append(start_rank(args, size - 1, size, per_host, port, logdir,
                                    {"CHORUS_JOIN": "1", "CHORUS_RESTART": "1"}))
            started = time.time()
        for p in procs[:-1] if not replace else procs[:-2] + procs[-1:]:
            if p.wait(timeout=120) != 0:
                raise RuntimeError(f"a rank exited {p.returncode}; logs in {logdir}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        client.proc.kill()
        client.proc.wait()
        store.terminate()
        store.wait()
    rank0 = open(os.path.join(logdir, "rank0.out")).read()
    killed = float(KILL.search(open(os.path.join(logdir, f"rank{size - 1}.out")).read()).group(1))
    target = size if replace else size - 1
    for gen, ranks, at in FIRST.findall(rank0):
        if int(ranks) == target:
            return float(at) - killed, int(gen), (started - killed if started else None)
    raise RuntimeError(f"no step on {target} ranks after the kill; logs in {logdir}")


def bare_tcp(hosts):
    """Context for the recovery figures: round-trip time (ping) and one plain TCP stream (iperf3,
    5 s) from host 0 to host 1 of the cluster that is up."""
    ping = subprocess.run(["ip", "netns", "exec", ns(0), "ping", "-q", "-c", "20", "-i", "0.05", addr(1)],
                          capture_output=True, text=True, timeout=60).stdout
    rtt = re.search(r"= ([0-9.]+)/([0-9.]+)/([0-9.]+)", ping)
    server = subprocess.Popen(["ip", "netns", "exec", ns(1), "iperf3", "-s", "-1", "-p", "5201"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(["ip", "netns", "exec", ns(0), "iperf3", "-c", addr(1), "-p", "5201", "-t", "5", "-J"],
                             capture_output=True, text=True, timeout=60).stdout
        gbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    print(f"# bare TCP, {hosts} hosts, host 0 -> host 1: ping rtt min/avg/max "
          f"{rtt.group(1)}/{rtt.group(2)}/{rtt.group(3)} ms, one iperf3 stream {gbps:.3f} Gbit/s", flush=True)


def cluster(*words):
    subprocess.run([CLUSTER, *words], check=True, capture_output=True, text=True,
                   env=dict(os.environ, CHORUS_CLUSTER_PREFIX=PREFIX))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--layouts", nargs="+", default=["2x1", "2x2", "2x4", "4x2"],
                        help="HOSTSxRANKS_PER_HOST")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--kill-step", type=int, default=20)
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--tcp", action="store_true", help="also measure bare TCP (ping, iperf3) per layout")
    parser.add_argument("--logs", default="/tmp/cluster-recovery-logs")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    print(f"# emulated cluster ({args.rate} links), elastic_allreduce, {os.cpu_count()} CPUs, kill of the last "
          f"rank at step {args.kill_step}, {args.runs} runs; seconds from the kill to the first step on the "
          f"new membership")
    print(f"{'layout':>6} {'ranks':>5} {'replacement':>11} {'median_s':>9} {'min_s':>7} {'max_s':>7}  "
          f"runs_s (generation)", flush=True)
    try:
        for layout in args.layouts:
            hosts, per_host = (int(x) for x in layout.split("x"))
            size = hosts * per_host
            cluster("up", str(hosts), "--rate", args.rate)
            if args.tcp:
                bare_tcp(hosts)
            for replace in (False, True):
                results = []
                for run in range(args.runs):
                    logdir = os.path.join(args.logs, f"{layout}-{'r' if replace else 's'}{run}")
                    os.makedirs(logdir, exist_ok=True)
                    results.append(one_run(args, size, per_host, replace, logdir))
                times = [t for t, _, _ in results]
                starts = [s for _, _, s in results if s is not None]
                print(f"{layout:>6} {size:>5} {'yes' if replace else 'no':>11} {statistics.median(times):>9.3f} "
                      f"{min(times):>7.3f} {max(times):>7.3f}  " + " ".join(f"{t:.3f}({g})" for t, g, _ in results) +
                      (f"  replacement started {statistics.median(starts):.3f} s after the kill" if starts else ""),
                      flush=True)
    finally:
        cluster("down")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""torch_recovery.py on the emulated cluster (scripts/cluster: a network namespace per host,
shaped links): PyTorch training that loses a rank, Chorus against torchft in the same run, the
ranks spread over H hosts, L per host; the time from the kill to the next committed step on the
survivors, and with --replacement to the replacement's first committed step.

    sudo bench/elastic/torch_cluster_recovery.py --build build --layouts 2x1 2x2 4x2 --runs 3

Both systems train train_elastic.py's MLP on Fashion-MNIST, one compute thread per rank, with the
same collective timeout (--timeout); rank / replica N-2 SIGKILLs itself in step --fail-step's
backward (N = 2: rank 1), as in torch_recovery.py, which says what each figure is.

Chorus: chorus-run starts ranks on one host only, so this script plays its part (as
cluster_recovery.py does for the C++ example): chorus-store on host 0, rank i on host i / L
through `ip netns exec` with what chorus-run gives a rank (CHORUS_RANK, CHORUS_STORE, RANK,
WORLD_SIZE, MASTER_ADDR = host 0, ...) and CHORUS_IFNAME = its host's link; it publishes
torch/chorus/elastic/restarts_left (1 with a replacement, 0 without) and, once the killed process
has exited, announces the replacement (expected_joiners) and starts it on the killed rank's host
with CHORUS_JOIN=1 CHORUS_RESTART=1. Authentication is off on both sides (CHORUS_AUTH=off;
torchft has none).
torchft (PyPI torchft): its lighthouse on host 0, replica group r (one process) on host r / L
with torchft_trainer.py --host-addr <its host's address> (its store and Manager advertise that
address, not the machine's name, which every namespace shares) and GLOO_SOCKET_IFNAME = its
host's link, and a quorum timeout of --torchft-quorum-timeout (30 s: an upper bound, which the
collective timeout was too short to be at N = 2); --replacement: this script starts the replica
again once the killed one has exited.

--spares 1 (with --replacement): Chorus's replacement is a spare, started with the ranks on the
killed rank's host and waiting, set up, to be admitted in the survivors' membership change, as
chorus-run --spares 1 does (the cap torch/chorus/elastic/max_size, CHORUS_SPARES=1 everywhere,
CHORUS_JOIN=1 CHORUS_SPARE=1 CHORUS_JOIN_WAIT=0 in the spare); torchft unchanged.

Needs root (ip netns). The cluster (prefix $CHORUS_CLUSTER_PREFIX, default "crec") is brought up
per layout and taken down at the end, also on failure. --tcp also prints bare TCP between host 0
and host 1 (ping, one iperf3 stream), the context for the figures.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import cluster_recovery as cr  # noqa: E402  the cluster, chorus-store, the store client
import torch_recovery as tr  # noqa: E402  the figures from the step logs


def host_of(rank, per_host):
    return rank // per_host


def netns_cmd(host, env, argv):
    return ["ip", "netns", "exec", cr.ns(host), "env", "-i"] + [
        f"{k}={v}" for k, v in env.items()] + argv


def base_env(args):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.path.join(args.build, "python"), "HOME": os.environ.get("HOME", "/")}


def chorus_rank(args, rank, size, per_host, store_port, master_port, events, stop, out, extra):
    host = host_of(rank, per_host)
    local_size = min(per_host, size - host * per_host)
    env = dict(base_env(args), CHORUS_RANK=rank, CHORUS_WORLD_SIZE=size,
               CHORUS_LOCAL_RANK=rank % per_host, CHORUS_LOCAL_SIZE=local_size,
               CHORUS_STORE=f"tcp://{cr.addr(0)}:{store_port}", CHORUS_IFNAME=cr.ns(host),
               CHORUS_TIMEOUT=args.timeout, CHORUS_AUTH="off", RANK=rank, WORLD_SIZE=size,
               LOCAL_RANK=rank % per_host, LOCAL_WORLD_SIZE=local_size, MASTER_ADDR=cr.addr(0),
               MASTER_PORT=master_port, **extra)
    argv = [args.python, os.path.join(ROOT, "examples", "torch", "train_elastic.py"),
            "--backend", "chorus", "--fail-rank", str(tr.fail_rank(size)), "--fail-step",
            str(args.fail_step), "--timeout", str(args.timeout), "--steps", "1000000",
            "--epochs", "1000", "--step-log", events, "--stop-file", stop]
    return subprocess.Popen(netns_cmd(host, env, argv), stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def stop_after(events, stop, is_joiner, replace, steps_past, done, deadline):
    """Writes the stop step once the figure is in the log: the replacement's first commit, or
    (without one) the first of steps_past(events) (the steps committed after the failure)."""
    if replace:
        tr.stop_after_replacement(None, events, stop, is_joiner, done, deadline)
        return
    while time.monotonic() < deadline and not done():
        past = steps_past(tr.read_events(events))
        if past:
            with open(stop + ".tmp", "w") as f:
                f.write(str(max(past) + 10))
            os.rename(stop + ".tmp", stop)
            return
        time.sleep(0.1)


def chorus_one(args, size, per_host, replace, logdir):
    store, port = cr.start_store(args.build, logdir)
    client = cr.StoreClient(port)
    events, stop = os.path.join(logdir, "steps.jsonl"), os.path.join(logdir, "stop")
    open(events, "w").close()
    master_port = tr.free_port()
    procs, outs = [], []
    victim = tr.fail_rank(size)

    def start(rank, extra, tag):
        out = open(os.path.join(logdir, f"rank{tag}.out"), "w")
        outs.append(out)
        procs.append(chorus_rank(args, rank, size, per_host, port, master_port, events, stop,
                                 out, extra))
        return procs[-1]

    deadline = time.monotonic() + args.run_timeout
    try:
        if args.spares:
            # What chorus-run --elastic --spares publishes and gives: the cap on the job's size,
            # CHORUS_SPARES to everyone, no restarts_left (the spare is the replacement); the
            # spare runs on the killed rank's host with that rank's environment.
            client.request("set", "torch/chorus/elastic/max_size", size)
            spares = {"CHORUS_SPARES": "1"}
            ranks = [start(r, spares, str(r)) for r in range(size)]
            start(victim, dict(spares, CHORUS_JOIN="1", CHORUS_SPARE="1", CHORUS_JOIN_WAIT="0",
                               CHORUS_RESTART="0"), f"{victim}s")
        else:
            # What chorus-run --elastic publishes where the torch backend's default group meets.
            client.request("set", "torch/chorus/elastic/restarts_left", 1 if replace else 0)
            ranks = [start(r, {}, str(r)) for r in range(size)]
        while ranks[victim].poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if replace and not args.spares:
            client.request("add", "torch/chorus/elastic/expected_joiners", 1)
            client.request("set", "torch/chorus/elastic/restarts_left", 0)
            start(victim, {"CHORUS_JOIN": "1", "CHORUS_RESTART": "1"}, f"{victim}r")
        stop_after(events, stop, tr.joiner, replace,
                   lambda ev: [e["step"] for e in ev
                               if e["kind"] == "commit" and e["step"] > args.fail_step],
                   lambda: all(p.poll() is not None for p in procs), deadline)
    finally:
        tr.wait_then_end(procs, deadline, outs)
        client.proc.kill()
        client.proc.wait()
        store.terminate()
        store.wait()
    text = open(os.path.join(logdir, "rank0.out")).read()
    m = re.search(r"recovered in ([0-9.]+) s", text)
    if not m:
        raise RuntimeError(f"chorus: no 'recovered in' line; logs in {logdir}")
    result = {"shrink": float(m.group(1))}
    if replace:
        r = tr.replacement_times(tr.read_events(events), tr.joiner)
        if r is None:
            raise RuntimeError(f"chorus: the replacement committed no step; logs in {logdir}")
        result.update(r)
    if "parameters: bit-identical" not in text:
        raise RuntimeError(f"chorus: the ranks did not end bit-identical; logs in {logdir}")
    return result


def replica0_past_kill(ev):
    """torchft: the steps replica 0 committed from the one the killed replica died in."""
    kills = [e for e in ev if e["kind"] == "kill"]
    return [e["step"] for e in ev if e["kind"] == "commit" and e["replica"] == 0
            and kills and e["step"] >= kills[0]["step"]]


def torchft_one(args, size, per_host, replace, logdir):
    port = tr.free_port()
    events, stop = os.path.join(logdir, "events.jsonl"), os.path.join(logdir, "stop")
    open(events, "w").close()
    quiet = dict(base_env(args), RUST_LOG="warn")
    lighthouse = os.path.join(os.path.dirname(args.python), "torchft_lighthouse")
    lh_out = open(os.path.join(logdir, "lighthouse.out"), "w")
    lh = subprocess.Popen(netns_cmd(0, quiet, [
        lighthouse, "--min_replicas", str(size - 1), "--quorum_tick_ms", "100",
        "--join_timeout_ms", "1000", "--bind", f"{cr.addr(0)}:{port}"]),
        stdout=lh_out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    procs, outs = [], []
    failing = tr.fail_rank(size)

    def start(r, replacement):
        host = host_of(r, per_host)
        env = dict(quiet, TORCHFT_LIGHTHOUSE=f"http://{cr.addr(0)}:{port}",
                   GLOO_SOCKET_IFNAME=cr.ns(host))
        if replacement:
            env["TORCHFT_BENCH_REPLACEMENT"] = "1"
        argv = [args.python, os.path.join(HERE, "torchft_trainer.py"), "--replica", str(r),
                "--timeout", str(args.timeout), "--events", events, "--min-replicas",
                str(size - 1), "--fail-step", str(args.fail_step if r == failing else -1),
                "--steps", "1000000", "--stop-file", stop, "--host-addr", cr.addr(host),
                "--quorum-timeout", str(args.torchft_quorum_timeout)]
        out = open(os.path.join(logdir, f"replica{r}{'r' if replacement else ''}.out"), "w")
        outs.append(out)
        procs.append(subprocess.Popen(netns_cmd(host, env, argv), stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        return procs[-1]

    deadline = time.monotonic() + args.run_timeout
    try:
        time.sleep(0.5)
        replicas = [start(r, False) for r in range(size)]
        if replace:
            while replicas[failing].poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            start(failing, True)
        stop_after(events, stop, lambda e: e.get("replacement"), replace, replica0_past_kill,
                   lambda: all(p.poll() is not None for p in procs), deadline)
    finally:
        tr.wait_then_end(procs, deadline, outs)
        lh.kill()
        lh.wait()
        lh_out.close()
    ev = tr.read_events(events)
    kills = [e for e in ev if e["kind"] == "kill"]
    if not kills:
        raise RuntimeError(f"torchft: the replica never reached its kill step; logs in {logdir}")
    after = [e for e in ev if e["kind"] == "commit" and e["replica"] == 0
             and e["step"] >= kills[0]["step"]]  # as replica0_past_kill, with the times
    if not after:
        raise RuntimeError(f"torchft: replica 0 committed no step after the kill; logs in "
                           f"{logdir}")
    result = {"shrink": after[0]["t"] - kills[0]["t"]}
    if replace:
        r = tr.replacement_times(ev, lambda e: e.get("replacement"))
        if r is None:
            raise RuntimeError(f"torchft: the replacement committed no step; logs in {logdir}")
        result.update(r)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.expanduser(
        "~/.cache/chorus/venv-torch-2.15.0/bin/python"))
    p.add_argument("--layouts", nargs="+", default=["2x1", "2x2", "4x2"],
                   help="HOSTSxRANKS_PER_HOST")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--fail-step", type=int, default=30)
    p.add_argument("--timeout", type=float, default=5, help="collective timeout, seconds, both")
    p.add_argument("--run-timeout", type=float, default=300)
    p.add_argument("--replacement", action="store_true")
    p.add_argument("--spares", type=int, choices=[0, 1], default=0,
                   help="with --replacement: Chorus's replacement is a spare started beside the "
                        "ranks on the killed rank's host, set up and waiting (chorus-run "
                        "--spares 1), not a process started after the kill")
    p.add_argument("--torchft-quorum-timeout", type=float, default=30,
                   help="torchft's quorum timeout, seconds (its survivors' quorum waits for the "
                        "lighthouse to find the dead replica's heartbeat stale, 5 s; at the "
                        "collective timeout it expired first at N = 2 and the Manager raised)")
    p.add_argument("--systems", default="chorus,torchft")
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--tcp", action="store_true")
    p.add_argument("--logs", default=None)
    p.add_argument("--json")
    args = p.parse_args()
    args.build = os.path.abspath(args.build)
    logs = args.logs or tempfile.mkdtemp(prefix="torch-cluster-recovery-")
    systems = args.systems.split(",")
    what = "the replacement's first committed step" if args.replacement else \
        "the next committed step"
    print(f"# emulated cluster ({args.rate} links), {os.cpu_count()} CPUs, MLP, kill in step "
          f"{args.fail_step}, collective timeout {args.timeout:g} s, {args.runs} runs per "
          f"system alternating; seconds from the kill to {what} (median | min | max); logs in "
          f"{logs}", flush=True)
    every = []
    try:
        for layout in args.layouts:
            hosts, per_host = (int(x) for x in layout.split("x"))
            size = hosts * per_host
            cr.cluster("up", str(hosts), "--rate", args.rate)
            if args.tcp:
                cr.bare_tcp(hosts)
            results = {s: [] for s in systems}
            for run in range(args.runs):
                for s in systems:
                    logdir = os.path.join(logs, f"{layout}-{s}-{run}")
                    os.makedirs(logdir, exist_ok=True)
                    one = chorus_one if s == "chorus" else torchft_one
                    try:
                        r = one(args, size, per_host, args.replacement, logdir)
                    except Exception as e:  # noqa: BLE001  a failed run is reported, not hidden
                        print(f"{layout} {s} run {run}: FAILED: {e}", flush=True)
                        every.append({"layout": layout, "system": s, "run": run,
                                      "error": str(e)})
                        continue
                    results[s].append(r)
                    every.append(dict(r, layout=layout, system=s, run=run))
            for s in systems:
                key = "total" if args.replacement else "shrink"
                ts = [r[key] for r in results[s]]
                if ts:
                    extra = ""
                    if args.replacement:
                        startup = statistics.median(r["startup"] for r in results[s])
                        launch = statistics.median(r["launch"] for r in results[s])
                        extra = f"  (start-up {startup:.3f} s, launch {launch:.3f} s)"
                    print(f"{layout} ({size} ranks) {s}: {tr.stats(ts)}  over {len(ts)} "
                          f"run(s){extra}", flush=True)
                else:
                    print(f"{layout} ({size} ranks) {s}: no run completed", flush=True)
    finally:
        cr.cluster("down")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(every, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""torch_bench: torch.distributed All-Reduce (gloo or chorus backend, f32 sum) measured with
chorus-bench's definitions (the same as common.h for the C++ peers). Run it with Debian's
/usr/bin/python3 (python3-torch); --backend chorus needs the chorus package on PYTHONPATH
(<build>/python).

  chorus-run -n 4 -- env TORCH_BENCH_STORE_DIR=/tmp/d GLOO_SOCKET_IFNAME=lo \\
      /usr/bin/python3 torch_bench.py --min-bytes 8 --max-bytes 64M --json f.json
  scripts/cluster run-each 4 -- env TORCH_BENCH_STORE_DIR=/tmp/d /usr/bin/python3 torch_bench.py ...

Ranks: --rank/--size, else CHORUS_RANK/CHORUS_WORLD_SIZE (chorus-run), else
CLUSTER_RANK/CLUSTER_SIZE (scripts/cluster run-each). Rendezvous: init_method file://DIR/store,
DIR = --store-dir, else $TORCH_BENCH_STORE_DIR, else $GLOO_BENCH_STORE_DIR; a fresh directory
shared by all ranks (one filesystem). Network interface: $GLOO_SOCKET_IFNAME (read by PyTorch's
ProcessGroupGloo), set here to $CLUSTER_IFNAME (run-each) or "lo" when it is unset.

What is timed: dist.all_reduce(tensor) (SUM, async_op=False), which PyTorch's ProcessGroupGloo
turns into gloo::allreduce() (ring) on the CPU tensor, and the chorus backend into one Chorus
all-reduce (shared memory between ranks of a host, TCP between hosts). It is in place (torch.distributed has no
out-of-place all-reduce). Each call timed on its own with time.perf_counter.

Definitions (copied from tools/chorus-bench, as in common.h):
  * sizes: b = min; b <= max * 1.0000001; b *= step; count = floor(b / 4) (at least 1),
    bytes = count * 4;
  * buffer allocated once at max + 4 bytes and zero-filled before any timing;
  * per size: `warmup` untimed calls, then `iters` timed calls; the per-iteration times are
    reduced with MAX over the ranks (one all_reduce MAX of the times vector after the timed
    loop), sorted, and the median (element iters // 2) is the row's time;
  * algbw = bytes / time (GB/s, 1e9), busbw = algbw * 2(N-1)/N;
  * cpu_ns_per_byte: CPU time of the whole process (user + system, every thread, including
    PyTorch's and Gloo's; getrusage RUSAGE_SELF) over the timed calls, summed over the ranks,
    divided by iters * bytes;
  * #wrong: after timing, one more call with input[i] = (i + rank) % 3 + 1, every output element
    compared with the exact sum, the count of mismatches summed over the ranks.
"""
import argparse
import datetime
import json
import os
import resource
import socket
import sys
import time

UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KiB": 1024, "M": 1 << 20, "MB": 1 << 20,
         "MiB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GiB": 1 << 30}


def parse_bytes(s):
    i = len(s)
    while i > 0 and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    if s[i:] not in UNITS or i == 0:
        raise argparse.ArgumentTypeError(f"bad size '{s}'")
    return int(float(s[:i]) * UNITS[s[i:]])


def env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v:
            return int(v)
    return -1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-b", "--min-bytes", type=parse_bytes, default=8)
    p.add_argument("-e", "--max-bytes", type=parse_bytes, default=64 << 20)
    p.add_argument("-f", "--step-factor", type=float, default=2)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("--json", default="")
    p.add_argument("-c", "--check", dest="check", action="store_true", default=True)
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--op", choices=["allreduce"], default="allreduce")
    p.add_argument("--dtype", choices=["f32"], default="f32")
    p.add_argument("--redop", choices=["sum"], default="sum")
    p.add_argument("--backend", choices=["gloo", "chorus"], default="gloo")
    p.add_argument("--system", default="", help="JSON 'system' label (default torch-BACKEND)")
    p.add_argument("--store-dir", default="")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--size", type=int, default=-1)
    a = p.parse_args()
    if a.min_bytes == 0 or a.min_bytes > a.max_bytes:
        p.error("need 0 < --min-bytes <= --max-bytes")
    if a.step_factor < 1.01:
        p.error("--step-factor must be >= 1.01")
    if a.iters < 1 or a.warmup < 0:
        p.error("bad --iters/--warmup")
    a.system = a.system or "torch-" + a.backend
    if a.rank < 0:
        a.rank = env_int("CHORUS_RANK", "CLUSTER_RANK")
    if a.size < 0:
        a.size = env_int("CHORUS_WORLD_SIZE", "CLUSTER_SIZE")
    if a.rank < 0 or a.size < 1 or a.rank >= a.size:
        p.error("no rank/size: pass --rank/--size or run under chorus-run or scripts/cluster "
                "run-each")
    a.store_dir = (a.store_dir or os.environ.get("TORCH_BENCH_STORE_DIR")
                   or os.environ.get("GLOO_BENCH_STORE_DIR") or "")
    if not a.store_dir:
        p.error("no --store-dir, TORCH_BENCH_STORE_DIR or GLOO_BENCH_STORE_DIR")
    return a


def cpu_ns():
    """CPU time of the whole process (user + system, every thread) so far, in nanoseconds."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return int((u.ru_utime + u.ru_stime) * 1e9)


def sizes(cfg):
    b = float(cfg.min_bytes)
    while b <= cfg.max_bytes * 1.0000001:
        count = max(int(b) // 4, 1)
        if count * 4 > cfg.max_bytes + 4:
            break
        yield count
        b *= cfg.step_factor


def main():
    cfg = parse_args()
    # Before torch is imported and the process group made: ProcessGroupGloo reads it then.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("CLUSTER_IFNAME") or "lo")
    iface = os.environ["GLOO_SOCKET_IFNAME"]

    import torch
    import torch.distributed as dist

    if cfg.backend == "chorus":
        import chorus.torch  # noqa: F401  registers the backend

    torch.set_num_threads(1)
    rank, n = cfg.rank, cfg.size
    os.makedirs(cfg.store_dir, exist_ok=True)
    dist.init_process_group(cfg.backend, init_method="file://" + os.path.join(cfg.store_dir, "store"),
                            rank=rank, world_size=n, timeout=datetime.timedelta(seconds=600))

    buf = torch.zeros(cfg.max_bytes // 4 + 1, dtype=torch.float32)
    rows = []
    for count in sizes(cfg):
        t = buf[:count]
        for _ in range(cfg.warmup):
            dist.all_reduce(t)
        times = [0.0] * cfg.iters
        cpu0 = cpu_ns()
        for i in range(cfg.iters):
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times[i] = (time.perf_counter() - t0) * 1e6
        cpu = torch.tensor([cpu_ns() - cpu0], dtype=torch.int64)
        dist.all_reduce(cpu)
        tt = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        times = sorted(tt.tolist())
        time_us = times[len(times) // 2]
        nbytes = count * 4
        algbw = nbytes / (time_us * 1e-6) / 1e9
        row = {"bytes": nbytes, "count": count, "time_us": time_us, "algbw": algbw,
               "busbw": algbw * 2.0 * (n - 1) / n, "wrong": 0,
               "cpu_ns_per_byte": int(cpu[0]) / (cfg.iters * nbytes)}
        if cfg.check:
            idx = torch.arange(count, dtype=torch.int64)
            t.copy_(((idx + rank) % 3 + 1).to(torch.float32))
            dist.all_reduce(t)
            want = torch.zeros(count, dtype=torch.float64)
            for q in range(n):
                want += ((idx + q) % 3 + 1).to(torch.float64)
            wrong = torch.tensor([int((t.to(torch.float64) != want).sum())], dtype=torch.int64)
            dist.all_reduce(wrong)
            row["wrong"] = int(wrong[0])
            t.zero_()  # back to zeros (in place: the buffer holds the sums now)
        rows.append(row)

    path = ("ProcessGroupGloo -> gloo::allreduce" if cfg.backend == "gloo" else
            "ProcessGroupChorus -> Communicator::allReduce")
    notes = (f"in place (dist.all_reduce has no out-of-place form); torch {torch.__version__}, "
             f"{path}; GLOO_SOCKET_IFNAME={iface}; torch.set_num_threads(1); rendezvous file://")
    if rank == 0:
        print(f"# {cfg.system} op=allreduce ranks={n} dtype=f32 redop=sum algo=dist.all_reduce "
              f"iters={cfg.iters} warmup={cfg.warmup}")
        print(f"# {notes}")
        hdr = "%12s %12s %6s %6s %12s %10s %10s %8s %9s"
        print(hdr % ("size(B)", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong",
                     "cpu"))
        print(hdr % ("", "", "", "", "", "(GB/s)", "(GB/s)", "", "(ns/B)"))
        for r in rows:
            print("%12d %12d %6s %6s %12.1f %10.3f %10.3f %8s %9.3f" % (
                r["bytes"], r["count"], "f32", "sum", r["time_us"], r["algbw"], r["busbw"],
                str(r["wrong"]) if cfg.check else "N/A", r["cpu_ns_per_byte"]))
        sys.stdout.flush()
        if cfg.json:
            doc = {"system": cfg.system, "op": "allreduce", "dtype": "f32", "redop": "sum",
                   "world_size": n, "algo": "dist.all_reduce", "host": socket.gethostname(),
                   "iters": cfg.iters, "warmup": cfg.warmup, "check": cfg.check, "notes": notes,
                   "rows": rows}
            with open(cfg.json, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
    # Leave together: no rank closes its sockets while a peer still finishes a collective.
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all(r["wrong"] == 0 for r in rows) else 3


if __name__ == "__main__":
    sys.exit(main())

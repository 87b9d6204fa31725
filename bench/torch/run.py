"""The chorus torch.distributed backend against gloo on the current torch: one command, both
backends in every run, alternating, and a table of ratios against the targets.

    make bench-torch                       # builds what it needs, then runs this
    python bench/torch/run.py --build BUILD [--ns 2,4] [--quick] [--json out.json] [--pin]

BUILD is a build folder configured with the torch's Python (-DPython3_EXECUTABLE=<venv>/bin/python)
holding chorus-run, chorus-bench and the Python package; run this with that same Python. Each
case starts its ranks with chorus-run; bench/torch/worker.py says what each measures. Cases:

  * C API: chorus-bench --api c, all_reduce of 8 bytes (f32 sum), before and after the torch run
    of the same N; the mean of the two medians.
  * dist.all_reduce, f32 sum, 8 B to 64 MiB: gloo and chorus groups in the same processes,
    blocks alternating; time = median over calls of the slowest rank; busbw = bytes / time x
    2(N-1)/N. "binding" = chorus's 8-byte time minus the C API's; up to 64 KiB the same
    all-reduce also through chorus.Communicator (Chorus's own Python API, one blocking call) in
    the same processes, blocks alternating with the other two: the binding's cost at the same
    moments, which the C API's separate run cannot give on a loaded machine.
  * DDP step of the MLP and the CNN (batch 64 per rank): DDP on gloo, DDP on chorus, DDP inside
    no_sync() (no all-reduce: the compute-only step, as bench/compare/torch_ddp.sh's) and the
    bare model, blocks rotating.
  * FSDP2 step (fully_shard, reshard_after_forward) of a stack of Linear layers, two copies on
    meshes of a gloo and a chorus group, blocks alternating.
  * FSDP2 peak resident memory per rank: one process group per run (gloo, chorus, gloo,
    chorus), the largest rank's VmHWM after a reset once the process group is up.

Absolute times depend on the machine and its load; the ratios come from the same processes at
the same moments. The whole run takes a few minutes on 2 cores (--quick: about one).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True)
    p.add_argument("--ns", default="2,4", help="world sizes for all_reduce and DDP")
    p.add_argument("--fsdp-ranks", type=int, default=4)
    p.add_argument("--fsdp-params", type=float, default=52e6)
    p.add_argument("--quick", action="store_true", help="fewer rounds and sizes")
    p.add_argument("--only", default="", help="comma-separated: capi,allreduce,ddp,fsdp,memory")
    p.add_argument("--json", default="")
    p.add_argument("--pin", action="store_true", help="pin rank r to CPU r mod the CPU count")
    p.add_argument("--timeout", type=int, default=600, help="seconds per case")
    return p.parse_args()


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.run = os.path.join(self.build, "tools", "chorus-run", "chorus-run")
        self.bench = os.path.join(self.build, "tools", "chorus-bench", "chorus-bench")
        self.tmp = tempfile.mkdtemp(prefix="chorus-bench-torch-")
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        py = os.path.join(self.build, "python")
        self.env["PYTHONPATH"] = py + os.pathsep + self.env.get("PYTHONPATH", "")
        for tool in (self.run, self.bench):
            if not os.access(tool, os.X_OK):
                sys.exit(f"run.py: {tool} is missing: build chorus-run and chorus-bench in "
                         f"{self.build} first (make bench-torch does)")

    def launch(self, n, argv, what):
        cmd = [self.run, "-n", str(n), "--"] + argv
        t0 = time.monotonic()
        res = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                             timeout=self.args.timeout)
        took = time.monotonic() - t0
        if res.returncode != 0:
            sys.stderr.write(res.stdout[-3000:] + res.stderr[-3000:])
            sys.exit(f"run.py: {what} on {n} ranks failed (exit {res.returncode})")
        print(f"  {what}, N = {n}: {took:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)

    def worker(self, n, case, *extra):
        out = os.path.join(self.tmp, f"{case}-{n}-{len(os.listdir(self.tmp))}.json")
        argv = [sys.executable, os.path.join(HERE, "worker.py"), case, "--out", out]
        if self.args.pin:
            argv.append("--pin")
        self.launch(n, argv + list(extra), f"{case} {' '.join(extra)}".strip())
        with open(out) as f:
            return json.load(f)

    def capi(self, n):
        out = os.path.join(self.tmp, f"capi-{n}-{len(os.listdir(self.tmp))}.json")
        iters = "500" if self.args.quick else "2000"
        self.launch(n, [self.bench, "--api", "c", "-b", "8", "-e", "8", "-n", iters, "-w", "200",
                        "--json", out], "C API all_reduce 8 B")
        with open(out) as f:
            return json.load(f)["rows"][0]["time_us"]


def main():
    args = parse_args()
    b = Bench(args)
    ns = [int(x) for x in args.ns.split(",")]
    only = set(args.only.split(",")) if args.only else {"capi", "allreduce", "ddp", "fsdp",
                                                         "memory"}
    quick = args.quick
    res = {"torch": None, "allreduce": {}, "capi": {}, "ddp": {}, "fsdp": None, "memory": []}
    print(f"bench/torch/run.py: build {b.build}, {os.cpu_count()} CPUs, Python {sys.executable}")
    sizes = "8,1K,64K,1M,16M,64M" if quick else "8,1K,64K,256K,1M,4M,16M,64M"
    rounds = "2" if quick else "4"
    for n in ns:
        capi = []
        if "capi" in only:
            capi.append(b.capi(n))
        if "allreduce" in only:
            r = b.worker(n, "allreduce", "--sizes", sizes, "--rounds", rounds,
                         "--iters", "20" if quick else "50")
            res["torch"] = r["torch"]
            res["allreduce"][n] = r["rows"]
        if "capi" in only:
            capi.append(b.capi(n))
            res["capi"][n] = sum(capi) / len(capi)
        if "ddp" in only:
            for model in ("mlp", "cnn"):
                r = b.worker(n, "ddp", "--model", model, "--rounds", "4" if quick else "8",
                             "--iters", "10" if quick else "20")
                res["torch"] = r["torch"]
                res["ddp"].setdefault(n, {})[model] = r
    fsdp_args = ["--fsdp-params", str(args.fsdp_params)]
    if "fsdp" in only:
        res["fsdp"] = b.worker(args.fsdp_ranks, "fsdp", "--rounds", "2" if quick else "4",
                               "--iters", "2", "--warmup", "1", *fsdp_args)
        res["torch"] = res["fsdp"]["torch"]
    if "memory" in only:
        for backend in (["gloo", "chorus"] if quick else ["gloo", "chorus", "chorus", "gloo"]):
            res["memory"].append(b.worker(args.fsdp_ranks, "memory", "--backend", backend,
                                          "--iters", "2", "--warmup", "1", *fsdp_args))
    report(res, ns, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"\nJSON: {args.json}")


def verdict(ok):
    return "yes" if ok else "**no**"


def fmt_bytes(x):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if x >= size:
            return f"{x // size} {unit}"
    return f"{x} B"


def report(res, ns, args):
    print(f"\ntorch {res['torch']}; ratios from the same processes, blocks alternating")
    if res["allreduce"]:
        print("\n### dist.all_reduce, f32 sum, one host\n")
        print("| N | size | gloo us | chorus us | busbw gloo GB/s | busbw chorus GB/s "
              "| chorus / gloo busbw | target |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|")
        for n in ns:
            for row in res["allreduce"].get(n, []):
                ratio = row["chorus_busbw"] / row["gloo_busbw"]
                if row["bytes"] >= 1 << 20:
                    target = f">= 3x: {verdict(ratio >= 3)}"
                elif row["bytes"] == 8:
                    half = row["chorus_us"] <= row["gloo_us"] / 2
                    target = f"latency <= half of gloo's: {verdict(half)}"
                else:
                    target = ""
                print(f"| {n} | {fmt_bytes(row['bytes'])} | {row['gloo_us']:.1f} | "
                      f"{row['chorus_us']:.1f} | {row['gloo_busbw']:.3f} | "
                      f"{row['chorus_busbw']:.3f} | {ratio:.2f}x | {target} |")
    if res["capi"]:
        print("\n### The binding's cost per call, all_reduce of 8 bytes\n")
        print("| N | C API us (chorus-bench --api c) | chorus.Communicator us (same processes) "
              "| dist.all_reduce on chorus us | binding us over the C API | binding us over "
              "chorus.Communicator | target: <= 20 us over the C API |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        for n in ns:
            rows = res["allreduce"].get(n)
            if n not in res["capi"] or not rows:
                continue
            torch_us = rows[0]["chorus_us"]
            direct = rows[0].get("direct_us", float("nan"))
            cost = torch_us - res["capi"][n]
            print(f"| {n} | {res['capi'][n]:.1f} | {direct:.1f} | {torch_us:.1f} | {cost:.1f} | "
                  f"{torch_us - direct:.1f} | {verdict(cost <= 20)} |")
    if res["ddp"]:
        print("\n### DDP step, batch 64 per rank, one host\n")
        print("| N | model | gloo ms | chorus ms | compute only (DDP no_sync) ms | bare model ms "
              "| gloo / chorus | chorus above compute / gloo's | target |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
        for n in ns:
            for model, r in res["ddp"].get(n, {}).items():
                g, c, z = r["gloo_ms"], r["chorus_ms"], r["nosync_ms"]
                above = (c - z) / (g - z) if g > z else float("nan")
                target = (f">= 1.3x: {verdict(g / c >= 1.3)}" if model == "mlp" else
                          f"above compute <= half of gloo's: {verdict(above <= 0.5)}")
                print(f"| {n} | {model} | {g:.2f} | {c:.2f} | {z:.2f} | {r['nocomm_ms']:.2f} | "
                      f"{g / c:.2f}x | {above:.2f} | {target} |")
    if res["fsdp"]:
        r = res["fsdp"]
        g, c = r["gloo_ms"], r["chorus_ms"]
        print(f"\n### FSDP2 step, {r['params'] / 1e6:.1f} M parameters, "
              f"{r['world_size']} ranks\n")
        print("| gloo ms | chorus ms | gloo / chorus | target: >= 1.3x |")
        print("|---:|---:|---:|---|")
        print(f"| {g:.0f} | {c:.0f} | {g / c:.2f}x | {verdict(g / c >= 1.3)} |")
    if res["memory"]:
        peak = {}
        for m in res["memory"]:
            peak[m["backend"]] = max(peak.get(m["backend"], 0), m["peak_rss_mib"])
        reset = all(m["hwm_reset"] for m in res["memory"])
        print(f"\n### FSDP2 peak resident memory per rank (the largest rank; "
              f"{'VmHWM since the process group was up' if reset else 'ru_maxrss of the process'}"
              f", the higher of the runs)\n")
        print("| gloo MiB | chorus MiB | chorus - gloo | target: chorus <= gloo |")
        print("|---:|---:|---:|---|")
        if "gloo" in peak and "chorus" in peak:
            d = peak["chorus"] - peak["gloo"]
            print(f"| {peak['gloo']:.0f} | {peak['chorus']:.0f} | {d:+.0f} MiB | "
                  f"{verdict(d <= 0)} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""chorus-sim against measurements: for each world size of an algo_sweep.sh result directory
(one rank per host on the emulated cluster), runs chorus-sim with the same hosts, sizes and
algorithms and the network constants given here (normally those chorus-bench --calibrate wrote for
that cluster), and prints predicted / measured per algorithm and size from --min-bytes on.

  bench/compare/sim_validate.py RESULT_DIR --sim build/tools/chorus-sim/chorus-sim \\
      --tuning tuning.txt [--shared-cores 2 --core-gbps X] [--min-bytes 65536]
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import tempfile

from algo_table import size  # same size labels as the sweep's table


def read_tuning(path):
    t = {}
    with open(path) as f:
        for line in f:
            line = line.split("#")[0].split()
            if len(line) == 2:
                t[line[0]] = float(line[1])
    return t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--sim", required=True)
    p.add_argument("--tuning", required=True, help="a chorus-bench --calibrate file")
    p.add_argument("--overhead-us", type=float, default=None,
                   help="per-send CPU cost (default: a tenth of net alpha)")
    p.add_argument("--shared-cores", type=int, default=0,
                   help="cores the emulated hosts share (this machine's, for the emulated cluster)")
    p.add_argument("--core-gbps", type=float, default=0,
                   help="with --shared-cores: what bench/compare/core_cost.sh printed")
    p.add_argument("--min-bytes", type=int, default=65536)
    p.add_argument("--tolerance", type=float, default=0.15)
    a = p.parse_args()
    t = read_tuning(a.tuning)
    alpha = t.get("net.alpha_us", 60.0)
    gbps = 1.0 / t.get("net.beta_ns_per_byte", 8.6)
    gamma = t.get("gamma_ns_per_byte.f32", 0.25)
    overhead = a.overhead_us if a.overhead_us is not None else alpha / 10
    runs = {}
    for f in glob.glob(os.path.join(a.dir, "n*-*.json")):
        m = re.match(r"n(\d+)-(\w+)\.json", os.path.basename(f))
        if m and m.group(2) != "auto":
            with open(f) as fh:
                rows = json.load(fh).get("rows", [])
            runs.setdefault(int(m.group(1)), {})[m.group(2)] = {r["bytes"]: r["time_us"] for r in rows}
    print(f"# chorus-sim vs measured (emulated cluster, one rank per host); net alpha {alpha:.1f} us, "
          f"{gbps:.3f} GB/s, per-send overhead {overhead:.1f} us, reduce {1 / gamma:.1f} GB/s; "
          + (f"hosts share {a.shared_cores} cores at {a.core_gbps:.3f} GB/s each; "
             if a.shared_cores else "")
          + f"sizes >= {size(a.min_bytes)}")
    within = total = 0
    worst = []
    for n in sorted(runs):
        sizes = sorted({b for alg in runs[n].values() for b in alg if b >= a.min_bytes})
        if not sizes:
            continue
        with tempfile.NamedTemporaryFile(suffix=".csv", delete=False) as tmp:
            out = tmp.name
        cmd = [a.sim, "--hosts", str(n), "--ranks-per-host", "1", "--net-alpha-us", str(alpha),
               "--net-gbps", str(gbps), "--overhead-us", str(overhead), "--reduce-gbps",
               str(1 / gamma), "-b", str(sizes[0]), "-e", str(sizes[-1]), "-f",
               str(sizes[1] / sizes[0] if len(sizes) > 1 else 2), "--csv", out, "-q"]
        if a.shared_cores:
            cmd += ["--shared-cores", str(a.shared_cores), "--core-gbps", str(a.core_gbps)]
        # The N-rank calibration of the sweep (CALIBRATE=1) says whether the ring ran both ways.
        own = os.path.join(a.dir, f"tuning-n{n}.txt")
        if os.path.exists(own):
            both = read_tuning(own).get("ring.bidirectional_bytes", 0)
            cmd += ["--ring-bidir-bytes", str(int(both))]
        for alg in runs[n]:
            cmd += ["--algo", alg]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        pred = {}
        with open(out) as f:
            for r in csv.DictReader(f):
                if r["status"] == "ok":
                    pred[(r["algorithm"], int(r["bytes"]))] = float(r["seconds"]) * 1e6
        os.unlink(out)
        algs = sorted(runs[n])
        print(f"\n### N = {n}: predicted / measured\n")
        print("| size | " + " | ".join(algs) + " |")
        print("|---|" + "---|" * len(algs))
        for b in sizes:
            cells = []
            for alg in algs:
                m = runs[n][alg].get(b)
                s = pred.get((alg, b))
                if m and s:
                    r = s / m
                    total += 1
                    ok = abs(r - 1) <= a.tolerance
                    within += ok
                    worst.append((abs(r - 1), n, alg, b, r))
                    cells.append(f"{r:.2f}" if ok else f"**{r:.2f}**")
                else:
                    cells.append("-")
            print(f"| {size(b)} | " + " | ".join(cells) + " |")
    print(f"\nwithin {a.tolerance:.0%}: {within} of {total} (bold: outside)")
    for d, n, alg, b, r in sorted(worst, reverse=True)[:5]:
        print(f"  worst: N={n} {alg} {size(b)}: {r:.2f}")


if __name__ == "__main__":
    main()

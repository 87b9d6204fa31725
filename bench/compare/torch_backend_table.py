#!/usr/bin/python3
"""Table of bench/compare/torch_backend.sh's results: per world size and size, the best (lowest)
time of each system over the rounds, busbw, and the ratios chorus / gloo (busbw) and the
binding's cost (Python chorus backend time minus the C API's time)."""
import collections
import glob
import json
import os
import re
import sys


def main(folder):
    best = collections.defaultdict(dict)  # (n, bytes) -> system -> (time_us, busbw)
    for path in glob.glob(os.path.join(folder, "torch-n*-r*-*.json")):
        m = re.match(r"torch-n(\d+)-r\d+-(.+)\.json", os.path.basename(path))
        n, system = int(m.group(1)), m.group(2)
        with open(path) as f:
            doc = json.load(f)
        for row in doc["rows"]:
            if row.get("wrong", 0):
                print(f"{path}: {row['wrong']} wrong results at {row['bytes']} B", file=sys.stderr)
            key = (n, row["bytes"])
            cur = best[key].get(system)
            if cur is None or row["time_us"] < cur[0]:
                best[key][system] = (row["time_us"], row["busbw"])
    print("| N | bytes | gloo us | chorus us | C API us | gloo busbw | chorus busbw | "
          "chorus/gloo busbw | gloo/chorus time | binding cost us |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (n, nbytes) in sorted(best):
        s = best[(n, nbytes)]
        g, c, capi = s.get("gloo"), s.get("chorus"), s.get("chorus-c")
        if not g or not c:
            continue
        cap = f"{capi[0]:.1f}" if capi else ""
        cost = f"{c[0] - capi[0]:.1f}" if capi else ""
        print(f"| {n} | {nbytes} | {g[0]:.1f} | {c[0]:.1f} | {cap} | {g[1]:.3f} | {c[1]:.3f} | "
              f"{c[1] / g[1]:.2f}x | {g[0] / c[0]:.2f}x | {cost} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/torch-backend"))

"""Useful samples per second over time under repeated failures, Chorus and torchft, the kills
marked: one panel per kill interval, each with both systems and their runs without failures,
from the --out files of torch_goodput.py (<system>-<every>.json) and the step logs they name.

    /usr/bin/python3 bench/elastic/torch_goodput_plot.py FOLDER OUT.png [--window 5] [--csv OUT]

Needs matplotlib (Debian's python3-matplotlib, which scripts/install-deps installs). The samples
per second are recomputed from the step logs in --window-second windows (each committed step
counted once, at its first commit, as its ranks x batch); where a log is gone, the result
file's own windows are drawn. --csv writes the curves (system, every, window start, samples/s).
"""
import argparse
import csv
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_goodput import steps_of  # noqa: E402

COLORS = {"chorus": "tab:blue", "torchft": "tab:orange"}


def curve(run, width):
    """(window starts, samples/s) of one run."""
    if os.path.exists(run["log"]):
        with open(run["log"]) as f:
            events = [json.loads(line) for line in f if line.strip()]
        steps = steps_of(events)
        t0 = min(t for t, _ in steps.values())
        n = int(run["seconds"] // width)
        per = [0.0] * n
        for t, world in steps.values():
            i = int((t - t0) // width)
            if 0 <= i < n:
                per[i] += world * run["batch"] / width
        return [i * width for i in range(n)], per
    w = run["window_seconds"]
    per = run["samples_per_second_windows"]
    return [i * w for i in range(len(per))], per


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("png")
    p.add_argument("--window", type=float, default=5, help="seconds per point")
    p.add_argument("--csv")
    p.add_argument("--how", default="replacements restarted",
                   help="how the lost ranks are replaced, for the titles")
    args = p.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for path in sorted(glob.glob(os.path.join(args.folder, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if isinstance(r, dict) and "samples_per_second_windows" in r:
            runs.append(r)
    intervals = sorted({r["every"] for r in runs if r["every"]}, reverse=True)
    if not intervals:
        raise SystemExit(f"torch_goodput_plot.py: no run with failures in {args.folder}")
    base = {r["system"]: r for r in runs if not r["every"]}
    fig, axes = plt.subplots(len(intervals), 1, figsize=(9, 3.4 * len(intervals)), squeeze=False)
    rows = []
    for ax, every in zip(axes[:, 0], intervals):
        for system in ("chorus", "torchft"):
            r = next((r for r in runs if r["system"] == system and r["every"] == every), None)
            if r is None:
                continue
            xs, ys = curve(r, args.window)
            eff = (f", {r['samples_per_second'] / base[system]['samples_per_second'] * 100:.0f}%"
                   " of no failure" if system in base else "")
            spares = r.get("spares") or 0
            name = system + (f" + {spares} spare{'s' if spares > 1 else ''}" if spares else "")
            ax.plot(xs, ys, lw=1, color=COLORS[system],
                    label=f"{name}: {r['samples_per_second']:.0f} samples/s{eff}")
            rows += [(system, every, x, y) for x, y in zip(xs, ys)]
            for i, k in enumerate(r["kills"]):
                ax.axvline(k["at"], color=COLORS[system], lw=0.6, ls=":",
                           label=f"{system}: a rank killed" if i == 0 else None)
            if system in base:
                b = base[system]
                ax.axhline(b["samples_per_second"], color=COLORS[system], lw=0.8, ls="--",
                           label=f"{system}, no failure: {b['samples_per_second']:.0f} samples/s")
                rows += [(system, 0, x, y) for x, y in zip(*curve(b, args.window))]
        ax.set_xlim(0, max(r["seconds"] for r in runs))
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time since the first committed step, s")
        ax.set_ylabel(f"useful samples/s ({args.window:g} s windows)")
        ax.set_title(f"4 ranks, CNN on Fashion-MNIST, one rank SIGKILLed every {every:g} s "
                     f"({args.how})", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(args.png, dpi=90)
    print(f"torch_goodput_plot.py: {args.png}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["system", "every", "window_start_s", "samples_per_second"])
            w.writerows(rows)


if __name__ == "__main__":
    main()

"""Divergence curves of chorus.async_training: one plot of every setting's divergence over the
steps, and the effect of the bound (each setting run with a divergence limit beside the same
setting without), from the --results files of examples/torch/train_async.py that
bench/torch/async_bench.py leaves (<setting>.json, <setting>-limitX.json).

    /usr/bin/python3 bench/torch/async_plot.py FOLDER OUT.png [--csv OUT.csv]
    /usr/bin/python3 bench/torch/async_plot.py --accuracy FOLDER OUT.png [--target 0.85]

--accuracy plots instead the test accuracy against training time (evaluations left out), one
line per setting, from the same files (any run with --eval-every, e.g. an emulated cluster's).

Needs matplotlib (Debian's python3-matplotlib, which scripts/install-deps installs); --csv writes
the curves (setting, step, max, rms, elementwise, forced_sync) as well. Settings whose replicas
stay identical (delayed: every figure 0) are listed in the title, not drawn on the log scale.
"""
import argparse
import csv
import glob
import json
import os
import re


def load(folder, field="divergence"):
    """{setting: results} for every results file with a non-empty `field`."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if isinstance(r, dict) and r.get(field):
            runs[os.path.basename(path)[:-len(".json")]] = r
    return runs


def accuracy_plot(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load(args.folder, "evaluations")
    if not runs:
        raise SystemExit(f"async_plot.py: no results file with evaluations in {args.folder}")
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for name, r in runs.items():
        ev = r["evaluations"]
        ax.plot([e["train_s"] for e in ev], [e["accuracy"] * 100 for e in ev], lw=1,
                marker=".", ms=3, label=f"{name} (final {r['final_accuracy'] * 100:.1f}%)")
    ax.axhline(args.target * 100, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_ylim(70, 90)
    ax.set_xlabel("training time, s (evaluations left out; log scale)")
    ax.set_ylabel("test accuracy, %")
    first = next(iter(runs.values()))
    ax.set_title(f"{first['settings']['model'].upper()}, {first['world']} ranks: test accuracy "
                 "against training time", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=90)
    print(f"async_plot.py: {args.png}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("png")
    p.add_argument("--csv")
    p.add_argument("--accuracy", action="store_true", help="accuracy against training time")
    p.add_argument("--target", type=float, default=0.85)
    args = p.parse_args()
    if args.accuracy:
        return accuracy_plot(args)
    runs = load(args.folder)
    if not runs:
        raise SystemExit(f"async_plot.py: no results file with a divergence history in "
                         f"{args.folder} (run async_bench.py with --check-every K)")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["setting", "step", "max", "rms", "elementwise", "forced_sync"])
            for name, r in runs.items():
                for d in r["divergence"]:
                    out.writerow([name, d["step"], d["max"], d["rms"], d["elementwise"],
                                  int(d["forced_sync"])])

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plain = {n: r for n, r in runs.items() if "-limit" not in n}
    bounded = {n: r for n, r in runs.items() if "-limit" in n}
    fig, axes = plt.subplots(1, 2 if bounded else 1, figsize=(13 if bounded else 7, 4.6),
                             squeeze=False)
    ax = axes[0][0]
    flat = []
    for name, r in plain.items():
        steps = [d["step"] for d in r["divergence"]]
        mx = [d["max"] for d in r["divergence"]]
        if max(mx) == 0:
            flat.append(name)
            continue
        ax.plot(steps, mx, label=f"{name} (final {r['final_accuracy'] * 100:.1f}%)", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("divergence max: max_r ||p_r - mean|| / ||mean||")
    world = next(iter(runs.values()))["world"]
    k = next(iter(runs.values()))["settings"]["check_every"]
    title = f"replicas' divergence, {world} ranks, measured every {k} steps"
    if flat:
        title += f"\n(0 at every check: {', '.join(flat)})"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if bounded:
        ax = axes[0][1]
        for name, r in bounded.items():
            base = re.sub(r"-limit[^-]*", "", name)
            limit = r["settings"]["divergence_limit"]
            pairs = [(base, plain.get(base), "--"), (name, r, "-")]
            color = None
            for label, run, style in pairs:
                if run is None:
                    continue
                steps = [d["step"] for d in run["divergence"]]
                mx = [d["max"] for d in run["divergence"]]
                forced = sum(d["forced_sync"] for d in run["divergence"])
                line, = ax.plot(steps, mx, style, lw=1, color=color,
                                label=f"{label}: final {run['final_accuracy'] * 100:.2f}%, "
                                      f"{run['bytes_per_step'] / 1e3:.0f} kB/step (checks "
                                      "included)"
                                      + (f", {forced} forced syncs" if style == "-" else ""))
                color = line.get_color()
                if style == "-":
                    fs = [d for d in run["divergence"] if d["forced_sync"]]
                    ax.plot([d["step"] for d in fs], [d["max"] for d in fs], "x",
                            color=line.get_color(), ms=5)
            ax.axhline(limit, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_title("the bound: dashed without, solid with divergence_limit (dotted line); "
                     "x: forced synchronisation", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.png, dpi=90)
    print(f"async_plot.py: {args.png}" + (f", {args.csv}" if args.csv else ""))


if __name__ == "__main__":
    main()

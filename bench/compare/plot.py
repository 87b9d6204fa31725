#!/usr/bin/python3
"""Plots one bench/compare/run.sh result directory: one PNG per setting and world size N,
busbw (GB/s) against the message size (bytes, log2 axis), one line per system, each point from
the system's best round at that size (lowest time, as in summarize.py). On the cluster the link
rate (RATE bits/s / 8) is drawn as a dashed horizontal line; on one host (setting "host") the
busbw bound that chorus-bench --bound measured, per size, as a dashed line; with several ranks per
host (settings "hier-RATE-HxL") the link bound in busbw terms, (RATE/8) * [2(N-1)/N] / [2(H-1)/H]
(busbw of an all-reduce that takes t_link = 2(H-1)/H * S / (RATE/8)). Failed runs and sizes with
#wrong != 0 are left out of the lines (summarize.py lists them); systems that were not run in a
setting are named in the legend. A second panel below shows each system's CPU per byte
(cpu_ns_per_byte, the lowest round, as summarize.py) at the same sizes, where the JSON has it.

  plot.py RESULTS_DIR      ->  RESULTS_DIR/busbw-<setting>-n<N>.png

Needs matplotlib (Debian: python3-matplotlib, for /usr/bin/python3); uses the Agg backend.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.ticker import FuncFormatter  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import (INFO_ONLY, Group, hier_layout, human, human_rate, load_manifest,  # noqa
                       setting_order)

STYLE = {"chorus": dict(color="black", linewidth=2.5, marker="o", markersize=4, zorder=5)}


def size_label(b, _pos=None):
    b = int(round(b))
    return human(b).replace(" ", "") if b >= 1 else ""


def plot_group(d, setting, n, g):
    sizes = sorted({b for r in g.runs if r["rows"] for b in r["rows"]})
    if not sizes:
        return None
    fig, (ax, cpu_ax) = plt.subplots(2, 1, figsize=(10, 9), dpi=110, sharex=True,
                                     gridspec_kw={"height_ratios": [2, 1]})
    markers = "svD^<>pPX*hd"
    k = 0
    for s in g.systems:
        xs, ys = [], []
        for b in sizes:
            row, _ = g.best(s, b)
            if row is not None and not row["wrong"]:
                xs.append(b)
                ys.append(row["busbw"])
        label = s + (" (info only)" if s in INFO_ONLY else "")
        if g.skipped(s):
            label += " (not run here)"
        elif not xs:
            label += " (FAIL)"
        style = STYLE.get(s, dict(linewidth=1.4, marker=markers[k % len(markers)], markersize=3.5))
        if s not in STYLE:
            k += 1
        if s in INFO_ONLY:
            style["linestyle"] = ":"
        ax.plot(xs, ys, label=label, **style)
        cpu = [(b, g.cpu(s, b)) for b in sizes]
        cpu = [(b, v) for b, v in cpu if v is not None and v > 0]
        if cpu:
            cpu_ax.plot([b for b, _ in cpu], [v for _, v in cpu], **style)
    layout = hier_layout(setting)
    if g.rate_bps and layout and layout[0] > 1:
        h = layout[0]
        link = g.rate_bps / 8 / 1e9 * (2 * (n - 1) / n) / (2 * (h - 1) / h)
        ax.axhline(link, color="red", linestyle="--", linewidth=1.2,
                   label=f"link bound ({human_rate(g.rate_bps)}, {h} hosts) = {link:.4g} GB/s busbw")
    elif g.rate_bps and not layout:
        link = g.rate_bps / 8 / 1e9
        ax.axhline(link, color="red", linestyle="--", linewidth=1.2,
                   label=f"link rate {human_rate(g.rate_bps)} = {link:.4g} GB/s")
    bounds = [(b, g.bound(b)) for b in sizes if g.bound(b)]
    if bounds:
        ax.plot([b for b, _ in bounds], [v for _, v in bounds], color="red", linestyle="--",
                linewidth=1.2, label="bound (chorus-bench --bound: memcpy + reduce, one core)")
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 1.3, max(sizes) * 1.3)
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    cpu_ax.set_xlabel("message size (bytes, log2 scale)")
    cpu_ax.set_ylabel("CPU ns per byte (all ranks)")
    cpu_ax.set_yscale("log")
    cpu_ax.grid(True, which="major", alpha=0.3)
    ax.set_ylabel("busbw (GB/s) = bytes / time * 2(N-1)/N")
    hosts = sorted({r["host"] for r in g.runs if r["host"]})
    if bounds:
        ax.set_yscale("log")  # the in-cache bound is far above every measured busbw
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(f"All-Reduce f32 sum, {setting}, N = {n}"
                 f"{', host ' + ', '.join(hosts) if hosts else ''} "
                 f"(best of {len(g.rounds)} round(s))")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    path = os.path.join(d, f"busbw-{setting}-n{n}.png")
    fig.savefig(path)
    plt.close(fig)
    return path


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py RESULTS_DIR")
    d = sys.argv[1]
    runs = load_manifest(d)
    for setting in sorted({r["setting"] for r in runs}, key=setting_order):
        for n in sorted({r["n"] for r in runs if r["setting"] == setting}):
            g = Group([r for r in runs if r["setting"] == setting and r["n"] == n])
            path = plot_group(d, setting, n, g)
            print(f"plot: {path}" if path else f"plot: {setting} n={n}: no data")
    return 0


if __name__ == "__main__":
    sys.exit(main())

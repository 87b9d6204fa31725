#!/usr/bin/python3
"""Plots chorus-train's per-step metrics CSV.

  plot_metrics.py METRICS.csv OUT.png
      loss and test accuracy against steps, and (when the CSV has training times) test accuracy
      against training time.
  plot_metrics.py --time OUT.png [LABEL=]METRICS.csv...
      test accuracy against training time (seconds, evaluations left out), one line per run;
      the label defaults to the file name. Also reads bench/compress's DDP CSVs (same columns).
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    steps, loss, acc_steps, acc, acc_time = [], [], [], [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            steps.append(int(row["step"]))
            loss.append(float(row["loss"]))
            if row.get("test_accuracy"):
                acc_steps.append(int(row["step"]))
                acc.append(100.0 * float(row["test_accuracy"]))
                if row.get("train_s"):
                    acc_time.append(float(row["train_s"]))
    return steps, loss, acc_steps, acc, acc_time


def plot_one(csv_path, out):
    steps, loss, acc_steps, acc, acc_time = read(csv_path)
    with_time = len(acc_time) == len(acc) and len(acc) > 0
    fig, axes = plt.subplots(1, 2 if with_time else 1, figsize=(13 if with_time else 8, 4.5))
    ax = axes[0] if with_time else axes
    ax.plot(steps, loss, color="tab:blue", linewidth=0.8, label="training loss (rank 0)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(acc_steps, acc, "o-", color="tab:red", label="test accuracy")
    ax2.set_ylabel("test accuracy (%)", color="tab:red")
    ax.set_title("chorus-train")
    if with_time:
        axes[1].plot(acc_time, acc, "o-", color="tab:red")
        axes[1].set_xlabel("training time (s, evaluations left out)")
        axes[1].set_ylabel("test accuracy (%)")
        axes[1].set_title("test accuracy against time")
        axes[1].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def plot_runs(out, specs, title="test accuracy against training time"):
    fig, ax = plt.subplots(figsize=(9, 5.5))
    colors = plt.get_cmap("tab20").colors
    for i, spec in enumerate(specs):
        label, _, path = spec.rpartition("=")
        label = label or os.path.splitext(os.path.basename(path))[0]
        _, _, _, acc, acc_time = read(path)
        if acc and len(acc_time) == len(acc):
            style = "--" if label.startswith("DDP") else "-"  # PyTorch's runs dashed
            ax.plot(acc_time, acc, marker="o", linestyle=style, markersize=2.5, linewidth=1,
                    color=colors[i % len(colors)], label=label)
    ax.set_xlabel("training time (s, evaluations left out)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main():
    args = sys.argv[1:]
    if len(args) >= 3 and args[0] == "--time":
        plot_runs(args[1], args[2:])
    elif len(args) == 2:
        plot_one(args[0], args[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

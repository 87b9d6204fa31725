#!/usr/bin/python3
"""Plots chorus-train's per-step metrics CSV: loss and test accuracy against steps."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_metrics.py METRICS.csv OUT.png")
    steps, loss, acc_steps, acc = [], [], [], []
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            steps.append(int(row["step"]))
            loss.append(float(row["loss"]))
            if row["test_accuracy"]:
                acc_steps.append(int(row["step"]))
                acc.append(100.0 * float(row["test_accuracy"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(steps, loss, color="tab:blue", linewidth=0.8, label="training loss (rank 0)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(acc_steps, acc, "o-", color="tab:red", label="test accuracy")
    ax2.set_ylabel("test accuracy (%)", color="tab:red")
    ax.set_title("chorus-train")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Tables and plots from bench/compress/run.sh's results.

  bench/compress/table.py OUT [--target 0.85] [--sync none]

For every <model>-n<N>-<rate> folder in OUT: one Markdown table row per setting (time to reach
the target test accuracy, training time of the run, bytes sent per rank per step, final test
accuracy), printed and written to OUT/<folder>.md, and a plot of test accuracy against training
time, one line per setting, OUT/<folder>.png (trainer/plot_metrics.py --time).

* time to target: training seconds (evaluations left out) at the first evaluation whose test
  accuracy reached the target; "-" when none did.
* sent/step: chorus-train's own count (StepMetrics::bytesSent, mean over the steps, rank 0:
  what its collectives sent, after compression and in the wire format, without headers; for
  bf16 and int8 the only column that shows their saving besides the wire); DDP: empty.
* payload/step: chorus-train's `bytes` column (StepMetrics::bytesReduced: what the
  step's all-reduces carried, after compression, counted as float32 also when a bucket went in
  a 16- or 8-bit wire format), mean over the steps: the steady state, without
  the start-up copy of the state, the final averaging and the checks.
* bytes/step, wire: what rank 0's host interface sent during the run (tx_wrap.sh: headers,
  evaluations and start-up included) over the steps of the run; the same measure for both.
* vs sync: the ratio to the uncompressed chorus-train run ("none") of the same folder: time to
  target (sync / setting: higher is sooner) and bytes per step (sync / setting: fewer).
* final: the last "final test accuracy" line (after one epoch, unless MAX_STEPS or TARGET ended
  the run sooner: then "(step S)").
"""
import argparse
import csv
import os
import re
import subprocess
import sys


def read_run(csv_path, log_path, target):
    r = {"steps": 0, "reach": None, "train_s": None, "dp_bytes": None, "wire": None,
         "final": None, "uptime": "", "ok": False}
    if os.path.exists(log_path):
        log = open(log_path, errors="replace").read()
        m = re.search(r"load average: ([0-9., ]+)", log)
        r["uptime"] = m.group(1).strip() if m else ""
        m = re.findall(r"final test accuracy ([0-9.]+)%", log)
        r["final"] = float(m[-1]) if m else None
        m = re.search(r"tx_bytes rank 0: (\d+)", log)
        r["wire_total"] = int(m.group(1)) if m else None
        r["ok"] = "# exit 0" in log
    if not os.path.exists(csv_path):
        return r
    rows = list(csv.DictReader(open(csv_path, newline="")))
    if not rows:
        return r
    r["steps"] = len(rows)
    r["train_s"] = float(rows[-1]["train_s"])
    sent = [float(x["bytes_sent"]) for x in rows if x.get("bytes_sent") not in (None, "")]
    if sent and "compute_s" in rows[0]:  # chorus-train's own count per step
        r["dp_bytes"] = sum(sent) / len(rows)
    if "compute_s" in rows[0]:
        r["payload"] = sum(float(x["bytes"]) for x in rows) / len(rows)
    for x in rows:
        if x.get("test_accuracy") and float(x["test_accuracy"]) >= target:
            r["reach"] = float(x["train_s"])
            r["reach_step"] = int(x["step"])
            break
    if r.get("wire_total") is not None:
        r["wire"] = r["wire_total"] / len(rows)
    return r


def fmt_bytes(b):
    if b is None:
        return ""
    if b >= 1e6:
        return f"{b / 1e6:.2f} MB"
    if b >= 1e3:
        return f"{b / 1e3:.1f} kB"
    return f"{b:.0f} B"


ORDER = ["none", "bf16", "fp16", "int8", "powersgd-1", "powersgd-2", "powersgd-4", "diloco-8",
         "diloco-32", "diloco-128", "ddp", "ddp-fp16", "ddp-bf16", "ddp-powersgd-1",
         "ddp-powersgd-2", "ddp-powersgd-4"]


def label(name):
    if name.startswith("ddp"):
        rest = name[4:].replace("-", ":", 1) if len(name) > 3 else ""
        return "DDP gloo" + (f" + torch {rest}" if rest and not rest.startswith("chorus")
                             else (f" + chorus.hooks {rest[7:]}" if rest else ""))
    if name.startswith("diloco-"):
        return f"chorus diloco H={name[7:]}"
    return "chorus " + ("sync" if name == "none" else name.replace("-", ":"))


def table(folder, target, plot_script):
    names = sorted({f[:-4] for f in os.listdir(folder) if f.endswith(".log")},
                   key=lambda n: (ORDER.index(n) if n in ORDER else 99, n))
    runs = {n: read_run(os.path.join(folder, n + ".csv"), os.path.join(folder, n + ".log"),
                        target) for n in names}
    base = runs.get("none")
    lines = [f"| setting | time to {100 * target:.0f}% (s) | vs sync | steps | training (s) | "
             "payload/step | payload vs sync | sent/step | sent vs sync | bytes/step, wire | "
             "wire vs sync | final acc (%) | load |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for n in names:
        r = runs[n]
        reach = f"{r['reach']:.1f} (step {r['reach_step']})" if r["reach"] is not None else "-"
        speed = ""
        if base and base["reach"] and r["reach"]:
            speed = f"{base['reach'] / r['reach']:.2f}x"
        wire_ratio = ""
        if base and base["wire"] and r["wire"]:
            wire_ratio = f"{base['wire'] / r['wire']:.1f}x"
        final = f"{r['final']:.2f}" if r["final"] is not None else "-"
        payload = r.get("payload")
        payload_ratio = ""
        if base and base.get("payload") and payload:
            payload_ratio = f"{base['payload'] / payload:.1f}x"
        sent_ratio = ""
        if base and base.get("dp_bytes") and r.get("dp_bytes"):
            sent_ratio = f"{base['dp_bytes'] / r['dp_bytes']:.1f}x"
        status = "" if r["ok"] else " (failed)"
        lines.append(f"| {label(n)}{status} | {reach} | {speed} | {r['steps']} | "
                     f"{r['train_s'] or 0:.1f} | {fmt_bytes(payload)} | {payload_ratio} | "
                     f"{fmt_bytes(r.get('dp_bytes'))} | {sent_ratio} | "
                     f"{fmt_bytes(r['wire'])} | {wire_ratio} | {final} | {r['uptime']} |")
    text = "\n".join(lines) + "\n"
    with open(folder + ".md", "w") as f:
        f.write(f"{os.path.basename(folder)}\n\n{text}")
    specs = [f"{label(n)}={os.path.join(folder, n + '.csv')}" for n in names
             if os.path.exists(os.path.join(folder, n + ".csv"))]
    if specs:
        subprocess.run([sys.executable, plot_script, "--time", folder + ".png"] + specs,
                       check=False)
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--target", type=float, default=0.85)
    a = p.parse_args()
    plot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "trainer",
                        "plot_metrics.py")
    for d in sorted(os.listdir(a.out)):
        folder = os.path.join(a.out, d)
        if os.path.isdir(folder):
            print(f"### {d}\n")
            print(table(folder, a.target, plot))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Summarizes one bench/compare/run.sh result directory.

Reads RESULTS_DIR/manifest.tsv (one line per run: n, round, system, rc, json, log, load) and the
JSON files it names (chorus-bench's format; the peers write the same fields). Prints, for each
world size, a Markdown table of busbw and one of time, one column per system with one value per
round, and the ratio Chorus / best TCP peer.

The ratio takes each system's best round (lowest time) at that size, and compares Chorus with
the best of the TCP peers (every system but chorus and openmpi-default):
    ratio = chorus busbw / best TCP peer busbw = best TCP peer time / chorus time,
so > 1 means Chorus is faster, < 1 slower. openmpi-default (shared memory) is information only.
"""
import json
import os
import sys

DEFAULT_SIZES = [8, 1024, 32768, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
INFO_ONLY = {"openmpi-default"}


def human(b):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"


def fmt_time(us):
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}"


def load_manifest(d):
    runs = []
    with open(os.path.join(d, "manifest.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            rec = dict(zip(header, line.rstrip("\n").split("\t")))
            rec["n"], rec["round"], rec["rc"] = int(rec["n"]), int(rec["round"]), int(rec["rc"])
            rec["rows"] = None
            path = os.path.join(d, rec["json"])
            if rec["rc"] == 0 and os.path.exists(path):
                with open(path) as jf:
                    data = json.load(jf)
                rec["rows"] = {r["bytes"]: r for r in data["rows"]}
                rec["notes"] = data.get("notes", data.get("algo", ""))
            runs.append(rec)
    return runs


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: summarize.py RESULTS_DIR [SIZES...]")
    d = sys.argv[1]
    sizes = [int(s) for s in sys.argv[2:]] or DEFAULT_SIZES
    runs = load_manifest(d)
    problems = []
    for n in sorted({r["n"] for r in runs}):
        mine = [r for r in runs if r["n"] == n]
        systems = []
        for r in mine:
            if r["system"] not in systems:
                systems.append(r["system"])
        rounds = sorted({r["round"] for r in mine})
        cell = {(r["system"], r["round"]): r for r in mine}

        def value(sys_, rnd, b, key):
            r = cell.get((sys_, rnd))
            if r is None:
                return None, "not run"
            if r["rows"] is None:
                return None, f"FAIL rc={r['rc']}"
            row = r["rows"].get(b)
            if row is None:
                return None, "n/a"
            if row["wrong"]:
                return row[key], "WRONG"
            return row[key], None

        def best_time(sys_, b):
            ts = [value(sys_, rnd, b, "time_us")[0] for rnd in rounds]
            ts = [t for t in ts if t is not None]
            return min(ts) if ts else None

        loads = ", ".join(f"r{r['round']} {r['system']}: {r['load']}" for r in mine)
        print(f"\n### {n} ranks (TCP loopback; {len(rounds)} rounds, values r1 / r2 / ...)\n")
        for key, title in (("busbw", "busbw (GB/s)"), ("time_us", "time (us)")):
            print(f"{title}:\n")
            head = ["size"] + systems + ["chorus / best TCP peer"]
            print("| " + " | ".join(head) + " |")
            print("|" + "|".join(["---:"] * len(head)) + "|")
            for b in sizes:
                cells = [human(b)]
                for s in systems:
                    parts = []
                    for rnd in rounds:
                        v, why = value(s, rnd, b, key)
                        if v is None:
                            parts.append(why)
                        else:
                            txt = f"{v:.3f}" if key == "busbw" else fmt_time(v)
                            parts.append(txt + (" WRONG" if why else ""))
                    cells.append(" / ".join(parts))
                c = best_time("chorus", b)
                peers = [(best_time(s, b), s) for s in systems if s != "chorus" and s not in INFO_ONLY]
                peers = [p for p in peers if p[0] is not None]
                if c is None or not peers:
                    cells.append("n/a")
                else:
                    t, who = min(peers)
                    cells.append(f"{t / c:.2f}x vs {who}")
                print("| " + " | ".join(cells) + " |")
            print()
        for r in mine:
            if r["rc"] != 0 or r["rows"] is None:
                problems.append(f"n={n} round {r['round']} {r['system']}: rc={r['rc']}, log {r['log']}")
            elif any(row["wrong"] for row in r["rows"].values()):
                problems.append(f"n={n} round {r['round']} {r['system']}: #wrong != 0, see {r['json']}")
        print("load average (1 min) before each run: " + loads + "\n")
    notes = {}
    for r in runs:
        if r.get("notes"):
            notes.setdefault(r["system"], r["notes"])
    print("systems:")
    for s, t in notes.items():
        print(f"  {s}: {t}")
    if problems:
        print("\nPROBLEMS:")
        for p in problems:
            print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Summarizes one bench/compare/run.sh result directory.

Reads RESULTS_DIR/manifest.tsv (one line per run: setting, n, round, system, rc, json, log, load,
rate_bps; older manifests without setting/rate_bps are read as loopback) and the JSON files it
names (chorus-bench's format; the peers write the same fields). Prints, for each setting
(loopback, cluster-1gbit, ...) and world size N, a Markdown table with one line per system:

  * its time (us) at 8 bytes and its busbw (GB/s) at 64 KiB, 256 KiB, ..., 64 MiB, each from the
    system's best round (lowest time) at that size; on the cluster each busbw also as a fraction
    of the link rate (RATE bits/s / 8: a host's link in one direction);
  * a last line "chorus / best peer": the best peer (best round) at that size, and
        ratio = best peer time / chorus time = chorus busbw / best peer busbw,
    so > 1 means Chorus is faster, < 1 slower. Peers: every system but chorus and the
    information-only openmpi-default (shared memory, not TCP).

then a table with every round's busbw (r1 / r2 / ...: the noise), and the runs that failed
(FAIL rc=..., never dropped) or had #wrong != 0.

  summarize.py RESULTS_DIR [SIZES...]    (SIZES in bytes: the busbw columns; default 64K..64M x4)
"""
import json
import os
import sys

DEFAULT_SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
SMALL = 8  # the latency column: time at 8 bytes
INFO_ONLY = {"openmpi-default"}


def human(b):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"


def human_rate(bps):
    for unit, f in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= f:
            return f"{bps / f:g} {unit}"
    return f"{bps:g} bit/s"


def fmt_time(us):
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}"


def load_manifest(d):
    runs = []
    with open(os.path.join(d, "manifest.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if not line.strip():
                continue
            rec = dict(zip(header, line.rstrip("\n").split("\t")))
            rec.setdefault("setting", "loopback")
            rate = rec.get("rate_bps", "")
            rec["rate_bps"] = float(rate) if rate else None
            rec["n"], rec["round"], rec["rc"] = int(rec["n"]), int(rec["round"]), int(rec["rc"])
            rec["rows"] = None
            rec["host"] = ""
            path = os.path.join(d, rec["json"])
            if rec["rc"] == 0 and os.path.exists(path):
                try:
                    with open(path) as jf:
                        data = json.load(jf)
                    rec["rows"] = {r["bytes"]: r for r in data["rows"]}
                    rec["notes"] = data.get("notes", data.get("algo", ""))
                    rec["host"] = data.get("host", "")
                except (ValueError, KeyError) as e:
                    rec["error"] = f"bad JSON: {e}"
            runs.append(rec)
    return runs


def last_line(path):
    """The last non-empty line of a log (the usual place of the reason for a failure)."""
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def setting_order(s):
    return (s != "loopback", s)


class Group:
    """The runs of one setting and one N."""

    def __init__(self, runs):
        self.runs = runs
        self.systems = []
        for r in runs:
            if r["system"] not in self.systems:
                self.systems.append(r["system"])
        self.rounds = sorted({r["round"] for r in runs})
        self.cell = {(r["system"], r["round"]): r for r in runs}
        rates = [r["rate_bps"] for r in runs if r["rate_bps"]]
        self.rate_bps = rates[0] if rates else None

    def value(self, sys_, rnd, b, key):
        """(value, problem): problem is None, 'WRONG' (value given), or why there is none."""
        r = self.cell.get((sys_, rnd))
        if r is None:
            return None, "not run"
        if r["rows"] is None:
            return None, f"FAIL rc={r['rc']}" + (" (bad JSON)" if r.get("error") else "")
        row = r["rows"].get(b)
        if row is None:
            return None, "n/a"
        if row["wrong"]:
            return row[key], "WRONG"
        return row[key], None

    def best(self, sys_, b):
        """The row of sys_'s best round at b (lowest time), or (None, why)."""
        best, why = None, "n/a"
        for rnd in self.rounds:
            r = self.cell.get((sys_, rnd))
            v, problem = self.value(sys_, rnd, b, "time_us")
            if v is None:
                # Report a failure rather than "n/a" when no round has the size.
                if problem and problem.startswith("FAIL") and why == "n/a":
                    why = problem
                continue
            row = r["rows"][b]
            if best is None or row["time_us"] < best["time_us"]:
                best = row
        return (best, None) if best is not None else (None, why)

    def ratio(self, b):
        c, _ = self.best("chorus", b)
        peers = []
        for s in self.systems:
            if s == "chorus" or s in INFO_ONLY:
                continue
            row, _ = self.best(s, b)
            if row is not None and not row["wrong"]:
                peers.append((row["time_us"], s))
        if c is None or not peers:
            return "n/a"
        t, who = min(peers)
        return f"{t / c['time_us']:.2f}x vs {who}"


def print_group(setting, n, g, sizes):
    link = g.rate_bps / 8 / 1e9 if g.rate_bps else None  # GB/s, one direction of a host link
    hosts = sorted({r["host"] for r in g.runs if r["host"]})
    where = f"host {', '.join(hosts)}" if hosts else ""
    if link:
        where += (f"; link {human_rate(g.rate_bps)} = {link:.4g} GB/s per host and direction, "
                  "busbw also as a fraction of it")
    print(f"\n### {setting}, {n} ranks ({where}; {len(g.rounds)} round(s), best round per cell)\n")
    head = ["system", f"time {human(SMALL)} (us)"] + [f"busbw {human(b)}" for b in sizes]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "|".join(["---:"] * (len(head) - 1)) + "|")
    for s in g.systems:
        cells = [s + (" (info only)" if s in INFO_ONLY else "")]
        row, why = g.best(s, SMALL)
        cells.append(why if row is None else fmt_time(row["time_us"]) +
                     (" WRONG" if row["wrong"] else ""))
        for b in sizes:
            row, why = g.best(s, b)
            if row is None:
                cells.append(why)
                continue
            txt = f"{row['busbw']:.3f}"
            if link:
                txt += f" ({row['busbw'] / link:.0%})"
            cells.append(txt + (" WRONG" if row["wrong"] else ""))
        print("| " + " | ".join(cells) + " |")
    print("| chorus / best peer | " + " | ".join(g.ratio(b) for b in [SMALL] + sizes) + " |")
    print("\n(ratio = best peer time / chorus time: > 1 Chorus faster; peers: all but chorus and "
          "openmpi-default)\n")

    if len(g.rounds) > 1:
        print(f"every round, busbw (GB/s) r{' / r'.join(str(r) for r in g.rounds)}; "
              f"time at {human(SMALL)} (us):\n")
        print("| " + " | ".join(head) + " |")
        print("|---|" + "|".join(["---:"] * (len(head) - 1)) + "|")
        for s in g.systems:
            cells = [s]
            for b, key in [(SMALL, "time_us")] + [(b, "busbw") for b in sizes]:
                parts = []
                for rnd in g.rounds:
                    v, why = g.value(s, rnd, b, key)
                    if v is None:
                        parts.append(why)
                    else:
                        txt = fmt_time(v) if key == "time_us" else f"{v:.3f}"
                        parts.append(txt + (" WRONG" if why else ""))
                cells.append(" / ".join(parts))
            print("| " + " | ".join(cells) + " |")
        print()
    loads = ", ".join(f"r{r['round']} {r['system']}: {r['load']}" for r in g.runs)
    print("load average (1 min) before each run: " + loads + "\n")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: summarize.py RESULTS_DIR [SIZES...]")
    d = sys.argv[1]
    sizes = [int(s) for s in sys.argv[2:]] or DEFAULT_SIZES
    runs = load_manifest(d)
    problems = []
    for setting in sorted({r["setting"] for r in runs}, key=setting_order):
        for n in sorted({r["n"] for r in runs if r["setting"] == setting}):
            mine = [r for r in runs if r["setting"] == setting and r["n"] == n]
            print_group(setting, n, Group(mine), sizes)
            for r in mine:
                where = f"{setting} n={n} round {r['round']} {r['system']}"
                if r["rc"] != 0 or r["rows"] is None:
                    why = r.get("error", "") or last_line(os.path.join(d, r["log"]))
                    problems.append(f"{where}: FAIL rc={r['rc']}, log {r['log']}"
                                    f"{': ' + why if why else ''}")
                elif any(row["wrong"] for row in r["rows"].values()):
                    problems.append(f"{where}: #wrong != 0, see {r['json']}")
    notes = {}  # (setting, system) -> [(n, notes)], one entry per distinct text
    for r in runs:
        if r.get("notes"):
            seen = notes.setdefault((r["setting"], r["system"]), [])
            if all(t != r["notes"] for _, t in seen):
                seen.append((r["n"], r["notes"]))
    print("systems:")
    for (setting, s), texts in sorted(notes.items(), key=lambda kv: setting_order(kv[0][0])):
        for n, t in texts:
            print(f"  {setting} {s}{f' (from n={n})' if len(texts) > 1 else ''}: {t}")
    if problems:
        print("\nPROBLEMS:")
        for p in problems:
            print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

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

then the CPU cost: per system, at 1 MiB and 64 MiB (those measured), busbw (best round, as above)
beside cpu_ns_per_byte (CPU time, user + system, of every thread of every rank over the timed
calls, per byte all-reduced: getrusage inside each harness; the lowest over the rounds, i.e. the
least disturbed), and a line "chorus / best peer" with chorus' CPU per byte over the lowest
peer's (< 1: Chorus spends less CPU per byte) and busbw over the best peer's (> 1: faster);
then a table with every round's busbw (r1 / r2 / ...: the noise), and the runs that failed
(FAIL rc=..., never dropped) or had #wrong != 0.

Setting "host" (one host, every system on its best intra-host transport; chorus-bench --bound):
each busbw also as a fraction of the bound that chorus-bench measured on this machine (same N,
best of its rounds: the same machine limit applies to every system), a "bound" line, and a
headline table at 8 B, 1 MiB and 64 MiB: chorus' time/busbw/%bound and the ratios chorus / best
peer, chorus / Open MPI (best of openmpi*), chorus / MPICH (mpich*), chorus / Gloo (gloo-* and
torch-gloo); each ratio = that peer's time / chorus time (> 1: Chorus faster).

Settings "hier-RATE-HxL" (H emulated hosts, L ranks each): per system its algorithm (chorus-bench's
algo column), its time at 8 B and at 64 MiB (or the largest size measured, if less), the link-time
bound t_link = 2(H-1)/H * S / (RATE/8) (payload bytes; the least time for the inter-host part of
an all-reduce of S bytes, each host sending 2(H-1)/H * S over its link), time / t_link, and the
line chorus-flat / chorus = flat-ring time / chorus time (> 1: the hierarchical algorithm wins).
Systems that cannot run there are listed as "not run" with the reason (rc "skip" in the manifest).

  summarize.py RESULTS_DIR [SIZES...]    (SIZES in bytes: the busbw columns; default 64K..64M x4)
"""
import json
import os
import re
import sys

DEFAULT_SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
SMALL = 8  # the latency column: time at 8 bytes
INFO_ONLY = {"openmpi-default", "chorus-tcp"}
HEADLINE = [SMALL, 1 << 20, 64 << 20]  # host setting: the sizes of the headline table
HIER_SIZE = 64 << 20  # hier settings: the large size of the table
CPU_SIZES = [1 << 20, 64 << 20]  # the sizes of the CPU-cost table
FAMILIES = {  # host setting: "chorus / <family>" = best of the family's systems
    "Open MPI": lambda s: s.startswith("openmpi"),
    "MPICH": lambda s: s.startswith("mpich"),
    "Gloo": lambda s: s.startswith("gloo") or s == "torch-gloo",
}


def hier_layout(setting):
    """(hosts, ranks per host) of a "hier-RATE-HxL" setting, else None."""
    m = re.fullmatch(r"hier-.*-(\d+)x(\d+)", setting)
    return (int(m.group(1)), int(m.group(2))) if m else None


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
            rec["n"], rec["round"] = int(rec["n"]), int(rec["round"])
            rec["rows"] = None
            rec["host"] = ""
            if rec["rc"] == "skip":  # run.sh's not_run: cannot run in this setting, log says why
                rec["rc"] = None
                rec["skipped"] = last_line(os.path.join(d, rec["log"])).removeprefix("not run: ")
                runs.append(rec)
                continue
            rec["rc"] = int(rec["rc"])
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
    kind = s.split("-")[0]
    return ({"loopback": 0, "host": 1, "cluster": 2, "hier": 3}.get(kind, 4), s)


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
        if r.get("skipped") is not None:
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
                if problem and (problem.startswith("FAIL") or problem == "not run") and why == "n/a":
                    why = problem
                continue
            row = r["rows"][b]
            if best is None or row["time_us"] < best["time_us"]:
                best = row
        return (best, None) if best is not None else (None, why)

    def ratio(self, b, family=None):
        """Best peer time / chorus time at b; peers: every system but chorus' own series and the
        information-only ones, or only those that family(system) accepts."""
        c, _ = self.best("chorus", b)
        peers = []
        for s in self.systems:
            if s.startswith("chorus") or s in INFO_ONLY:
                continue
            if family is not None and not family(s):
                continue
            row, _ = self.best(s, b)
            if row is not None and not row["wrong"]:
                peers.append((row["time_us"], s))
        if c is None or c["wrong"] or not peers:
            return "n/a"
        t, who = min(peers)
        return f"{t / c['time_us']:.2f}x vs {who}"

    def cpu(self, sys_, b):
        """sys_'s lowest CPU ns per byte at b over its correct rounds, or None."""
        vals = []
        for rnd in self.rounds:
            v, problem = self.value(sys_, rnd, b, "time_us")
            r = self.cell.get((sys_, rnd))
            if v is not None and problem is None and "cpu_ns_per_byte" in r["rows"][b]:
                vals.append(r["rows"][b]["cpu_ns_per_byte"])
        return min(vals) if vals else None

    def is_peer(self, s, family=None):
        return (not s.startswith("chorus") and s not in INFO_ONLY
                and (family is None or family(s)))

    def cpu_ratio(self, b):
        """Chorus' CPU per byte / the lowest peer's at b, as text."""
        c = self.cpu("chorus", b)
        peers = [(self.cpu(s, b), s) for s in self.systems if self.is_peer(s)]
        peers = [(v, s) for v, s in peers if v is not None]
        if c is None or not peers:
            return "n/a"
        v, who = min(peers)
        return f"{c / v:.2f}x vs {who}" if v > 0 else "n/a"

    def busbw_ratio(self, b):
        """Chorus' busbw / the best peer's at b (best rounds), as text."""
        c, _ = self.best("chorus", b)
        peers = []
        for s in self.systems:
            row, _ = self.best(s, b) if self.is_peer(s) else (None, None)
            if row is not None and not row["wrong"]:
                peers.append((row["busbw"], s))
        if c is None or c["wrong"] or not peers:
            return "n/a"
        v, who = max(peers)
        return f"{c['busbw'] / v:.2f}x vs {who}" if v > 0 else "n/a"

    def bound(self, b):
        """chorus-bench --bound's busbw bound at b (GB/s): the largest over chorus' rounds (the
        least disturbed measurement of the machine), or None."""
        vals = [r["rows"][b]["bound"] for r in self.runs
                if r["system"] == "chorus" and r["rows"] and b in r["rows"]
                and r["rows"][b].get("bound")]
        return max(vals) if vals else None

    def skipped(self, sys_):
        """The reason sys_ was not run (run.sh's not_run), or None."""
        for r in self.runs:
            if r["system"] == sys_ and r.get("skipped") is not None:
                return r["skipped"]
        return None


def print_group(setting, n, g, sizes):
    layout = hier_layout(setting)
    # GB/s, one direction of a host link; with several ranks per host (hier) busbw is not
    # comparable with it (see print_hier), so no fractions there.
    link = g.rate_bps / 8 / 1e9 if g.rate_bps and not layout else None
    with_bound = any(g.bound(b) for b in sizes)
    hosts = sorted({r["host"] for r in g.runs if r["host"]})
    where = f"host {', '.join(hosts)}" if hosts else ""
    if link:
        where += (f"; link {human_rate(g.rate_bps)} = {link:.4g} GB/s per host and direction, "
                  "busbw also as a fraction of it")
    if layout:
        where += (f"; {layout[0]} hosts x {layout[1]} ranks, links {human_rate(g.rate_bps)}"
                  if g.rate_bps else f"; {layout[0]} hosts x {layout[1]} ranks")
    if with_bound:
        where += "; busbw also as a fraction of chorus-bench's --bound"
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
            if with_bound and g.bound(b):
                txt += f" ({row['busbw'] / g.bound(b):.1%} of bound)"
            cells.append(txt + (" WRONG" if row["wrong"] else ""))
        print("| " + " | ".join(cells) + " |")
    if g.skipped("chorus") is None and "chorus" in g.systems:
        print("| chorus / best peer | " + " | ".join(g.ratio(b) for b in [SMALL] + sizes) + " |")
    if with_bound:
        print("| bound (GB/s) | | " + " | ".join(
            f"{g.bound(b):.3f}" if g.bound(b) else "n/a" for b in sizes) + " |")
    print("\n(ratio = best peer time / chorus time: > 1 Chorus faster; peers: all but chorus' own "
          f"series and the information-only {', '.join(sorted(INFO_ONLY))})\n")
    for s in g.systems:
        why = g.skipped(s)
        if why:
            print(f"{s}: not run here: {why}\n")
    print_cpu(n, g)
    if setting == "host":
        print_host_headline(n, g)
    if layout:
        print_hier(layout, n, g)

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


def print_cpu(n, g):
    """CPU per byte beside busbw, at the CPU_SIZES that were measured."""
    measured = {b for r in g.runs if r["rows"] for b in r["rows"]}
    sizes = [b for b in CPU_SIZES if b in measured]
    if not sizes:
        return
    print(f"CPU cost, {n} ranks: busbw (GB/s, best round) and CPU per byte (ns/B: user + system, "
          "all threads, all ranks, over the timed calls; lowest round):\n")
    head = ["system"] + [f"{label} {human(b)}" for b in sizes for label in ("busbw", "cpu ns/B")]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "|".join(["---:"] * (len(head) - 1)) + "|")
    for s in g.systems:
        if g.skipped(s):
            continue
        cells = [s + (" (info only)" if s in INFO_ONLY else "")]
        for b in sizes:
            row, why = g.best(s, b)
            cells.append(why if row is None else f"{row['busbw']:.3f}" +
                         (" WRONG" if row["wrong"] else ""))
            cpu = g.cpu(s, b)
            cells.append("n/a" if cpu is None else f"{cpu:.3f}")
        print("| " + " | ".join(cells) + " |")
    if "chorus" in g.systems and g.skipped("chorus") is None:
        cells = ["chorus / best peer"]
        for b in sizes:
            cells += [g.busbw_ratio(b), g.cpu_ratio(b)]
        print("| " + " | ".join(cells) + " |")
    print("\n(busbw ratio = chorus busbw / best peer's: > 1 Chorus faster; cpu ratio = chorus CPU "
          "per byte / lowest peer's: < 1 Chorus cheaper)\n")


def print_host_headline(n, g):
    """Host setting: chorus' figures and its ratios to each family at 8 B, 1 MiB, 64 MiB."""
    head = ["", f"{human(SMALL)} (time)"] + [human(b) for b in HEADLINE[1:]]
    print(f"headline, host, {n} ranks (ratio = peer time / chorus time, best round of each; "
          "> 1: Chorus faster):\n")
    print("| " + " | ".join(head) + " |")
    print("|---|" + "|".join(["---:"] * (len(head) - 1)) + "|")
    cells = ["chorus"]
    for b in HEADLINE:
        row, why = g.best("chorus", b)
        if row is None:
            cells.append(why)
        elif b == SMALL:
            cells.append(f"{fmt_time(row['time_us'])} us")
        else:
            bound = g.bound(b)
            cells.append(f"{row['busbw']:.3f} GB/s" +
                         (f", {row['busbw'] / bound:.1%} of bound {bound:.3f}" if bound else ""))
    print("| " + " | ".join(cells) + " |")
    print("| chorus / best peer | " + " | ".join(g.ratio(b) for b in HEADLINE) + " |")
    for name, fam in FAMILIES.items():
        print(f"| chorus / {name} | " + " | ".join(g.ratio(b, fam) for b in HEADLINE) + " |")
    print()


def print_hier(layout, n, g):
    """Hier setting: time at the large size against the link-time bound, flat ring vs chorus."""
    hosts, per = layout
    sizes = {b for r in g.runs if r["rows"] for b in r["rows"]}
    big = HIER_SIZE if HIER_SIZE in sizes else (max(sizes) if sizes else HIER_SIZE)
    rate = g.rate_bps / 8 if g.rate_bps else None  # payload bytes/s of one link direction
    t_link = 2 * (hosts - 1) / hosts * big / rate * 1e6 if rate and hosts > 1 else None
    print(f"{hosts} hosts x {per} ranks = {n} ranks, S = {human(big)}"
          + (" (the largest size measured; 64 MiB was not)" if big != HIER_SIZE else "")
          + (f"; t_link = 2(H-1)/H * S / (rate/8) = {t_link / 1e3:,.2f} ms at "
             f"{human_rate(g.rate_bps)}" if t_link else "; no t_link (one host or no rate)")
          + ":\n")
    head = ["system", f"algo at {human(big)}", f"time {human(SMALL)} (us)",
            f"time {human(big)} (ms)", "time / t_link"]
    print("| " + " | ".join(head) + " |")
    print("|---|---|" + "|".join(["---:"] * (len(head) - 2)) + "|")
    for s in g.systems:
        why = g.skipped(s)
        if why:
            print(f"| {s} | not run: {why} | | | |")
            continue
        row, why = g.best(s, big)
        small, swhy = g.best(s, SMALL)
        cells = [s, (row.get("algo", "") or "-") if row and s.startswith("chorus") else "-",
                 swhy if small is None else fmt_time(small["time_us"]),
                 why if row is None else f"{row['time_us'] / 1e3:,.2f}"
                 + (" WRONG" if row["wrong"] else ""),
                 f"{row['time_us'] / t_link:.2f}" if row is not None and t_link else "n/a"]
        print("| " + " | ".join(cells) + " |")
    c, _ = g.best("chorus", big)
    f, _ = g.best("chorus-flat", big)
    if c is not None and f is not None:
        print(f"\nchorus-flat / chorus at {human(big)}: {f['time_us'] / c['time_us']:.2f} "
              f"(flat-ring time / chorus time; > 1: chorus' choice, {c.get('algo', '?')}, "
              "is faster than the flat ring)")
    else:
        print(f"\nchorus-flat / chorus at {human(big)}: n/a")
    print(f"chorus / best peer at {human(big)}: {g.ratio(big)}\n")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: summarize.py RESULTS_DIR [SIZES...]")
    d = sys.argv[1]
    sizes = [int(s) for s in sys.argv[2:]] or DEFAULT_SIZES
    runs = load_manifest(d)
    problems, not_run = [], []
    for setting in sorted({r["setting"] for r in runs}, key=setting_order):
        for n in sorted({r["n"] for r in runs if r["setting"] == setting}):
            mine = [r for r in runs if r["setting"] == setting and r["n"] == n]
            print_group(setting, n, Group(mine), sizes)
            for r in mine:
                where = f"{setting} n={n} round {r['round']} {r['system']}"
                if r.get("skipped") is not None:
                    not_run.append(f"{where}: {r['skipped']}")
                elif r["rc"] != 0 or r["rows"] is None:
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
    if not_run:
        print("\nNOT RUN (cannot run in that setting):")
        for p in sorted(set(not_run)):
            print("  " + p)
    if problems:
        print("\nPROBLEMS:")
        for p in problems:
            print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Table of an algo_sweep.sh run: per world size and size, each forced algorithm's time, the
automatic choice's time and algorithm, auto / best forced, its choice's forced time / best forced
(the cost of the choice alone, without the run-to-run noise of a separate auto run), and (with
--peers DIR, a bench/compare/run.sh result directory of the same setting) auto / best peer."""
import argparse
import glob
import json
import os
import re


def load(path):
    with open(path) as f:
        j = json.load(f)
    return {r["bytes"]: r for r in j.get("rows", [])}


def size(b):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s and b % s == 0:
            return f"{b // s} {unit}"
    return f"{b} B"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--peers", default="", help="run.sh result dir with <setting>-n<N>-r*-<peer>.json")
    p.add_argument("--setting", default="cluster-1gbit", help="which run.sh setting's files to use")
    a = p.parse_args()
    runs = {}
    for f in glob.glob(os.path.join(a.dir, "n*-*.json")):
        m = re.match(r"n(\d+)-(\w+)\.json", os.path.basename(f))
        if m:
            runs.setdefault(int(m.group(1)), {})[m.group(2)] = load(f)
    worst_all = 0.0
    worst_choice = 0.0
    worst_peer = 0.0
    for n in sorted(runs):
        algos = [x for x in ("ring", "rd", "rhd", "tree", "oneshot", "twoshot", "hier") if x in runs[n]]
        peers = {}
        same_run = {}  # Chorus (auto) in the peers' own run: same iterations, same minutes
        if a.peers:
            for f in glob.glob(os.path.join(a.peers, f"{a.setting}-n{n}-r*-*.json")):
                name = re.sub(r".*-r\d+-", "", os.path.basename(f))[:-5]
                rows = load(f)
                if name == "chorus":
                    for b, r in rows.items():
                        if r.get("time_us", 0) > 0:
                            same_run[b] = min(same_run.get(b, float("inf")), r["time_us"])
                    continue
                for b, r in rows.items():
                    if r.get("time_us", 0) > 0:
                        best = peers.setdefault(name, {})
                        best[b] = min(best.get(b, float("inf")), r["time_us"])
        print(f"\n### N = {n}: time (us) per forced algorithm; auto = the cost model's choice\n")
        head = ("| size | " + " | ".join(algos) +
                " | auto | auto chose | auto / best forced | chosen forced / best forced |")
        if peers:
            head += " best peer | auto / best peer | chorus in that run / best peer |"
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        auto = runs[n].get("auto", {})
        for b in sorted(set().union(*[runs[n][x].keys() for x in runs[n]])):
            times = {x: runs[n][x][b]["time_us"] for x in algos if b in runs[n][x]}
            best = min(times.values()) if times else None
            cells = [f"**{times[x]:.1f}**" if times.get(x) == best else
                     (f"{times[x]:.1f}" if x in times else "-") for x in algos]
            line = f"| {size(b)} | " + " | ".join(cells)
            if b in auto:
                t = auto[b]["time_us"]
                ratio = t / best if best else float("nan")
                worst_all = max(worst_all, ratio)
                chose = auto[b].get("algo", "?")
                regret = times[chose] / best if best and chose in times else float("nan")
                worst_choice = max(worst_choice, regret) if regret == regret else worst_choice
                line += f" | {t:.1f} | {chose} | {ratio:.2f} | {regret:.2f} |"
            else:
                line += " | - | - | - | - |"
            if peers:
                pb = [(peers[x][b], x) for x in peers if b in peers[x]]
                if pb:
                    t, who = min(pb)
                    mine = f"{auto[b]['time_us'] / t:.2f}" if b in auto else "-"
                    other = f"{same_run[b] / t:.2f}" if b in same_run else "-"
                    worst_peer = max(worst_peer, same_run[b] / t) if b in same_run else worst_peer
                    line += f" {t:.1f} ({who}) | {mine} | {other} |"
                else:
                    line += " - | - | - |"
            print(line)
    print(f"\nworst auto / best forced: {worst_all:.2f}; worst chosen forced / best forced: "
          f"{worst_choice:.2f}" + (f"; worst chorus / best peer in the peers' run: {worst_peer:.2f}"
                                   if a.peers else ""))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compares two run_suite.py results: per test, gloo's and chorus's outcome.

    compare.py GLOO.json CHORUS.json [--table OUT.md] [--expect-exceptions FILE]

Prints the summary ("chorus passes N of the M tests gloo passes") and the tests gloo passes and
chorus does not, with chorus's error. With --expect-exceptions (a file of test names, one a line,
'#' starts the reason), exits 1 when chorus misses a test not listed there, or passes one that is
listed (the list is then out of date); else exits 0.
"""

import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def read_exceptions(path):
    names = {}
    with open(path) as f:
        for line in f:
            name, _, why = line.partition("#")
            if name.strip():
                names[name.strip()] = why.strip()
    return names


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("gloo")
    p.add_argument("chorus")
    p.add_argument("--table", help="write the per-test table (markdown) here")
    p.add_argument("--expect-exceptions")
    args = p.parse_args()
    g, c = load(args.gloo), load(args.chorus)
    gt, ct = g["tests"], c["tests"]
    names = sorted(set(gt) | set(ct))
    outcome = lambda t, n: t.get(n, {}).get("outcome", "not run")
    gloo_pass = [n for n in names if outcome(gt, n) == "pass"]
    missed = [n for n in gloo_pass if outcome(ct, n) != "pass"]
    extra = [n for n in names if outcome(ct, n) == "pass" and outcome(gt, n) != "pass"]
    head = (f"torch {c['torch']}, {c['world_size']} ranks: chorus passes "
            f"{len(gloo_pass) - len(missed)} of the {len(gloo_pass)} tests gloo passes "
            f"({len(names)} tests; gloo {g['seconds']} s, chorus {c['seconds']} s)")
    print(head)
    if extra:
        print(f"chorus also passes {len(extra)} that gloo does not: {', '.join(extra)}")
    for n in missed:
        detail = ct.get(n, {}).get("detail", "").strip().splitlines()
        last = detail[-1] if detail else ""
        print(f"  gloo passes, chorus does not: {n} ({outcome(ct, n)}): {last[:300]}")
    if args.table:
        with open(args.table, "w") as f:
            f.write(f"{head}\n\n| test | gloo | chorus |\n|---|---|---|\n")
            for n in names:
                f.write(f"| {n} | {outcome(gt, n)} | {outcome(ct, n)} |\n")
    if args.expect_exceptions:
        known = read_exceptions(args.expect_exceptions)
        unexpected = [n for n in missed if n not in known]
        stale = [n for n in known if n in gt and n not in missed and outcome(gt, n) == "pass"]
        for n in missed:
            if n in known:
                print(f"  (known exception: {n}: {known[n]})")
        if unexpected:
            print(f"FAIL: chorus misses {len(unexpected)} test(s) gloo passes: "
                  f"{', '.join(unexpected)}")
        if stale:
            print(f"FAIL: listed as exceptions but chorus passes them: {', '.join(stale)}")
        return 1 if unexpected or stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

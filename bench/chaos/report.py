"""The campaign's report: step times around each event from chorus-train's metrics file, and the
JSON and markdown outputs."""

import csv
import json
import statistics


def read_steps(path, started_at):
    """(step, unix time at its end, duration) per optimizer step of chorus-train's metrics file
    (docs/dp.md; wall_s counts from the start of training, which began at started_at)."""
    rows = []
    with open(path) as f:
        for row in csv.DictReader(f):
            rows.append((int(row["step"]), float(row["wall_s"]), float(row["train_s"])))
    steps, prev_train = [], 0.0
    for step, wall, train in rows:
        # train_s leaves the evaluations out: a step's own duration.
        steps.append((step, started_at + wall, train - prev_train))
        prev_train = train
    return steps


def step_effects(steps, event, until=None, window=60.0):
    """The step times around an event: the steady median (steps ending in the 30 s before it),
    the longest step ending within `window` s after it, and when the steps were back to normal
    (the end of the first of 3 steps in a row no longer than twice the median, after the fault
    was removed), in seconds from the injection. Steps ending at `until` (the next fault) or later
    are not this fault's."""
    t0 = event["injected"]
    t1 = event.get("removed") or t0
    before = [d for _, end, d in steps if t0 - 30 <= end < t0]
    if len(before) < 3:
        before = [d for _, end, d in steps if end < t0] or [d for _, _, d in steps]
    median = statistics.median(before) if before else None
    last = t1 + window if until is None else min(t1 + window, until)
    after = [(s, end, d) for s, end, d in steps if t0 <= end < last]
    out = dict(steady_median_s=median, max_step_s=None, max_step_ratio=None, normal_again=None)
    if not after or not median:
        return out
    longest = max(d for _, _, d in after)
    out["max_step_s"] = longest
    out["max_step_ratio"] = longest / median
    run = 0
    for _, end, d in after:
        if end < t1:
            continue
        run = run + 1 if d <= 2 * median else 0
        if run == 3:
            out["normal_again"] = end - t0
            break
    return out


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def spread(values):
    """'median (min–max)' of the values that are there, '–' when none."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return "–"
    if len(v) == 1:
        return f"{v[0]:.2f}"
    return f"{statistics.median(v):.2f} ({v[0]:.2f}–{v[-1]:.2f})"


def per_kind(result):
    """What each kind of fault cost: seconds from the injection, median (range) over the
    campaign."""
    lines = ["| fault | injected | detected (s) | first step after the change (s) | all hosts "
             "again (s) | steps normal again (s) | longest step (s) | failed checks |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    kinds = []
    for e in result["events"]:
        if e["kind"] not in kinds:
            kinds.append(e["kind"])
    for k in kinds:
        ev = [e for e in result["events"] if e["kind"] == k]
        failed = sum(1 for e in ev if not all(e["checks"].values()))
        lines.append(f"| {k} | {len(ev)} | {spread(e['detected'] for e in ev)} | "
                     f"{spread(e['degraded'] for e in ev)} | {spread(e['recovered'] for e in ev)} | "
                     f"{spread(e.get('steps', {}).get('normal_again') for e in ev)} | "
                     f"{spread(e.get('steps', {}).get('max_step_s') for e in ev)} | {failed} |")
    return lines


def markdown(result):
    lines = []
    c = result["config"]
    lines.append(f"# Chaos campaign: seed {c['seed']}, {c['seconds']} s requested, "
                 f"{result['elapsed_s']:.0f} s run — {'PASS' if result['passed'] else 'FAIL'}")
    lines.append("")
    lines.append(f"Command: `{result['command']}`")
    lines.append("")
    lines += per_kind(result)
    lines.append("")
    lines.append("| # | round | time (s) | fault | target | detected (s) | first step after change (s) "
                 "| all hosts again (s) | steps normal again (s) | longest step / median | pass |")
    lines.append("|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|")
    for i, e in enumerate(result["events"]):
        st = e.get("steps", {})
        ok = all(e["checks"].values()) if e["checks"] else True
        lines.append(
            f"| {i + 1} | {e['round']} | {e['injected'] - result['started']:.1f} | {e['kind']} | "
            f"{e['target']} | {fmt(e['detected'])} | {fmt(e['degraded'])} | {fmt(e['recovered'])} "
            f"| {fmt(st.get('normal_again'))} | {fmt(st.get('max_step_ratio'), 1)} | "
            f"{'ok' if ok else 'FAIL: ' + ', '.join(k for k, v in e['checks'].items() if not v)} |")
    lines.append("")
    lines.append("| round | faults | exit codes | final test accuracy | clean run | parameters |")
    lines.append("|---:|---:|---|---:|---:|---|")
    clean = result.get("clean") or {}
    for r in result["rounds"]:
        lines.append(f"| {r['round']} | {r['events']} | {r['exit_codes']} | {fmt(r['accuracy'])} | "
                     f"{fmt(clean.get('accuracy'))} | {r['parameters'] or 'no check line'} |")
    lines.append("")
    b = result["bench"]
    lines.append(f"Checked collectives: {b['rounds']} rounds of chorus-bench on every host, "
                 f"{b['ok']} without error, {b['errors']} ended by an error (a fault of the network "
                 f"or of etcd during the round), {b['wrong']} wrong results, {b['hangs']} hangs; "
                 f"{len(b.get('unexplained', []))} failed with no such fault around them.")
    lines.append("")
    election = c.get("etcd_election_ms", 1000) / 1000.0
    for e in result["events"]:
        st = e.get("steps", {})
        if e["kind"] != "kill_etcd_leader" or not st.get("max_step_s"):
            continue
        target = 2 * st["steady_median_s"] + election
        lines.append(f"- etcd leader killed at {e['injected'] - result['started']:.1f} s: longest "
                     f"step {st['max_step_s']:.3f} s against the target 2 x steady median + "
                     f"election timeout = {target:.3f} s: "
                     f"{'met' if st['max_step_s'] <= target else 'MISSED'}")
    lines.append("")
    lines.append("Checks:")
    for name, ok in result["checks"].items():
        lines.append(f"- {'ok  ' if ok else 'FAIL'} {name}")
    lines.append("")
    return "\n".join(lines)


def write(result, json_path, md_path):
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    with open(md_path, "w") as f:
        f.write(markdown(result))


if __name__ == "__main__":
    import sys
    # report.py OUT_DIR: report.md again from OUT_DIR/report.json.
    with open(f"{sys.argv[1]}/report.json") as f:
        r = json.load(f)
    with open(f"{sys.argv[1]}/report.md", "w") as f:
        f.write(markdown(r))
    print(markdown(r))

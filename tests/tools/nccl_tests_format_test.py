#!/usr/bin/env python3
"""chorus-bench read the way a script written for nccl-tests reads nccl-tests: started with
nccl-tests' common flags (-b -e -f -g -c -d -o -n -w -t), its output parsed by the rules those
scripts use ('#' lines are comments; a row is size count type redop root, then time algbw busbw
#wrong out of place and in place; '# Out of bounds values : N OK'; '# Avg bus bandwidth : X').

    nccl_tests_format_test.py CHORUS_RUN CHORUS_BENCH
"""
import json
import os
import re
import subprocess
import sys
import tempfile

run, bench = sys.argv[1], sys.argv[2]
failures = 0


def check(what, ok, shown=""):
    global failures
    print(("ok   - " if ok else "FAIL - ") + what)
    if not ok:
        failures += 1
        if shown:
            print("    | " + shown.replace("\n", "\n    | "))


def launch(ranks, *flags):
    p = subprocess.run([run, "-n", str(ranks), "--", bench, *flags], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def parse(out):
    """What nccl-tests parsers do: rows are the lines that are not comments."""
    rows, oob, avg = [], None, None
    for line in out.splitlines():
        if line.startswith("#"):
            m = re.match(r"# Out of bounds values : (\d+) (OK|FAILED)", line)
            if m:
                oob = (int(m.group(1)), m.group(2))
            m = re.match(r"# Avg bus bandwidth\s*: ([-+0-9.eE]+)", line)
            if m:
                avg = float(m.group(1))
            continue
        f = line.split()
        if not f:
            continue
        rows.append({"size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3],
                     "root": int(f[4]), "oop": f[5:9], "ip": f[9:13], "extra": f[13:]})
    return rows, oob, avg


def busbws(rows):
    return [float(r[form][2]) for r in rows for form in ("oop", "ip") if r[form][0] != "N/A"]


# All-reduce, as nccl-tests' all_reduce_perf is started: 8 B .. 1 KiB, factor 4.
rc, out, err = launch(2, "-b", "8", "-e", "1K", "-f", "4", "-g", "1", "-t", "1", "-c", "1",
                      "-d", "float", "-o", "sum", "-n", "3", "-w", "1")
rows, oob, avg = parse(out)
check("all-reduce: exit 0", rc == 0, err)
check("all-reduce: every line that is not a row starts with '#'",
      all(l.startswith("#") or l.split()[0].isdigit() for l in out.splitlines() if l.strip()), out)
check("all-reduce: one row per size, 8 32 128 512 (factor 4 up to 1 KiB)",
      [r["size"] for r in rows] == [8, 32, 128, 512], out)
check("all-reduce: rows of exactly nccl-tests' 13 columns (scripts unpack them)",
      rows and all(not r["extra"] for r in rows), out)
check("all-reduce: type float, redop sum, root -1, count = size / 4",
      all(r["type"] == "float" and r["redop"] == "sum" and r["root"] == -1
          and r["count"] == r["size"] // 4 for r in rows), out)
check("all-reduce: #wrong 0 out of place and in place, times and bandwidths numbers",
      all(r[f][3] == "0" and float(r[f][0]) > 0 and float(r[f][2]) >= 0
          for r in rows for f in ("oop", "ip")), out)
check("all-reduce: '# Out of bounds values : 0 OK'", oob == (0, "OK"), out)
bw = busbws(rows)
check("all-reduce: '# Avg bus bandwidth' is the mean busbw of the rows (both forms)",
      avg is not None and abs(avg - sum(bw) / len(bw)) <= 1e-3 + 1e-2 * avg, out)
header = [l for l in out.splitlines() if "#wrong" in l]
check("all-reduce: a '#' column header with size count type redop root time algbw busbw #wrong",
      len(header) == 1 and header[0].split()[1:14] ==
      ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
       "time", "algbw", "busbw", "#wrong"], "\n".join(header))
check("all-reduce: 'out-of-place' and 'in-place' over the columns",
      re.search(r"^#.*out-of-place.*in-place", out, re.M) is not None, out)

# Broadcast: no reduction (redop none), root 0, one buffer (only the in-place form); -c 0 off.
rc, out, err = launch(3, "--op", "broadcast", "-b", "64", "-e", "64", "-d", "bfloat16", "-c", "0",
                      "-n", "2", "-w", "0")
rows, oob, avg = parse(out)
check("broadcast: exit 0, one row: bfloat16, redop none, root 0",
      rc == 0 and len(rows) == 1 and rows[0]["type"] == "bfloat16" and rows[0]["redop"] == "none"
      and rows[0]["root"] == 0, out + err)
check("broadcast: out of place N/A, in place timed, #wrong N/A with -c 0",
      rows and rows[0]["oop"] == ["N/A"] * 4 and rows[0]["ip"][3] == "N/A"
      and float(rows[0]["ip"][0]) > 0, out)
check("broadcast: avg bus bandwidth from the in-place form alone",
      avg is not None and rows and abs(avg - float(rows[0]["ip"][2])) <= 1e-3 + 1e-2 * avg, out)

# --chorus-columns: the algorithm and the CPU cost after the 13.
rc, out, err = launch(2, "-b", "8", "-e", "8", "-n", "1", "-w", "0", "--chorus-columns")
rows, _, _ = parse(out)
check("--chorus-columns: algo and cpu after nccl-tests' columns",
      rc == 0 and len(rows) == 1 and len(rows[0]["extra"]) == 2
      and rows[0]["extra"][0] in ("ring", "rd", "rhd", "tree", "oneshot", "twoshot", "hier"),
      out + err)

# --in-place 0: out of place only, except for broadcast, whose only form is in place.
rc, out, err = launch(2, "-b", "8", "-e", "8", "-n", "1", "-w", "0", "--in-place", "0")
rows, _, _ = parse(out)
check("--in-place 0: all-reduce out of place only",
      rc == 0 and len(rows) == 1 and rows[0]["oop"][3] == "0" and rows[0]["ip"] == ["N/A"] * 4,
      out + err)
rc, out, err = launch(2, "--op", "broadcast", "-b", "8", "-e", "8", "-n", "1", "-w", "0",
                      "--in-place", "0")
rows, _, _ = parse(out)
check("--in-place 0: broadcast keeps its one (in-place) form",
      rc == 0 and len(rows) == 1 and rows[0]["ip"][3] == "0", out + err)

# Reduce, -o max, int32: root 0, both forms checked; the JSON keeps its fields, in place added.
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "reduce.json")
    rc, out, err = launch(2, "--op", "reduce", "-o", "max", "-d", "int32", "-b", "16", "-e", "64",
                          "-n", "2", "-w", "0", "--json", path)
    rows, oob, avg = parse(out)
    check("reduce -o max -d int32: root 0, redop max, #wrong 0 in both forms",
          rc == 0 and rows and all(r["root"] == 0 and r["redop"] == "max" and r["type"] == "int32"
                                   and r["oop"][3] == "0" and r["ip"][3] == "0" for r in rows),
          out + err)
    doc = json.load(open(path)) if os.path.exists(path) else {"rows": []}
    check("--json: rows keep bytes, time_us, busbw, wrong, algo; in_place beside them",
          len(doc["rows"]) == len(rows) and all(
              {"bytes", "time_us", "busbw", "wrong", "algo", "in_place"} <= set(r)
              for r in doc["rows"]), json.dumps(doc)[:2000])

# -o all / -g 2 / unsigned types: refused with a reason, not run.
rc, out, err = launch(1, "-g", "2")
check("-g 2: refused, naming the way to more ranks", rc != 0 and "chorus-run -n" in err, err)
rc, out, err = launch(1, "-d", "uint32")
check("-d uint32: refused, naming the types there are", rc != 0 and "bfloat16" in err, err)
helptext = subprocess.run([bench, "--help"], capture_output=True, text=True).stdout
check("--help shows defaults (-n 20, -w 5, -d float)",
      re.search(r"--iters INT\S*( in \[[^]]*\])?=20", helptext)
      and re.search(r"--warmup INT\S*( in \[[^]]*\])?=5", helptext)
      and "TEXT=float" in helptext, helptext)
print(f"{failures} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)

"""The same kill as measure.py, on Chorus: examples/elastic_allreduce under chorus-run --elastic,
the last rank SIGKILLs itself at a chosen step, and the time from the kill to the first step
completed on the new membership is reported (median over the runs), without a replacement
(--max-restarts 0: the survivors shrink and go on) and with one (chorus-run restarts the rank,
which joins; the time is to the first step on all N ranks again).

    /usr/bin/python3 bench/elastic/chorus_recovery.py --build build --sizes 2 4 8 --runs 5

The all-reduce is of 535,818 int32 (the size of chorus-train's MLP), so a step costs what a
gradient all-reduce of that model does. No state is transferred to the replacement here: the
data-parallel layer's recovery adds that (about 2 MiB).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

KILL = re.compile(r"killing myself \(SIGKILL\) at step \d+, time=([0-9.]+)")
FIRST = re.compile(r"first step of generation (\d+) \((\d+) ranks\) done at time=([0-9.]+)")


def one_run(args, size, replace):
    env = dict(os.environ, ELASTIC_KILL_RANK=str(size - 1), ELASTIC_KILL_STEP=str(args.kill_step))
    for name in [n for n in env if n.startswith("CHORUS_")]:
        del env[name]
    cmd = [os.path.join(args.build, "tools/chorus-run/chorus-run"), "-n", str(size), "--elastic",
           "--timeout", "30"]
    if not replace:
        cmd += ["--max-restarts", "0", "--min-ranks", str(size - 1)]
    cmd += ["--", os.path.join(args.build, "examples/elastic_allreduce"), "--steps", str(args.steps),
            "--step-ms", "10", "--count", "535818", "--admit-every", "5"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    killed = float(KILL.search(proc.stdout).group(1))
    target = size if replace else size - 1
    for gen, ranks, at in FIRST.findall(proc.stdout):
        if int(ranks) == target:
            return float(at) - killed, int(gen)
    raise RuntimeError(f"no step on {target} ranks after the kill:\n{proc.stdout}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--kill-step", type=int, default=20)
    args = parser.parse_args()
    print(f"# chorus-run --elastic, elastic_allreduce, {os.cpu_count()} CPUs, kill at step {args.kill_step}, "
          f"{args.runs} runs; seconds from the kill to the first step on the new membership")
    print(f"{'ranks':>5} {'replacement':>11} {'median_s':>9} {'min_s':>7} {'max_s':>7}  runs_s (generation)")
    for size in args.sizes:
        for replace in (False, True):
            results = [one_run(args, size, replace) for _ in range(args.runs)]
            times = [t for t, _ in results]
            print(f"{size:>5} {'yes' if replace else 'no':>11} {statistics.median(times):>9.3f} {min(times):>7.3f} "
                  f"{max(times):>7.3f}  " + " ".join(f"{t:.3f}({g})" for t, g in results), flush=True)


if __name__ == "__main__":
    sys.exit(main())

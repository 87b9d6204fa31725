#!/usr/bin/python3
"""A rank SIGKILLed inside a synchronisation of chorus.torch.elastic.AsyncTrainer (LocalSGD's
average, a streamed DiLoCo fragment in flight, DelayedUpdates' step), checked against a run that
saw the same membership:

  1. examples/torch/train_async.py --elastic on 4 ranks under chorus-run --elastic; rank
     --fail-rank starts the synchronisation's collective at step --fail-step and dies; each
     survivor saves its state, put back to before that synchronisation (--save-at-failure);
     the survivors redo it among themselves, go on to --steps, synchronise and must end
     bit-identical (the example checks).
  2. In the same job, the survivors train again from the saved states on their 3-rank group
     (--check-reference: the example's --resume, no failure): the reference.
  3. The two final models must be bit-identical (the example compares them on every rank): the
     failed synchronisation left nothing behind (no partial average, no half-applied outer
     step), and the averages divided by the new size from then on.

With --replacement, one launch instead: chorus-run restarts the killed rank, the replacement
joins (the survivors wait for it at --await-at) and takes the state from a peer (its whole state,
hashed, must then be rank 0's, and the state every rank shares the same everywhere), and the 4
ranks end bit-identical.

    check_async_kill.py --chorus-run PATH --example PATH --mode delayed|localsgd|diloco
                        [--replacement]
Exits 77 (skipped) where this torch cannot shrink a group in place.
"""

import argparse
import sys
import tempfile

import torch

import run_checked  # beside this script

# The kill, inside a synchronisation that has already changed the wrapper's state on the
# survivors (which must put it back): LocalSGD (H = 4) at step 8, in the first of the divergence
# check's all-reduces, after the average; DiLoCo (H = 4, 2 fragments overlapped, int8 deltas) at
# step 9, in the divergence check, after fragment 0 (launched at step 8, in flight during step
# 9's compute) had its outer step. With a replacement: LocalSGD in the average itself; DiLoCo in
# fragment 1's launch at step 6, the fragment in flight when the rank dies.
# DelayedUpdates at step 9, in the divergence check, after the optimizer applied step 8's average.
MODES = {
    "delayed": ["--mode", "delayed", "--check-every", "3"],
    "localsgd": ["--mode", "localsgd", "--sync-every", "4", "--check-every", "4"],
    "diloco": ["--mode", "diloco", "--sync-every", "4", "--fragments", "2", "--overlap",
               "--compress", "int8", "--check-every", "3"],
}
FAIL = {("delayed", False): (9, 0), ("delayed", True): (9, 0),
        ("localsgd", False): (8, 1), ("diloco", False): (9, 0),
        ("localsgd", True): (8, 0), ("diloco", True): (6, 0)}


def run(cmd, timeout, expect):
    return run_checked.run(cmd, timeout, expect, "check_async_kill")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--chorus-run", required=True)
    p.add_argument("--example", required=True)
    p.add_argument("--mode", choices=sorted(MODES), required=True)
    p.add_argument("--replacement", action="store_true")
    p.add_argument("--steps", type=int, default=14)
    args = p.parse_args()
    import chorus.torch

    if not chorus.torch.can_shrink():
        print(f"skipped: torch {torch.__version__} cannot shrink a group in place")
        return 77
    py = sys.executable
    common = [args.example, "--elastic", "--synthetic", "--batch", "16", "--steps",
              str(args.steps), "--timeout", "30", "--log-every", "1000"] + MODES[args.mode]
    step, collective = FAIL[args.mode, args.replacement]
    fail = ["--fail-rank", "2", "--fail-step", str(step), "--fail-collective", str(collective)]
    lost = [f"rank 2 fails in a synchronisation of step {step}",
            "4 -> 3 ranks (lost 2)", "recovered in"]
    if args.replacement:
        run([args.chorus_run, "-n", "4", "--elastic", "--max-restarts", "1", "--", py] + common
            + fail + ["--admit-every", "1", "--await-replacements", "1", "--await-at", "10"],
            100, lost + ["3 -> 4 ranks (1 replacement(s) joined) at step 10",
                         "replacement(s) [3]: whole state identical to rank 0's",
                         "parameters: bit-identical on all 4 ranks"])
        return 0
    with tempfile.TemporaryDirectory() as saved:
        run([args.chorus_run, "-n", "4", "--elastic", "--max-restarts", "0", "--min-ranks", "3",
             "--", py] + common + fail + ["--save-at-failure", saved, "--check-reference"],
            90, lost + ["reference: parameters bit-identical to a 3-rank run",
                        "parameters: bit-identical on all 3 ranks"])
    print(f"{args.mode}: the survivors' parameters bit-identical to the 3-rank reference from "
          f"the synchronisation that failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

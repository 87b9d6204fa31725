#!/usr/bin/python3
"""A rank SIGKILLed in the middle of a DDP step, and the survivors' result checked against a run
that saw the same membership:

  1. examples/torch/train_elastic.py on 4 ranks under chorus-run --elastic; rank --fail-rank
     kills itself in step --fail-step's backward; rank 0 saves the state before that step, the
     survivors go on to --steps and must end bit-identical (the example checks).
  2. The same example on 3 ranks from the saved state (no failure): the reference.
  3. The two final models must be bit-identical: the failed step left nothing behind, and DDP
     averaged over the new size from then on.

With --spares 1 chorus-run keeps a spare waiting beside the 4 ranks (the survivors look for
newcomers at every step, and must not admit it while the job is full): it takes the killed
rank's place in the membership change of the failure, and the reference runs on 4 ranks; the
process chorus-run restarts becomes the next spare and is stopped at the end.

With --hsdp S the example runs HSDP (replica groups of S ranks): the killed rank's replica group
leaves, the reference runs on the 4 - S ranks left, from the shards that replica group 0 saved.

    check_kill_matches_reference.py --chorus-run PATH --example PATH [--fail-rank R] ...
Exits 77 (skipped) where this torch cannot shrink a group in place.
"""

import argparse
import os
import re
import sys
import tempfile

import torch

import run_checked  # beside this script


def run(cmd, timeout, expect):
    return run_checked.run(cmd, timeout, expect, "check_kill_matches_reference")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--chorus-run", required=True)
    p.add_argument("--example", required=True)
    p.add_argument("--fail-rank", type=int, default=2)
    p.add_argument("--fail-step", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--hsdp", type=int, default=0, metavar="S")
    p.add_argument("--spares", type=int, default=0, choices=[0, 1])
    p.add_argument("--bound", type=float, default=0,
                   help="the recovery (kill to the next committed step) must take less (0: any)")
    args = p.parse_args()
    import chorus.torch

    if not chorus.torch.can_shrink():
        print(f"skipped: torch {torch.__version__} cannot shrink a group in place")
        return 77
    py = sys.executable
    common = [args.example, "--synthetic", "--batch", "16", "--steps", str(args.steps),
              "--timeout", "30", "--log-every", "1000"]
    lost, left = [args.fail_rank], 3
    if args.hsdp:
        common += ["--hsdp", str(args.hsdp)]
        first = args.fail_rank // args.hsdp * args.hsdp
        lost, left = list(range(first, first + args.hsdp)), 4 - args.hsdp
    lost_text = ",".join(map(str, lost))
    launch = ["--max-restarts", "0", "--min-ranks", str(left)]
    change = f"4 -> {left} ranks (lost {lost_text})"
    expect_end, launch_only = [], []
    if args.spares:
        left = 4
        launch = ["--spares", "1", "--max-restarts", "1"]
        common += ["--admit-every", "1"]
        launch_only = ["--await-spares", "1"]  # else a slow start may miss the failure
        change = f"generation 1, 4 -> 4 ranks (lost {lost_text}, 1 spare(s) joined)"
        expect_end = ["spare 1 of 1 started", "were admitted; the job is done"]
    with tempfile.TemporaryDirectory() as tmp:
        before, elastic, reference = (os.path.join(tmp, f) for f in
                                      ("before.pt", "elastic.pt", "reference.pt"))
        out = run([args.chorus_run, "-n", "4", "--elastic"] + launch + ["--", py] + common +
                  launch_only +
                  ["--fail-rank", str(args.fail_rank), "--fail-step", str(args.fail_step),
                   "--save-before-failure", before, "--save", elastic],
                  60, [change, "recovered in", f"parameters: bit-identical on all {left}"]
                  + expect_end)
        found = re.search(r"recovered in ([0-9.]+) s", out)
        if args.bound and float(found.group(1)) >= args.bound:
            sys.exit(f"check_kill_matches_reference: recovered in {found.group(1)} s, not under "
                     f"{args.bound} s")
        # A spare's admission lays DDP's buckets out anew (parameter order): the reference
        # starts with that layout.
        layout = ["--resume-buckets", "joined"] if args.spares else []
        run([args.chorus_run, "-n", str(left), "--", py] + common + layout +
            ["--resume", before, "--save", reference], 60,
            [f"parameters: bit-identical on all {left}"])
        got, want = torch.load(elastic), torch.load(reference)
        if args.hsdp:  # the full parameters from the shards saved
            shards = [torch.load(f"{before}.{i}", weights_only=False)["params"]
                      for i in range(args.hsdp)]
            before_state = {k: torch.cat([s[n] for s in shards])
                            for n, k in enumerate(want)}
        else:
            before_state = torch.load(before, weights_only=False)["model"]
        differ = [k for k in want if not torch.equal(got[k], want[k])]
        if differ:
            sys.exit(f"check_kill_matches_reference: the survivors' parameters differ from the "
                     f"reference in {differ}")
        if all(torch.equal(got[k], before_state[k]) for k in got):
            sys.exit("check_kill_matches_reference: the model did not train after the failure")
    print(f"survivors' parameters bit-identical to the {left}-rank reference from step "
          f"{args.fail_step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

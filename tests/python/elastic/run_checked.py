"""The elastic checks' way to run a job: print the command and its output, and end the check
(naming it) on a failed exit status or a missing line."""

import subprocess
import sys


def run(cmd, timeout, expect, who):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    print(p.stdout, flush=True)
    if p.returncode != 0:
        sys.exit(f"{who}: exit status {p.returncode}")
    for text in expect:
        if text not in p.stdout:
            sys.exit(f"{who}: the output lacks {text!r}")
    return p.stdout

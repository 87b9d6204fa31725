#!/usr/bin/env python3
"""PyTorch's own distributed_test.py, from the installed torch, against one backend.

    run_suite.py --backend chorus --world-size 2 [-k PATTERN ...] [--tests FILE] [--json OUT]

Runs the tests of torch.testing._internal.distributed.distributed_test.DistributedTest.
_DistTestBase (the file that test_distributed_spawn.py drives in PyTorch's own CI; that driver is
not in the wheel) with one rank process per rank, and writes each test's outcome (pass, fail,
error, skip, with the reason or the last lines of the error) as JSON for compare.py.

Many tests are gated on the backend's name ("gloo", "nccl"): a plugin backend would skip them.
For --backend chorus the gates treat chorus as gloo, since a user who swaps gloo for chorus
expects exactly gloo's behaviour: the suite module is imported with BACKEND=gloo, so every gate
evaluated at import (decorators) sees gloo, and its BACKEND is then replaced by a name that is
"chorus" where the process group is created but compares equal to "gloo" in the tests' runtime
checks. The process groups themselves are chorus's.

Each test has a deadline (--timeout, seconds; the suite's own mechanism kills its ranks and fails
the test). Rank processes are forked from this process (--start-method fork, the default:
importing torch's test modules costs seconds of CPU per rank) or spawned as PyTorch's CI does
(--start-method spawn).
"""

import argparse
import atexit
import fnmatch
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default=os.environ.get("CHORUS_SUITE_BACKEND", "chorus"))
    p.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "2")))
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="run the tests whose name contains this text or matches this glob "
                        "(repeatable: any of them)")
    p.add_argument("--tests", help="a file of test names, one a line ('#' starts a comment)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per test")
    p.add_argument("--json", help="write the outcomes here")
    p.add_argument("--start-method", choices=("fork", "spawn"), default="fork")
    p.add_argument("--no-skips", action="store_true",
                   help="a skipped test fails the run (for a selection that must run)")
    p.add_argument("--list", action="store_true", help="print the selected tests and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="show the ranks' output")
    return p.parse_args(argv)


class GlooGatedName(str):
    """The backend name "chorus" that the suite's name gates read as "gloo".

    Equal to both "chorus" and "gloo", hashed as "gloo" (set and dict lookups in the gates then
    find gloo's entries); str methods (lower(), format) give plain "chorus", which is what
    dist.Backend() and init_process_group see.
    """

    def __eq__(self, other):
        return str.__eq__(self, other) or other == "gloo"

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash("gloo")


def _configure_environment(backend, world_size, timeout):
    """Everything the suite reads at import; the ranks (forked or spawned) inherit it."""
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(timeout)
    if "TEMP_DIR" not in os.environ:
        os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="chorus-suite-")
        atexit.register(shutil.rmtree, os.environ["TEMP_DIR"], True)
    # As PyTorch's CI runs it with file://: the tests that re-create the default group use it
    # (each test joins through a file of its own).
    os.environ.setdefault("INIT_METHOD", f"file://{os.environ['TEMP_DIR']}/shared_init_file")
    os.environ["CHORUS_SUITE_BACKEND"] = backend
    os.environ["CHORUS_SUITE_TIMEOUT"] = str(timeout)


def _import_suite(backend, timeout):
    """Imports distributed_test with chorus's gates opened; returns the module."""
    import torch.distributed as dist
    if backend == "chorus":
        import chorus.torch  # noqa: F401  registers the backend "chorus"
    os.environ["BACKEND"] = "gloo" if backend == "chorus" else backend
    from torch.testing._internal import common_distributed
    from torch.testing._internal.distributed import distributed_test as suite
    os.environ["BACKEND"] = backend
    if backend == "chorus":
        suite.BACKEND = GlooGatedName("chorus")
        # The runtime availability check of require_backend_is_available.
        common_distributed.DistTestCases.backend_feature["plugin"].add("chorus")
    # One deadline for every test (the suite gives a few of them 400-500 s).
    common_distributed.TIMEOUT_DEFAULT = timeout
    common_distributed.TIMEOUT_OVERRIDE.clear()
    assert dist.is_available()
    return suite


def _make_case(suite, start_method):
    import torch.multiprocessing as mp

    class SuiteTest(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            if start_method == "spawn":
                self._spawn_processes()
            else:
                self._start_processes(mp.get_context("fork").Process)

    SuiteTest.__name__ = SuiteTest.__qualname__ = "SuiteTest"
    SuiteTest.__module__ = "__main__"
    return SuiteTest


def _select(names, patterns, tests_file):
    wanted = None
    if tests_file:
        with open(tests_file) as f:
            wanted = [line.split("#")[0].strip() for line in f]
        wanted = [w for w in wanted if w]
        missing = [w for w in wanted if w not in names]
        if missing:
            sys.exit(f"run_suite: not in this torch's suite: {', '.join(missing)}")
        names = [n for n in names if n in wanted]
    if patterns:
        names = [n for n in names
                 if any(p in n or fnmatch.fnmatchcase(n, p) for p in patterns)]
    return names


class _Recorder(unittest.TextTestResult):
    """Keeps each test's outcome, reason and time."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}
        self._t0 = {}

    def _name(self, test):
        return test.id().split(".")[-1]

    def startTest(self, test):
        self._t0[self._name(test)] = time.monotonic()
        super().startTest(test)

    def _put(self, test, outcome, detail=""):
        name = self._name(test)
        secs = round(time.monotonic() - self._t0.get(name, time.monotonic()), 1)
        self.outcomes[name] = {"outcome": outcome, "detail": _digest(detail), "seconds": secs}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._put(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._put(test, "fail", "unexpected success")


def _digest(text, keep=1500):
    """The part of an error that says what went wrong: the ranks' exceptions, not the runner's
    traceback through unittest."""
    text = text or ""
    lines = [l for l in text.splitlines() if l.strip()]
    interesting = [l for l in lines if re.search(r"(Error|Exception|assert|Timing out|timed out"
                                                  r"|exit code|Process \d)", l)]
    out = "\n".join(interesting[-12:] or lines[-12:])
    return out[-keep:]


def main(argv=None):
    args = _args(sys.argv[1:] if argv is None else argv)
    _configure_environment(args.backend, args.world_size, args.timeout)
    suite = _import_suite(args.backend, args.timeout)
    case = _make_case(suite, args.start_method)
    globals()["SuiteTest"] = case  # where a spawned rank looks the class up
    names = sorted(n for n in dir(suite.DistributedTest._DistTestBase) if n.startswith("test_"))
    names = _select(names, args.patterns, args.tests)
    if args.list:
        print("\n".join(names))
        return 0
    if not names:
        sys.exit("run_suite: no test selected")

    tests = unittest.TestSuite(case(n) for n in names)
    stream = sys.stderr
    runner = unittest.TextTestRunner(stream=stream, verbosity=2, resultclass=_Recorder)
    log = None
    if not args.verbose:
        # The ranks' logs (tracebacks of expected errors, warnings) go to a file, not the screen;
        # it is kept when a test failed.
        log = tempfile.NamedTemporaryFile("w", prefix="chorus-suite-ranks-", suffix=".log",
                                          delete=False)
        print(f"run_suite: ranks' output in {log.name}", file=stream)
        saved = os.dup(1), os.dup(2)
        stream = os.fdopen(os.dup(2), "w", buffering=1)
        runner.stream = unittest.runner._WritelnDecorator(stream)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    t0 = time.monotonic()
    try:
        result = runner.run(tests)
    finally:
        if not args.verbose:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    elapsed = time.monotonic() - t0

    import torch
    counts = {}
    for o in result.outcomes.values():
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    summary = (f"run_suite: torch {torch.__version__}, backend {args.backend}, "
               f"{args.world_size} ranks: {len(names)} tests in {elapsed:.0f} s: "
               + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    print(summary)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "backend": args.backend,
                       "world_size": args.world_size, "seconds": round(elapsed),
                       "start_method": args.start_method, "tests": result.outcomes},
                      f, indent=1, sort_keys=True)
    bad = counts.get("fail", 0) + counts.get("error", 0)
    if args.no_skips:
        bad += counts.get("skip", 0)
    if log is not None and counts.get("fail", 0) + counts.get("error", 0) == 0:
        os.unlink(log.name)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
elif __name__ == "__mp_main__" and "CHORUS_SUITE_BACKEND" in os.environ:
    # A spawned rank re-imports this file as __mp_main__: the same suite, the same gates.
    SuiteTest = _make_case(_import_suite(os.environ["CHORUS_SUITE_BACKEND"],
                                         int(os.environ["CHORUS_SUITE_TIMEOUT"])), "spawn")

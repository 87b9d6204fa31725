"""What every rank script of these tests shares: joining the group, comparing tensors, reporting.

A rank script runs its checks one after another. A wrong value is recorded and the checks go on
(the ranks still call the same collectives in the same order); an exception ends the rank at once
with exit code 1, since the ranks may no longer agree on what comes next. `finish()` prints the
summary and exits 1 if any check failed.
"""

import datetime
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import chorus.torch  # noqa: F401  registers the backend "chorus"

failures = []
checks = 0


def rank_and_size():
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def init(timeout_s=30.0, method="env"):
    """Joins the world group of backend "chorus" through one of torch's init methods."""
    rank, size = rank_and_size()
    timeout = datetime.timedelta(seconds=timeout_s)
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    if method == "env":
        dist.init_process_group("chorus", timeout=timeout)
    elif method == "tcp":
        dist.init_process_group("chorus", init_method=f"tcp://{addr}:{port}", rank=rank,
                                world_size=size, timeout=timeout)
    elif method == "file":
        # Every rank derives the same file name from the port the launcher chose.
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"chorus-torch-test-{port}")
        dist.init_process_group("chorus", init_method=f"file://{path}", rank=rank,
                                world_size=size, timeout=timeout)
    elif method == "store":
        store = dist.TCPStore(addr, port, size, rank == 0, timeout=timeout)
        dist.init_process_group("chorus", store=store, rank=rank, world_size=size, timeout=timeout)
    else:
        raise ValueError(f"unknown init method {method}")
    assert dist.get_backend() == "chorus", dist.get_backend()
    assert dist.get_rank() == rank and dist.get_world_size() == size
    return rank, size


def say(*parts):
    print(f"[rank {os.environ.get('RANK', '?')}]", *parts, flush=True)


def fail(what):
    failures.append(what)
    say("FAIL:", what)


def expect(cond, what):
    global checks
    checks += 1
    if not cond:
        fail(what)
    return cond


def expect_equal(got, want, what, atol=0.0, rtol=0.0):
    """Same shape, dtype and values (exactly, unless a tolerance is given)."""
    global checks
    checks += 1
    if got.dtype != want.dtype or got.shape != want.shape:
        fail(f"{what}: got {got.dtype}{tuple(got.shape)}, want {want.dtype}{tuple(want.shape)}")
        return False
    if want.numel() == 0:
        return True
    if atol or rtol:
        same = torch.allclose(got.double(), want.double(), atol=atol, rtol=rtol)
    else:
        same = torch.equal(got, want)
    if not same:
        fail(f"{what}:\n  got  {got.flatten()[:16].tolist()}\n"
             f"  want {want.flatten()[:16].tolist()}")
    return same


def expect_raises(types, fn, what, must_name=None, within_s=5.0):
    """fn() raises one of `types` within `within_s` seconds, its message naming `must_name`."""
    global checks
    checks += 1
    start = time.monotonic()
    try:
        fn()
    except types as e:
        took = time.monotonic() - start
        text = str(e)
        if must_name and must_name.lower() not in text.lower():
            fail(f"{what}: {type(e).__name__} does not name {must_name!r}: {text[:300]}")
            return None
        if took > within_s:
            fail(f"{what}: raised after {took:.1f} s, expected within {within_s} s")
            return None
        return e
    except Exception as e:  # noqa: BLE001  a wrong exception type is a finding, not a crash
        fail(f"{what}: raised {type(e).__name__} ({str(e)[:300]}), expected {types}")
        return None
    fail(f"{what}: did not raise")
    return None


def run(*sections):
    """Runs each section (a function); an exception ends this rank with exit code 1."""
    for section in sections:
        start = time.monotonic()
        try:
            section()
        except Exception:  # noqa: BLE001
            say(f"ERROR in {section.__name__}:\n{traceback.format_exc()}")
            sys.stdout.flush()
            os._exit(1)
        say(f"{section.__name__}: {time.monotonic() - start:.2f} s")


def finish():
    code = 1 if failures else 0
    gloo = dist.is_initialized() and dist.get_backend() == "gloo"
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"{checks} checks, {len(failures)} failed")
    if gloo:
        # torch's gloo worker threads may drop the last reference to a finished Work, and with it
        # the Python tensors it holds, after the interpreter began to finalize: the thread then
        # exits inside a noexcept destructor and the process aborts ("terminate called without
        # an active exception"; seen in CI, a torch bug). Leaving without finalization skips it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

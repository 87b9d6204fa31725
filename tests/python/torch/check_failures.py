"""Failures on backend "chorus" end in an error on every surviving rank, in bounded time.

    launch.py -n 3 --expect 2=-9 -- check_failures.py killed     rank 2 dies (SIGKILL) mid-loop
                                     (CHORUS_TEST_LOST_RANK=0 --expect 0=-9: rank 0, the store's host)
    launch.py -n 3 -- check_failures.py mismatch                 ranks pass different sizes; then
                                                                 rank 0 aborts a group
    launch.py -n 3 -- check_failures.py silent                   rank 2 never calls the collectives
                                                                 (of a subgroup, then of the world)
"""

import datetime
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import chorus.torch
import rank_harness as h

LOST = int(os.environ.get("CHORUS_TEST_LOST_RANK", "2"))  # the rank that dies or stays silent


def killed(rank, size):
    t0 = time.monotonic()
    last_ok = t0
    for i in range(100000):
        if rank == LOST and i == 50:
            # From another thread, a moment later: the kill lands inside a collective.
            threading.Timer(0.002, os.kill, (os.getpid(), signal.SIGKILL)).start()
        # Small and large (1 MiB, split into segments) in turn.
        count = 1000 if i % 2 else 262144
        t = torch.full((count,), float(rank))
        try:
            dist.all_reduce(t)
        except RuntimeError as e:
            took = time.monotonic() - last_ok
            h.say(f"iteration {i}: RuntimeError after {took:.2f} s: {e}")
            h.expect(i >= 50 or rank == LOST, f"failed at iteration {i}, before rank {LOST} died")
            h.expect(took < 5.0, f"the loss was reported {took:.1f} s after the last success")
            h.expect(f"rank {LOST}" in str(e), f"the error does not name rank {LOST}: {e}")
            break
        h.expect_equal(t, torch.full((count,), float(sum(range(size)))), f"iteration {i}")
        last_ok = time.monotonic()
        if last_ok - t0 > 30:
            h.fail("no error 30 s into the loop")
            break
    else:
        h.fail("the loop ended without an error")
    # The group stays failed: the next collective raises too, at once.
    h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(2)),
                    "a collective after the loss", within_s=5.0)


def mismatch(rank, size):
    t = torch.ones(10 + rank)  # every rank a different size
    start = time.monotonic()
    work = dist.all_reduce(t, async_op=True)
    err = h.expect_raises(RuntimeError, work.wait, "all_reduce of mismatched sizes", within_s=10.0)
    h.say(f"after {time.monotonic() - start:.2f} s: {err}")
    # The failed Work says so, and so does its future.
    h.expect(work.is_completed(), "is_completed after the failure")
    h.expect(not work.is_success(), "is_success after the failure")
    h.expect_raises(RuntimeError, lambda: work.get_future().wait(), "the failed Work's future")
    h.expect_raises(RuntimeError, work.wait, "a second wait on the failed Work")


def other_mismatches(rank, size):
    """Ranks that disagree on dtype, op, root, collective or size: every rank raises at once. Each
    case fails its group, so each gets a fresh one."""
    R = dist.ReduceOp
    cases = {
        "dtype": lambda g: dist.all_reduce(
            torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32), group=g),
        "op": lambda g: dist.all_reduce(torch.ones(4), op=R.SUM if rank == 0 else R.MAX, group=g),
        "root": lambda g: dist.broadcast(torch.ones(4), src=rank, group=g),
        "collective": lambda g: dist.all_reduce(torch.ones(4), group=g) if rank == 0 else
        dist.broadcast(torch.ones(4), src=0, group=g),
        "all_gather size": lambda g: dist.all_gather([torch.empty(4 + rank)] * size,
                                                     torch.ones(4 + rank), group=g),
    }
    for name, fn in cases.items():
        g = dist.new_group(list(range(size)))
        h.expect_raises(RuntimeError, lambda: fn(g), f"mismatched {name}", within_s=5.0)
    # A message larger than the receiver's buffer: the receiver raises.
    g = dist.new_group(list(range(size)))
    if rank == 0:
        dist.send(torch.ones(4), dst=1, group=g)
    elif rank == 1:
        h.expect_raises(RuntimeError, lambda: dist.recv(torch.ones(6), src=0, group=g),
                        "recv of a message of another size", within_s=5.0)


def aborted(rank, size):
    """chorus.torch.abort(group) on rank 0 fails the collective the others are waiting in."""
    g = dist.new_group(list(range(size)))  # a fresh group: the world one has failed
    t = torch.ones(2)
    dist.all_reduce(t, group=g)
    h.expect_equal(t, torch.full((2,), float(size)), "all_reduce on the new group")
    if rank == 0:
        time.sleep(0.5)  # the others are in their all_reduce by now
        chorus.torch.abort(g)
        h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(2), group=g),
                        "a collective on the group this rank aborted")
    else:
        start = time.monotonic()
        err = h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(2), group=g),
                              "a collective on a group a peer aborted", within_s=5.0)
        h.say(f"after {time.monotonic() - start:.2f} s: {err}")


def silent(rank, size, timeout_s):
    group_timeout_s = 1.5
    g = dist.new_group(list(range(size)), timeout=datetime.timedelta(seconds=group_timeout_s))
    if rank == LOST:
        # Never calls the collectives; stays alive past the others' deadlines, then leaves.
        time.sleep(group_timeout_s + timeout_s + 8)
        h.say("leaving without calling all_reduce")
        return
    # A group's own timeout bounds its collectives.
    start = time.monotonic()
    h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(4), group=g),
                    "all_reduce on a group with a silent rank", within_s=group_timeout_s + 4)
    took = time.monotonic() - start
    h.say(f"group with a {group_timeout_s} s timeout: raised after {took:.2f} s")
    h.expect(took >= group_timeout_s * 0.8, f"the group raised after {took:.2f} s, before its "
             f"{group_timeout_s} s timeout")
    start = time.monotonic()
    err = h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(4)),
                          "all_reduce with a silent rank", within_s=timeout_s + 4)
    took = time.monotonic() - start
    h.say(f"after {took:.2f} s: {err}")
    h.expect(took >= timeout_s * 0.8,
             f"raised after {took:.2f} s, before the {timeout_s} s timeout")
    # monitored_barrier names the rank that did not come (through the store, which still works).
    # Every caller names it: rank 0 decides, the others report its verdict. The survivors enter it
    # together: the errors above reach them at different times, and a survivor that came late
    # would rightly be named first.
    store = dist.distributed_c10d._get_default_store()
    late = 1
    survivors_meet(store, "late", size - 1)
    if rank == late:
        time.sleep(1.0)  # comes after rank 0 gave up on it
    err = h.expect_raises(RuntimeError, lambda: dist.monitored_barrier(
        timeout=datetime.timedelta(seconds=0.3)), "monitored_barrier with a late rank",
        must_name=f"rank {late}", within_s=8)
    h.say(f"monitored_barrier, rank {late} late: {err}")
    survivors_meet(store, "on time", size - 1)
    err = h.expect_raises(RuntimeError, lambda: dist.monitored_barrier(
        timeout=datetime.timedelta(seconds=2)), "monitored_barrier without rank 2",
        must_name=f"rank {LOST}", within_s=8)
    h.say(f"monitored_barrier: {err}")
    # The waits that ran out inside (on rank 0, for a rank that came later) left the store's
    # connection in step: replies still match.
    store.set(f"chorus-test/echo/{rank}", str(rank))
    count = store.add("chorus-test/meet/on time", 0)
    h.expect(count == size - 1, f"a store counter after monitored_barrier timed out: {count}")
    echo = store.get(f"chorus-test/echo/{rank}")
    h.expect(echo == str(rank).encode(), f"a store value after monitored_barrier timed out: {echo}")


def survivors_meet(store, name, survivors):
    """The ranks still running wait for each other through the store."""
    key = f"chorus-test/meet/{name}"
    arrived = store.add(key, 1)
    deadline = time.monotonic() + 20
    while arrived < survivors and time.monotonic() < deadline:
        time.sleep(0.01)
        arrived = store.add(key, 0)


def leave_together(rank, survivors):
    """Rank 0 hosts the store: it stays until every survivor is done with it."""
    if LOST == 0:
        return  # killed, with the store
    store = dist.distributed_c10d._get_default_store()
    store.add("chorus-test/finished", 1)
    if rank == 0:
        deadline = time.monotonic() + 20
        while store.add("chorus-test/finished", 0) < survivors and time.monotonic() < deadline:
            time.sleep(0.05)


def main():
    scenario = sys.argv[1]
    timeout_s = 3.0 if scenario == "silent" else 20.0
    rank, size = h.init(timeout_s=timeout_s)
    # One good collective first: the group is up on every rank.
    t = torch.ones(3)
    dist.all_reduce(t)
    h.expect_equal(t, torch.full((3,), float(size)), "all_reduce before the failure")
    if scenario == "killed":
        killed(rank, size)
    elif scenario == "mismatch":
        mismatch(rank, size)
        other_mismatches(rank, size)
        aborted(rank, size)
    elif scenario == "silent":
        silent(rank, size, timeout_s)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    leave_together(rank, size - 1 if scenario == "killed" else size)
    h.say(f"{h.checks} checks, {len(h.failures)} failed")
    sys.stdout.flush()
    # A failed group cannot be torn down in agreement with its peers; leave at once.
    os._exit(1 if h.failures else 0)


if __name__ == "__main__":
    main()

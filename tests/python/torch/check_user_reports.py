"""What a new user of backend "chorus" ran into, each on 2 ranks (launch.py, or chorus-run):

    CHORUS_TIMEOUT=2 launch.py -n 2 -- check_user_reports.py timeout
        CHORUS_TIMEOUT applies when shorter than the group's timeout (60 s here): rank 1 sleeps
        past it, rank 0's all_reduce fails after about 2 s, and rank 0 said so at init
    launch.py -n 2 --expect 1=1 -- check_user_reports.py peer_raises
        rank 1 raises (and destroys its group on the way out) while rank 0 waits for it in a
        collective: rank 0's error says rank 1 closed its communicator or exited, and may
        have failed, without guessing at mismatched collectives
    launch.py -n 2 -- check_user_reports.py sigint
        rank 1 sends SIGINT to rank 0 blocked in all_reduce (which rank 1 never joins), then in
        Work.wait() and Work.wait(timeout) on new groups: KeyboardInterrupt within about a second
        each time, and rank 1's next collective on that group fails at once naming rank 0
    chorus-run -n 2 --hang-seconds 1 --hang-action stop -- python check_user_reports.py hang
        rank 1 stalls before all_reduce: chorus-run's hang watch gives the verdict
        (hang_watch_test.sh); hang_subgroup: the same in a group of new_group
"""

import datetime
import os
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import rank_harness as h


def init_capturing_stderr(timeout_s):
    """h.init, with what the backend prints on stderr meanwhile returned (and passed on)."""
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(f.fileno(), 2)
        try:
            rank, size = h.init(timeout_s=timeout_s)
            # The backend's communicator exists once a collective ran (lazy on some versions).
            dist.barrier()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    sys.stderr.write(text)
    return rank, size, text


def timeout():
    chorus_s = float(os.environ["CHORUS_TIMEOUT"])
    rank, size, said = init_capturing_stderr(timeout_s=60.0)
    if rank == 0:
        h.expect(f"time out after {chorus_s:g} s" in said,
                 f"rank 0 did not say at init that CHORUS_TIMEOUT applies: {said!r}")
    if rank == 1:
        time.sleep(chorus_s + 6)  # never joins; leaves after rank 0 gave up
        os._exit(0)
    start = time.monotonic()
    err = h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(4)),
                          "all_reduce with a rank asleep past CHORUS_TIMEOUT",
                          within_s=chorus_s + 3.0)
    took = time.monotonic() - start
    h.say(f"after {took:.2f} s: {err}")
    h.expect(took >= chorus_s * 0.8, f"raised after {took:.2f} s, before CHORUS_TIMEOUT")
    h.expect(err is not None and "rank 1" in str(err), f"the error does not name rank 1: {err}")


def peer_raises():
    rank, size = h.init(timeout_s=60.0)
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        time.sleep(0.5)  # rank 0 waits in its all_reduce by now
        try:
            raise ValueError("a bug in rank 1's training code")
        finally:
            dist.destroy_process_group()
    start = time.monotonic()
    err = h.expect_raises(RuntimeError, lambda: dist.all_reduce(torch.ones(2)),
                          "all_reduce with a peer that raised", must_name="rank 1", within_s=5.0)
    h.say(f"after {time.monotonic() - start:.2f} s: {err}")
    text = str(err)
    h.expect("different numbers of collectives" not in text, f"the error guesses: {text}")
    h.expect("closed its communicator or exited" in text or "lost connection to rank 1" in text,
             f"the error does not say rank 1 left: {text}")


def interrupted(rank, group, what, block):
    """Rank 1 sends SIGINT to rank 0 blocked in block(); then rank 1's collective on the group
    fails at once (rank 0 aborted it)."""
    store = dist.distributed_c10d._get_default_store()
    key = f"chorus-test/sigint/{what}"
    if rank == 0:
        store.set(key + "/pid", str(os.getpid()))
        entered = time.time()
        try:
            block()
            h.fail(f"{what}: returned although rank 1 never joined")
        except KeyboardInterrupt:
            now = time.time()
            sent = float(store.get(key + "/sent"))
            h.say(f"{what}: KeyboardInterrupt {now - sent:.2f} s after SIGINT")
            h.expect(sent > entered, f"{what}: SIGINT came before the call (inconclusive)")
            h.expect(now - sent < 1.5, f"{what}: KeyboardInterrupt {now - sent:.2f} s after SIGINT")
        return
    pid = int(store.get(key + "/pid"))
    time.sleep(1.0)  # rank 0 is blocked by now
    store.set(key + "/sent", repr(time.time()))
    os.kill(pid, signal.SIGINT)
    time.sleep(2.5)  # rank 0 is interrupted by now (an all_reduce here would let its own end)
    # A first all_reduce might still complete with what rank 0 sent before it was interrupted;
    # the next cannot.
    def two():
        dist.all_reduce(torch.ones(2), group=group)
        dist.all_reduce(torch.ones(2), group=group)

    start = time.monotonic()
    err = h.expect_raises(RuntimeError, two,
                          f"{what}: rank 1's all_reduce after rank 0 was interrupted",
                          must_name="rank 0", within_s=5.0)
    h.say(f"{what}: rank 1 after {time.monotonic() - start:.2f} s: {err}")


def sigint():
    rank, size = h.init(timeout_s=60.0)
    g1, g2, g3 = (dist.new_group([0, 1]) for _ in range(3))
    interrupted(rank, g1, "blocking all_reduce", lambda: dist.all_reduce(torch.ones(2), group=g1))
    interrupted(rank, g2, "Work.wait",
                lambda: dist.all_reduce(torch.ones(2), group=g2, async_op=True).wait())
    interrupted(rank, g3, "Work.wait(timeout)",
                lambda: dist.all_reduce(torch.ones(2), group=g3, async_op=True).wait(
                    datetime.timedelta(seconds=30)))


def hang(subgroup=False):
    rank, size = h.init(timeout_s=60.0)
    group = dist.new_group(list(range(size))) if subgroup else None
    dist.all_reduce(torch.ones(2), group=group)
    if rank == 1:
        time.sleep(30)  # chorus-run --hang-action stop ends the job long before
    dist.all_reduce(torch.ones(2), group=group)
    h.fail("the job was not stopped")


def main():
    scenarios = {"timeout": timeout, "peer_raises": peer_raises, "sigint": sigint, "hang": hang,
                 "hang_subgroup": lambda: hang(subgroup=True)}
    scenarios[sys.argv[1]]()
    h.say(f"{h.checks} checks, {len(h.failures)} failed")
    sys.stdout.flush()
    # The groups have failed or were aborted: leave without tearing them down.
    os._exit(1 if h.failures else 0)


if __name__ == "__main__":
    main()

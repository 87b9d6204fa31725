#!/usr/bin/python3
"""One rank of 4 (run_ranks.py starts them, env://): subgroups after the default group shrank.

Groups A = [0, 1], B = [2, 3] and C = [1, 3]; rank 1 stops itself (SIGSTOP). The others' next
all-reduce on the default group fails once the heartbeat (CHORUS_HEARTBEAT_SECONDS) declares it
dead; they shrink (ranks 0, 2, 3 become 0, 1, 2). Then:
  - B, whose members both stayed, keeps working under their new global ranks:
    get_process_group_ranks(B) == [1, 2], dist.get_rank(B) as before, an all-reduce and a
    broadcast from global rank 2 (the old rank 3) give the right values;
  - A and C lost rank 1: their operations raise at once (the shrink aborted them), not after
    another heartbeat timeout (rank 1 stays stopped, its connections open, until rank 0 wakes it
    at the end: no launcher kills it meanwhile). Woken, it exits 0.
Rank 0 prints "subgroups after shrink: ok on 3 ranks".
"""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import chorus.torch


def fails_at_once(group, what):
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1), group=group)
    except Exception as e:  # noqa: BLE001  any error will do, but soon
        took = time.monotonic() - start
        assert took < 1.0, f"{what}: the all-reduce failed only after {took:.2f} s ({e})"
        return
    raise AssertionError(f"{what}: an all-reduce on a group that lost rank 1 succeeded")


def main():
    dist.init_process_group("chorus", timeout=datetime.timedelta(seconds=30))
    old = dist.get_rank()
    assert dist.get_world_size() == 4, "runs on 4 ranks"
    a, b, c = dist.new_group([0, 1]), dist.new_group([2, 3]), dist.new_group([1, 3])
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == 4
    # The heartbeat judges a rank by its last progress record: let the first ones be published
    # (every heartbeat timeout / 4) before rank 1 stops; one that never published is waited for.
    time.sleep(1.5)
    dist.all_reduce(t)
    store = dist.distributed_c10d._get_default_store()  # in rank 0, which stays
    if old == 1:
        store.set("check_subgroups/pid1", str(os.getpid()))
        os.kill(os.getpid(), signal.SIGSTOP)
        print("rank 1: woken after the others went on without it", flush=True)
        os._exit(0)  # its groups are gone: no orderly shutdown
    try:
        dist.all_reduce(torch.ones(1))
        raise AssertionError("the all-reduce with rank 1 stopped succeeded")
    except RuntimeError:
        pass
    m = chorus.torch.shrink()
    assert (m.size, m.lost_ranks) == (3, [1]), m
    assert dist.get_rank() == {0: 0, 2: 1, 3: 2}[old] and dist.get_world_size() == 3
    if old in (2, 3):
        ranks = dist.get_process_group_ranks(b)
        assert ranks == [1, 2], f"group B's global ranks {ranks}, expected [1, 2]"
        assert dist.get_rank(b) == old - 2, dist.get_rank(b)
        assert dist.get_global_rank(b, 1) == 2 and dist.get_group_rank(b, 1) == 0
        t = torch.tensor([float(old)])
        dist.all_reduce(t, group=b)
        assert t.item() == 5.0, t
        t = torch.tensor([float(old)])
        dist.broadcast(t, src=2, group=b)  # the global rank now of the old rank 3
        assert t.item() == 3.0, t
    if old == 0:
        fails_at_once(a, "group A (ranks 0, 1)")
    if old == 3:
        fails_at_once(c, "group C (ranks 1, 3)")
    ok = torch.ones(1)
    dist.all_reduce(ok)
    if dist.get_rank() == 0:
        print(f"subgroups after shrink: ok on {int(ok.item())} ranks", flush=True)
        os.kill(int(store.get("check_subgroups/pid1").decode()), signal.SIGCONT)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

"""What PyTorch's distributed_test.py found missing in backend "chorus", checked on their own.

    launch.py -n 3 -- check_suite_gaps.py sparse     all_reduce of sparse COO tensors
    launch.py -n 3 -- check_suite_gaps.py texts      the words of barrier timeouts and
                                                     monitored_barrier failures
    launch.py -n 4 -- check_suite_gaps.py groups     groups of one rank under the same name

sparse: the sum of every rank's entries, coalesced, on every rank, as one process computes it:
ranks with different numbers of entries (one with none), repeated indices (uncoalesced input),
dense dimensions, several dtypes, async; other ops and mismatched shapes raise on every rank.
texts: a barrier that runs out of time says "Timed out" and names the missing ranks;
monitored_barrier says "Rank 1 failed to pass monitoredBarrier" (rank 0),
"Ranks 1, 2 failed ..." (wait_all_ranks), "Rank 0 timed out in monitoredBarrier" (no time left)
and "Rank 2 successfully reached monitoredBarrier, but received errors while waiting for
send/recv from rank 0" (the others), each after the backend, the operation and the rank.
groups: new_subgroups(group_size=1, group=...) on the disjoint groups {0, 2} and {1, 3}, where
torch names the groups of one the same on both (and so gives them the same store prefix): every
rank gets its own, and collectives work on each level.
"""

import datetime
import sys
import time

import torch
import torch.distributed as dist

import rank_harness as h


def entries(rank, size, dense=(), dtype=torch.float32):
    """Rank r's sparse tensor of shape (size + 2, 3, *dense): r entries (rank 0 none), with
    index (0, 0) repeated, so the input is not coalesced."""
    idx = [[(r + rank) % (size + 2), r % 3] for r in range(rank)] + ([[0, 0]] if rank else [])
    n = len(idx)
    values = torch.arange(1, n + 1).reshape(n, *([1] * len(dense))).expand(n, *dense)
    values = (values * (rank + 1)).to(dtype).contiguous()
    indices = torch.tensor(idx, dtype=torch.int64).reshape(n, 2).t()
    return torch.sparse_coo_tensor(indices, values, (size + 2, 3, *dense), check_invariants=True)


def summed(tensors):
    """The coalesced sum, as one process computes it."""
    out = tensors[0]
    for t in tensors[1:]:
        out = out + t
    return out.coalesce()


def sparse():
    rank, size = h.init(timeout_s=20.0)
    for dense, dtype in [((), torch.float32), ((2,), torch.float64), ((), torch.int64)]:
        want = summed([entries(r, size, dense, dtype) for r in range(size)])
        t = entries(rank, size, dense, dtype)
        dist.all_reduce(t)
        h.expect(t.is_sparse and t.is_coalesced(), f"sparse {dtype} {dense}: not coalesced")
        h.expect_equal(t.to_dense(), want.to_dense(), f"sparse all_reduce {dtype} {dense}")
        h.expect_equal(t._indices(), want._indices(), f"sparse all_reduce {dtype} {dense} indices")
    # Async, and its future's value.
    t = entries(rank, size)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    want = summed([entries(r, size) for r in range(size)]).to_dense()
    h.expect_equal(t.to_dense(), want, "async sparse all_reduce")
    h.expect_equal(work.get_future().value()[0].to_dense(), want, "the future's value")
    # A subgroup of two ranks.
    g = dist.new_group([0, 1], backend="chorus")
    if rank < 2:
        t = entries(rank, size)
        dist.all_reduce(t, group=g)
        want = summed([entries(0, size), entries(1, size)]).to_dense()
        h.expect_equal(t.to_dense(), want, "sparse all_reduce on a subgroup")
    # Misuse: raises at once with the reason (every rank raises the same).
    h.expect_raises(ValueError, lambda: dist.all_reduce(entries(rank, size), op=dist.ReduceOp.MAX),
                    "sparse all_reduce with MAX", must_name="ReduceOp.SUM")
    shape = (size + 2 + (rank == size - 1), 3)
    bad = torch.sparse_coo_tensor(torch.zeros(2, 1, dtype=torch.int64), torch.ones(1), shape,
                                  check_invariants=True)
    h.expect_raises(ValueError, lambda: dist.all_reduce(bad), "sparse all_reduce of other shapes",
                    must_name=f"rank {size - 1}")
    # The group still works after the misuse.
    t = torch.ones(3)
    dist.all_reduce(t)
    h.expect_equal(t, torch.full((3,), float(size)), "all_reduce after the misuse")
    h.finish()


def texts():
    rank, size = h.init(timeout_s=20.0)
    store = dist.distributed_c10d._get_default_store()

    def meet(name):
        """Every rank waits for the others, through the store (not a collective)."""
        store.add(f"gaps/{name}", 1)
        deadline = time.monotonic() + 20
        while int(store.add(f"gaps/{name}", 0)) < size and time.monotonic() < deadline:
            time.sleep(0.01)

    # All present: monitored_barrier passes (first: a rank that skipped one, as below, is out of
    # step with the others' count of them afterwards).
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10), wait_all_ranks=True)
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))

    # A barrier on a group with a 1 s timeout that only rank 0 enters.
    g = dist.new_group(backend="chorus", timeout=datetime.timedelta(seconds=1))
    if rank == 0:
        start = time.monotonic()
        others = "rank 1" if size == 2 else "ranks " + ", ".join(map(str, range(1, size)))
        err = h.expect_raises(RuntimeError, lambda: dist.barrier(group=g), "barrier alone",
                              must_name=others, within_s=6)
        took = time.monotonic() - start
        h.expect(err is not None and " Timed out " in str(err),
                 f"a barrier timeout does not say ' Timed out ': {err}")
        h.expect(took >= 0.9, f"the barrier raised after {took:.2f} s, before its 1 s timeout")
        h.say(f"barrier: {err}")
    meet("barrier")

    # monitored_barrier: rank 1 stays away; rank 0 names it, the others report rank 0's verdict.
    if rank != 1:
        err = h.expect_raises(RuntimeError, lambda: dist.monitored_barrier(
            timeout=datetime.timedelta(seconds=0.5)), "monitored_barrier without rank 1",
            within_s=8)
        text = str(err)
        if rank == 0:
            want = "Rank 1 failed to pass monitoredBarrier"
        else:
            want = (f"Rank {rank} successfully reached monitoredBarrier, but received errors "
                    "while waiting for send/recv from rank 0")
        h.expect(want in text, f"monitored_barrier: {want!r} not in {text!r}")
        h.expect(f"monitored_barrier (rank {rank})" in text,
                 f"monitored_barrier: the text does not name the operation and rank: {text!r}")
        h.say(f"monitored_barrier: {text}")
    meet("monitored")
    if rank == 0:
        # Every other rank away, wait_all_ranks: all of them, in order.
        err = h.expect_raises(RuntimeError, lambda: dist.monitored_barrier(
            timeout=datetime.timedelta(seconds=0.3), wait_all_ranks=True),
            "monitored_barrier(wait_all_ranks) alone", within_s=5)
        others = ", ".join(str(r) for r in range(1, size))
        want = f"Rank{'s' if size > 2 else ''} {others} failed to pass monitoredBarrier"
        h.expect(err is not None and want in str(err), f"{want!r} not in {err}")
        # No time at all: rank 0 itself ran out.
        err = h.expect_raises(RuntimeError, lambda: dist.monitored_barrier(
            timeout=datetime.timedelta(seconds=0)), "monitored_barrier with no time", within_s=5)
        h.expect(err is not None and "Rank 0 timed out in monitoredBarrier" in str(err),
                 f"'Rank 0 timed out in monitoredBarrier' not in {err}")
    h.finish()


def groups():
    rank, size = h.init(timeout_s=20.0)
    pairs = [list(range(start, size, 2)) for start in (0, 1)]
    mine, _ = dist.new_subgroups_by_enumeration(ranks_per_subgroup_list=pairs, backend="chorus")
    single, singles = dist.new_subgroups(group_size=1, group=mine, backend="chorus")
    # (torch 2.7.1 returns a group of one for each of the 4 ranks here, 2.15.0 for each rank of
    # `group`; either way this rank's own has size one.)
    h.expect(single.size() == 1, f"a group of one has size {single.size()}")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=single)
    h.expect_equal(t, torch.full((3,), float(rank)), "all_reduce on a group of one")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=mine)
    h.expect_equal(t, torch.full((3,), float(sum(pairs[rank % 2]))), "all_reduce on the pair")
    for g in singles:
        dist.destroy_process_group(g)
    dist.destroy_process_group(mine)
    # The pairs are independent: without this, rank 0 (which hosts the env:// store) could leave
    # while the other pair still meets through the store.
    dist.barrier()
    h.finish()


if __name__ == "__main__":
    {"sparse": sparse, "texts": texts, "groups": groups}[sys.argv[1]]()

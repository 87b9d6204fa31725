"""What torch 2.x adds on backend "chorus", run by each rank of one world (torch 2.x only).

    launch.py -n N -- check_torch2.py [--backend chorus|cpu:chorus]

init_process_group with the backend string given (env://); new_group(backend="chorus") over every
rank, in reverse order and over a pair; all_gather_into_tensor and reduce_scatter_tensor (flat
and stacked) on each group; _coalescing_manager on its fast path (allreduce_coalesced and the
coalesced all-gather and reduce-scatter) and with a device (startCoalescing / endCoalescing);
the functional collectives of torch.distributed._functional_collectives; an operation torch waits
for at once (asyncOp=False) finished when the call returns, one with asyncOp=True runs in the
background. Every rank computes the
expected results itself from tensors.py's formulas, never through a backend.
"""

import argparse
import datetime
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import chorus.torch
import rank_harness as h
from tensors import ints

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
          torch.int8]
SIZES = [0, 1, 7, 131]
rank = size = 0
backend_arg = "chorus"
groups = []  # (name, group, global ranks in group-rank order)


def contribution(global_rank, count, dtype, salt=0):
    return ints(global_rank, count, salt=salt, dtype=dtype)


def reference_sum(members, count, dtype, salt=0):
    """The sum over `members` (global ranks), computed in int64, in `dtype`."""
    total = torch.zeros(count, dtype=torch.int64)
    for g in members:
        total += ints(g, count, salt=salt)
    return total.to(dtype)


def reference_max(members, count, dtype, salt=0):
    if count == 0:
        return torch.zeros(0, dtype=dtype)
    return torch.stack([ints(g, count, salt=salt) for g in members]).max(0).values.to(dtype)


def sequence(g):
    """Operations the group's chorus backend has issued so far."""
    return g._get_backend(torch.device("cpu"))._get_sequence_number_for_group()


def wrapped(g):
    """Whether TORCH_DISTRIBUTED_DEBUG=DETAIL wrapped the group's backend in a ProcessGroupWrapper."""
    wrapper = getattr(dist.distributed_c10d, "_ProcessGroupWrapper", None)
    return wrapper is not None and isinstance(g._get_backend(torch.device("cpu")), wrapper)


def unless_wrapper_lacks(g, what, fn):
    """Runs fn(); False where torch's ProcessGroupWrapper does not forward the operation.

    The wrapper of torch 2.7 forwards no coalesced all-gather or reduce-scatter (2.15's does):
    it raises "Backend chorus does not support ..." at once on every rank, before anything is
    sent, so the ranks stay in step and the check is skipped.
    """
    try:
        fn()
        return True
    except RuntimeError as e:
        if wrapped(g) and "does not support" in str(e):
            h.say(f"note: {what} skipped (torch's ProcessGroupWrapper): {str(e)[:120]}")
            return False
        raise


def init():
    global rank, size
    rank, size = h.rank_and_size()
    dist.init_process_group(backend_arg, timeout=datetime.timedelta(seconds=30))
    h.expect(dist.get_rank() == rank and dist.get_world_size() == size, "world rank and size")


def backend_mapping():
    world = dist.group.WORLD
    cpu = world._get_backend(torch.device("cpu"))
    h.expect(cpu.name() == "chorus", f"the world's CPU backend is chorus, not {cpu.name()}")
    h.expect(chorus.torch._is_chorus(None), "chorus.torch sees the world as a chorus group")
    want = "chorus" if backend_arg == "chorus" else backend_arg
    h.expect(str(dist.get_backend()) == want,
             f"get_backend() is {dist.get_backend()!r}, expected {want!r}")
    h.expect("cpu:chorus" in dist.get_backend_config(),
             f"get_backend_config() {dist.get_backend_config()!r} maps cpu to chorus")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    h.expect_equal(t, torch.full((3,), float(sum(range(size)))), "all_reduce on the world")
    h.expect(chorus.torch.last_algorithm() != "", "last_algorithm() after an all_reduce")


def new_groups():
    groups.clear()
    groups.append(("world", dist.group.WORLD, list(range(size))))
    everyone = dist.new_group(backend="chorus")
    groups.append(("new_group(all)", everyone, list(range(size))))
    rev = list(reversed(range(size)))
    reverse = dist.new_group(ranks=rev, backend="chorus")
    # The group's ranks follow the order of `ranks` only where torch keeps it; ask torch.
    groups.append(("new_group(reversed)", reverse,
                   [dist.get_global_rank(reverse, i) for i in range(size)]))
    if size >= 3:
        pair_ranks = [0, size - 1]
        pair = dist.new_group(ranks=pair_ranks, backend="chorus")
        if rank in pair_ranks:
            groups.append(("new_group(pair)", pair,
                           [dist.get_global_rank(pair, i) for i in range(2)]))
    for name, g, members in groups:
        cpu = g._get_backend(torch.device("cpu"))
        h.expect(cpu.name() == "chorus", f"{name}: CPU backend {cpu.name()}")
        h.expect(dist.get_world_size(g) == len(members), f"{name}: size")
        h.expect(members[dist.get_rank(g)] == rank, f"{name}: group rank of rank {rank}")
        t = contribution(rank, 9, torch.float32, salt=3)
        dist.all_reduce(t, group=g)
        h.expect_equal(t, reference_sum(members, 9, torch.float32, salt=3),
                       f"{name}: all_reduce SUM")


def into_tensor():
    for name, g, members in groups:
        n = len(members)
        me = dist.get_rank(g)
        for dtype in DTYPES:
            for count in SIZES:
                mine = contribution(rank, count, dtype)
                want = torch.cat([contribution(m, count, dtype) for m in members])
                flat = torch.empty(n * count, dtype=dtype)
                dist.all_gather_into_tensor(flat, mine, group=g)
                h.expect_equal(flat, want, f"{name}: all_gather_into_tensor {dtype} n={count}")
                stacked = torch.empty(n, count, dtype=dtype)
                work = dist.all_gather_into_tensor(stacked, mine, group=g, async_op=True)
                work.wait()
                h.expect_equal(stacked, want.view(n, count),
                               f"{name}: all_gather_into_tensor stacked async {dtype} n={count}")

                # reduce_scatter_tensor: every rank's input holds n blocks of `count`; block i
                # (salt i) goes, reduced, to group rank i.
                full = torch.cat([contribution(rank, count, dtype, salt=i) for i in range(n)])
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, full, group=g)
                h.expect_equal(out, reference_sum(members, count, dtype, salt=me),
                               f"{name}: reduce_scatter_tensor SUM {dtype} n={count}")
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, full.view(n, count), op=R.MAX, group=g)
                h.expect_equal(out, reference_max(members, count, dtype, salt=me),
                               f"{name}: reduce_scatter_tensor MAX stacked {dtype} n={count}")


def coalescing():
    for name, g, members in groups:
        n = len(members)
        me = dist.get_rank(g)
        # Fast path, synchronous: all_reduce only (one allreduce_coalesced), mixed dtypes.
        specs = [(torch.float32, 5, 0), (torch.int64, 0, 1), (torch.float32, 131, 2),
                 (torch.bfloat16, 3, 3)]
        ts = [contribution(rank, c, d, salt=s) for d, c, s in specs]
        seq = sequence(g)
        with dist._coalescing_manager(group=g):
            for t in ts:
                dist.all_reduce(t, group=g)
        h.expect(sequence(g) == seq + 1,
                 f"{name}: the coalesced all_reduces reach chorus as one operation "
                 f"(sequence {seq} -> {sequence(g)})")
        for (d, c, s), t in zip(specs, ts):
            h.expect_equal(t, reference_sum(members, c, d, salt=s),
                           f"{name}: coalesced all_reduce {d} n={c}")
        # Fast path, asynchronous: the coalesced all-gather, then the coalesced reduce-scatter.
        ins = [contribution(rank, c, d, salt=s) for d, c, s in specs]
        outs = [torch.empty(n * c, dtype=d) for d, c, _ in specs]

        def gather_coalesced():
            with dist._coalescing_manager(group=g, async_ops=True) as cm:
                for o, i in zip(outs, ins):
                    dist.all_gather_into_tensor(o, i, group=g)
            cm.wait()

        if unless_wrapper_lacks(g, f"{name}: coalesced all_gather_into_tensor", gather_coalesced):
            for (d, c, s), o in zip(specs, outs):
                want = torch.cat([contribution(m, c, d, salt=s) for m in members])
                h.expect_equal(o, want, f"{name}: coalesced all_gather_into_tensor {d} n={c}")
        fulls = [torch.cat([contribution(rank, c, d, salt=s + i) for i in range(n)])
                 for d, c, s in specs]
        outs = [torch.empty(c, dtype=d) for d, c, _ in specs]

        def reduce_scatter_coalesced():
            with dist._coalescing_manager(group=g, async_ops=True) as cm:
                for o, f in zip(outs, fulls):
                    dist.reduce_scatter_tensor(o, f, group=g)
            cm.wait()

        if unless_wrapper_lacks(g, f"{name}: coalesced reduce_scatter_tensor",
                                reduce_scatter_coalesced):
            for (d, c, s), o in zip(specs, outs):
                h.expect_equal(o, reference_sum(members, c, d, salt=s + me),
                               f"{name}: coalesced reduce_scatter_tensor {d} n={c}")
        # With a device: startCoalescing / endCoalescing around all_reduces (captured, issued as
        # one allreduce_coalesced) and broadcasts (issued one by one into the batch).
        a = contribution(rank, 7, torch.float64, salt=4)
        b = contribution(rank, 11, torch.int32, salt=5)
        c = contribution(rank, 6, torch.float32, salt=6)
        d = contribution(rank, 4, torch.int64, salt=7)
        with dist._coalescing_manager(group=g, device=torch.device("cpu"), async_ops=True) as cm:
            dist.all_reduce(a, group=g)
            dist.all_reduce(b, group=g)
        cm.wait()
        h.expect_equal(a, reference_sum(members, 7, torch.float64, salt=4),
                       f"{name}: all_reduce coalesced with a device, float64")
        h.expect_equal(b, reference_sum(members, 11, torch.int32, salt=5),
                       f"{name}: all_reduce coalesced with a device, int32")
        src = members[n - 1]
        with dist._coalescing_manager(group=g, device=torch.device("cpu")):
            dist.broadcast(c, src=src, group=g)
            dist.broadcast(d, src=members[0], group=g)
        h.expect_equal(c, contribution(src, 6, torch.float32, salt=6),
                       f"{name}: broadcast coalesced with a device (from the last rank)")
        h.expect_equal(d, contribution(members[0], 4, torch.int64, salt=7),
                       f"{name}: broadcast coalesced with a device (from the first rank)")
        # batch_isend_irecv: a ring in group ranks, one batch (coalesced by torch).
        send = contribution(rank, 9, torch.float32, salt=8)
        recv = torch.empty(9)
        left = members[(me - 1) % n]
        ops = [dist.P2POp(dist.isend, send, members[(me + 1) % n], group=g),
               dist.P2POp(dist.irecv, recv, left, group=g)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        h.expect_equal(recv, contribution(left, 9, torch.float32, salt=8),
                       f"{name}: batch_isend_irecv ring")


def functional():
    for name, g, members in groups:
        n = len(members)
        me = dist.get_rank(g)
        for dtype in [torch.float32, torch.float64, torch.bfloat16, torch.int64]:
            for count in [1, 7, 131]:
                mine = contribution(rank, count, dtype, salt=9)
                before = mine.clone()
                seq = sequence(g)
                out = funcol.wait_tensor(funcol.all_reduce(mine, "sum", g))
                h.expect(sequence(g) == seq + 1,
                         f"{name}: the functional all_reduce reaches chorus as one operation")
                h.expect_equal(out, reference_sum(members, count, dtype, salt=9),
                               f"{name}: functional all_reduce sum {dtype} n={count}")
                h.expect_equal(mine, before, f"{name}: functional all_reduce leaves its input")
                out = funcol.all_reduce(mine, "max", g)  # waited for when read
                h.expect_equal(out * 1, reference_max(members, count, dtype, salt=9),
                               f"{name}: functional all_reduce max {dtype} n={count}")
                got = []
                if unless_wrapper_lacks(g, f"{name}: functional all_gather_tensor", lambda: got.append(
                        funcol.wait_tensor(funcol.all_gather_tensor(mine, 0, g)))):
                    h.expect_equal(got[-1], torch.cat([contribution(m, count, dtype, salt=9)
                                                       for m in members]),
                                   f"{name}: functional all_gather_tensor {dtype} n={count}")
                full = torch.cat([contribution(rank, count, dtype, salt=10 + i) for i in range(n)])
                if unless_wrapper_lacks(g, f"{name}: functional reduce_scatter_tensor", lambda: got.append(
                        funcol.wait_tensor(funcol.reduce_scatter_tensor(full, "sum", 0, g)))):
                    h.expect_equal(got[-1], reference_sum(members, count, dtype, salt=10 + me),
                                   f"{name}: functional reduce_scatter_tensor {dtype} n={count}")
        # Several in flight, waited for in reverse order.
        ins = [contribution(rank, 5 + k, torch.float32, salt=k) for k in range(4)]
        outs = [funcol.all_reduce(t, "sum", g) for t in ins]
        for k in reversed(range(4)):
            h.expect_equal(funcol.wait_tensor(outs[k]),
                           reference_sum(members, 5 + k, torch.float32, salt=k),
                           f"{name}: functional all_reduce in flight #{k}")
        outs = funcol.all_reduce_coalesced(ins, "sum", g)
        for k, o in enumerate(outs):
            h.expect_equal(funcol.wait_tensor(o),
                           reference_sum(members, 5 + k, torch.float32, salt=k),
                           f"{name}: functional all_reduce_coalesced #{k}")


def waits_at_once():
    """An operation torch waits for at once (asyncOp=False, what dist.broadcast(async_op=False)
    passes) has finished when the backend's call returns: it ran on the caller's thread. One with
    asyncOp=True returns at once and finishes in the background. The last rank, the root, comes
    late, so that the others' calls can only finish once it has arrived."""
    g = dist.group.WORLD
    if size < 2 or wrapped(g):
        return  # the wrapper's own checks run first and wait for every rank
    backend = g._get_backend(torch.device("cpu"))
    late = size - 1
    for async_op in (False, True):
        opts = dist.BroadcastOptions()
        if not hasattr(opts, "asyncOp"):
            return  # this torch never says whether it waits
        opts.rootRank = late  # the others need its data
        opts.asyncOp = async_op
        t = torch.full((5,), float(rank))
        dist.barrier()
        if rank == late:
            time.sleep(0.5)
        t0 = time.monotonic()
        work = backend.broadcast([t], opts)
        took = time.monotonic() - t0
        done = work.is_completed()
        if rank != late and not async_op:
            h.expect(done and took > 0.3, f"broadcast with asyncOp=False returned after "
                     f"{took:.2f} s, completed {done}: it should run to the end in the call")
        if rank != late and async_op:
            h.expect(not done and took < 0.3, f"broadcast with asyncOp=True returned after "
                     f"{took:.2f} s, completed {done}: it should run in the background")
        work.wait()
        h.expect_equal(t, torch.full((5,), float(late)), f"broadcast with asyncOp={async_op}")


def main():
    global backend_arg
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="chorus", help='"chorus" or "cpu:chorus"')
    backend_arg = p.parse_args().backend
    init()
    h.say(f"world of {size}, backend {backend_arg!r}, torch {torch.__version__}")
    h.run(backend_mapping, new_groups, into_tensor, coalescing, functional, waits_at_once)
    h.finish()


if __name__ == "__main__":
    main()

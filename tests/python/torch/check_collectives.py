"""Every torch.distributed collective on backend "chorus", run by each rank of one world.

    launch.py -n N -- check_collectives.py [--init env|tcp|file|store]

Each rank knows what every other rank contributes (tensors.py), so it computes the expected
results itself and compares them with what the backend delivered.
"""

import argparse
import datetime

import torch
import torch.distributed as dist

import chorus.torch
import rank_harness as h
import work_and_misuse
from tensors import DTYPES, FLOATS, SIZES, avg_inputs, filled, ints, product_factors, strided

R = dist.ReduceOp
rank = size = 0


def layouts(t):
    """The tensor itself, and a non-contiguous copy of it."""
    return [("contiguous", t.clone()), ("strided", strided(t))]


# ---------------------------------------------------------------- all_reduce

def reduce_cases(dtype, count):
    """(op name, op, this rank's input, expected result) for every op that applies to dtype."""
    cases = []
    everyone = [filled(r, count, dtype) for r in range(size)]
    if dtype == torch.bool:
        stack = torch.stack(everyone) if count else torch.zeros(size, 0, dtype=torch.bool)
        any_, all_ = stack.any(0), stack.all(0)
        facs = [product_factors(r, count, dtype) for r in range(size)]
        fstack = torch.stack(facs) if count else torch.zeros(size, 0, dtype=torch.bool)
        # Logical reductions: SUM and MAX are OR, PRODUCT and MIN are AND.
        cases += [("SUM", R.SUM, everyone[rank], any_), ("MAX", R.MAX, everyone[rank], any_),
                  ("MIN", R.MIN, everyone[rank], all_),
                  ("PRODUCT", R.PRODUCT, facs[rank], fstack.all(0))]
        return cases
    wide = [ints(r, count, dtype=dtype).to(torch.int64) for r in range(size)]
    total = sum(wide)
    cases.append(("SUM", R.SUM, everyone[rank], total.to(dtype)))
    cases.append(("MIN", R.MIN, everyone[rank], torch.stack(wide).min(0).values.to(dtype)
                  if count else torch.zeros(0, dtype=dtype)))
    cases.append(("MAX", R.MAX, everyone[rank], torch.stack(wide).max(0).values.to(dtype)
                  if count else torch.zeros(0, dtype=dtype)))
    facs = [product_factors(r, count, dtype).to(torch.int64) for r in range(size)]
    prod = torch.ones(count, dtype=torch.int64)
    for f in facs:
        prod = prod * f
    cases.append(("PRODUCT", R.PRODUCT, facs[rank].to(dtype), prod.to(dtype)))
    mine, mean = avg_inputs(rank, size, count, dtype)
    cases.append(("AVG", R.AVG, mine, mean))
    if dtype in FLOATS and hasattr(dist, "_make_nccl_premul_sum"):
        cases.append(("PREMUL_SUM(0.5)", dist._make_nccl_premul_sum(0.5), everyone[rank],
                      (total.double() * 0.5).to(dtype)))
    return cases


def all_reduce():
    for dtype in DTYPES:
        for count in SIZES:
            for name, op, mine, want in reduce_cases(dtype, count):
                for layout, t in layouts(mine):
                    dist.all_reduce(t, op=op)
                    h.expect_equal(t, want, f"all_reduce {name} {dtype} n={count} {layout}")
    if hasattr(dist, "_make_nccl_premul_sum"):
        # The factor given as a tensor rather than a number: one tensor on torch 2.x, a list of
        # them (one per input tensor) on 1.13.
        t = filled(rank, 6, torch.float64)
        factor = torch.tensor([0.25], dtype=torch.float64)
        if int(torch.__version__.split(".")[0]) < 2:
            factor = [factor]
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        h.expect_equal(t, sum(ints(r, 6) for r in range(size)).double() * 0.25,
                       "all_reduce PREMUL_SUM with a tensor factor")
    else:
        h.say("note: PREMUL_SUM skipped: this torch has no dist._make_nccl_premul_sum")
    # Complex tensors: torch reduces them as their real view (SUM only).
    z = torch.tensor([complex(rank, -rank), complex(1, 2)], dtype=torch.complex64)
    dist.all_reduce(z)
    s = float(sum(range(size)))
    h.expect_equal(z, torch.tensor([complex(s, -s), complex(size, 2 * size)],
                                   dtype=torch.complex64), "all_reduce SUM complex64")
    # A float average that is not exact: within rounding of the float64 one.
    t = torch.full((5,), float(rank + 1) / 3.0)
    dist.all_reduce(t, op=R.AVG)
    want = torch.full((5,), sum((r + 1) / 3.0 for r in range(size)) / size, dtype=torch.float32)
    h.expect_equal(t, want, "all_reduce AVG float32 inexact", atol=1e-6, rtol=1e-6)
    # A larger prime size, where the algorithms split the work into blocks and segments.
    count = 100003
    t = filled(rank, count, torch.float32)
    dist.all_reduce(t)
    want = sum(ints(r, count) for r in range(size)).to(torch.float32)
    h.expect_equal(t, want, f"all_reduce SUM float32 n={count}")


def all_reduce_async():
    """Many operations in flight at once, waited for in reverse order: each gets its own result."""
    works = []
    for dtype in DTYPES:
        for name, op, mine, want in reduce_cases(dtype, 7):
            t = mine.clone()
            works.append((dist.all_reduce(t, op=op, async_op=True), t, want, f"{name} {dtype}"))
    for work, t, want, what in reversed(works):
        work.wait()
        h.expect_equal(t, want, f"async all_reduce {what}")
    # Different collectives in flight together, waited for out of order.
    a = filled(rank, 11, torch.float32)
    b = filled(rank, 5, torch.int64, salt=1)
    gathered = torch.empty(5 * size, dtype=torch.int64)
    c = filled(rank, 3, torch.float16, salt=2)
    works = [dist.all_reduce(a, async_op=True),
             dist.all_gather_into_tensor(gathered, b, async_op=True),
             dist.broadcast(c, src=size - 1, async_op=True),
             dist.barrier(async_op=True)]
    for w in works[::-1]:
        w.wait()
    h.expect_equal(a, sum(ints(r, 11) for r in range(size)).float(), "mixed async all_reduce")
    h.expect_equal(gathered, torch.cat([filled(r, 5, torch.int64, salt=1) for r in range(size)]),
                   "mixed async all_gather_into_tensor")
    h.expect_equal(c, filled(size - 1, 3, torch.float16, salt=2), "mixed async broadcast")


def large():
    """Sizes past the small-message paths: the algorithms split the work into blocks."""
    count = 100003  # prime
    t = filled(rank, count, torch.float32)
    dist.broadcast(t, src=size - 1)
    h.expect_equal(t, filled(size - 1, count, torch.float32), f"broadcast n={count}")
    out = torch.empty(size * count, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(out, filled(rank, count, torch.bfloat16))
    h.expect_equal(out, torch.cat([filled(r, count, torch.bfloat16) for r in range(size)]),
                   f"all_gather_into_tensor n={count}")
    full = torch.cat([filled(rank, count, torch.int32, salt=p) for p in range(size)])
    out = torch.empty(count, dtype=torch.int32)
    dist.reduce_scatter_tensor(out, full)
    h.expect_equal(out, sum(ints(r, count, salt=rank) for r in range(size)).int(),
                   f"reduce_scatter_tensor n={count}")
    t = filled(rank, count, torch.float64)
    dist.all_reduce(t, op=R.MAX)
    h.expect_equal(t, torch.stack([ints(r, count) for r in range(size)]).max(0).values.double(),
                   f"all_reduce MAX n={count}")


def torch_semantics():
    """Integer sums wrap as torch's own arithmetic does; 0-dim tensors; irecv's source rank."""
    for dtype, v in [(torch.int8, 100), (torch.uint8, 200), (torch.int32, 2**31 - 10)]:
        t = torch.full((3,), v, dtype=dtype)
        dist.all_reduce(t)
        want = (torch.full((3,), v, dtype=torch.int64) * size).to(dtype)
        h.expect_equal(t, want, f"all_reduce SUM wrapping {dtype}")
    t = torch.full((2,), 60000.0, dtype=torch.float16)
    dist.all_reduce(t)
    want = torch.full((2,), 60000.0 * size).to(torch.float16)  # inf from 2 ranks on
    h.expect_equal(t, want, "all_reduce SUM float16 overflowing")
    x = torch.tensor(float(rank))
    dist.all_reduce(x)
    h.expect_equal(x, torch.tensor(float(sum(range(size)))), "all_reduce of a 0-dim tensor")
    outs = [torch.empty(()) for _ in range(size)]
    dist.all_gather(outs, torch.tensor(float(rank) + 1))
    h.expect_equal(torch.stack(outs), torch.arange(1, size + 1, dtype=torch.float32),
                   "all_gather of 0-dim tensors")
    if size >= 2 and rank == 0:
        w = dist.irecv(torch.empty(2), src=1)
        w.wait()
        h.expect(w.source_rank() == 1, f"irecv source_rank {w.source_rank()}")
    elif size >= 2 and rank == 1:
        dist.send(torch.ones(2), dst=0)


def backend_queries():
    """chorus.torch's helpers on the world group."""
    dist.all_reduce(torch.ones(4))
    algo = chorus.torch.last_algorithm()
    h.expect(isinstance(algo, str) and algo != "", f"last_algorithm {algo!r}")
    for peer in range(size):
        how = chorus.torch.transport_to(peer)
        want = {"self"} if peer == rank else {"shm", "tcp"}
        h.expect(how in want, f"transport_to({peer}) = {how!r}")


def all_reduce_coalesced():
    for dtype in [torch.float32, torch.int32, torch.bfloat16]:
        tensors = [filled(rank, c, dtype, salt=c) for c in (3, 0, 11)]
        tensors.append(strided(filled(rank, 5, dtype, salt=5)))
        wants = [sum(ints(r, t.numel(), salt=t.numel() if t.numel() != 5 else 5)
                     for r in range(size)).to(dtype) for t in tensors]
        dist.all_reduce_coalesced(tensors, op=R.SUM)
        for i, (t, want) in enumerate(zip(tensors, wants)):
            h.expect_equal(t, want, f"all_reduce_coalesced {dtype} tensor {i}")
    tensors = [filled(rank, 4, torch.float64), filled(rank, 9, torch.float64, salt=1)]
    work = dist.all_reduce_coalesced(tensors, op=R.MAX, async_op=True)
    work.wait()
    h.expect_equal(tensors[1], torch.stack([ints(r, 9, 1) for r in range(size)]).max(0).values
                   .double(), "async all_reduce_coalesced MAX float64")


# ---------------------------------------------------------------- rooted and data-moving

def broadcast():
    for dtype in DTYPES:
        for count in SIZES:
            for root in range(size):
                for layout, t in layouts(filled(rank, count, dtype, salt=root)):
                    dist.broadcast(t, src=root)
                    h.expect_equal(t, filled(root, count, dtype, salt=root),
                                   f"broadcast {dtype} n={count} root {root} {layout}")
    t = filled(rank, 17, torch.float32)
    dist.broadcast(t, src=size - 1, async_op=True).wait()
    h.expect_equal(t, filled(size - 1, 17, torch.float32), "async broadcast")


def reduce():
    for dtype in DTYPES:
        for count in [1, 7]:
            for name, op, mine, want in reduce_cases(dtype, count):
                for root in range(size):
                    for layout, t in layouts(mine):
                        dist.reduce(t, dst=root, op=op)
                        if rank == root:
                            h.expect_equal(t, want, f"reduce {name} {dtype} root {root} {layout}")
                        else:  # the backend leaves the other ranks' tensors as they were
                            h.expect_equal(t, mine, f"reduce {name} {dtype} root {root} "
                                           f"{layout}: non-root input changed")
    t = filled(rank, 13, torch.float64)
    dist.reduce(t, dst=0, async_op=True).wait()
    if rank == 0:
        h.expect_equal(t, sum(ints(r, 13) for r in range(size)).double(), "async reduce")


def all_gather():
    for dtype in DTYPES:
        for count in SIZES:
            mine = filled(rank, count, dtype)
            outs = [torch.empty(count, dtype=dtype) for _ in range(size)]
            outs[-1] = strided(outs[-1])  # one non-contiguous output
            dist.all_gather(outs, strided(mine) if count % 2 else mine)
            for r in range(size):
                h.expect_equal(outs[r], filled(r, count, dtype), f"all_gather {dtype} n={count} "
                               f"from {r}")
    # 2-D tensors, async
    mine = filled(rank, 12, torch.int32).reshape(3, 4)
    outs = [torch.empty(3, 4, dtype=torch.int32) for _ in range(size)]
    dist.all_gather(outs, mine, async_op=True).wait()
    for r in range(size):
        h.expect_equal(outs[r], filled(r, 12, torch.int32).reshape(3, 4), f"async all_gather {r}")


def all_gather_into_tensor():
    for dtype in DTYPES:
        for count in SIZES:
            want = torch.cat([filled(r, count, dtype) for r in range(size)])
            out = torch.empty(size * count, dtype=dtype)
            dist.all_gather_into_tensor(out, filled(rank, count, dtype))
            h.expect_equal(out, want, f"all_gather_into_tensor {dtype} n={count}")
            # In place: the input is this rank's block of the output.
            out = torch.zeros(size * count, dtype=dtype)
            block = out[rank * count:(rank + 1) * count]
            block.copy_(filled(rank, count, dtype))
            dist.all_gather_into_tensor(out, block)
            h.expect_equal(out, want, f"all_gather_into_tensor in place {dtype} n={count}")
    # A 2-D output (size x count), non-contiguous input, async.
    out = torch.empty(size, 7, dtype=torch.float16)
    dist.all_gather_into_tensor(out, strided(filled(rank, 7, torch.float16)),
                                async_op=True).wait()
    h.expect_equal(out, torch.stack([filled(r, 7, torch.float16) for r in range(size)]),
                   "all_gather_into_tensor 2-D strided input async")


def all_gather_coalesced():
    for dtype in [torch.float32, torch.uint8, torch.bool, torch.bfloat16]:
        inputs = [filled(rank, 3, dtype), filled(rank, 0, dtype), filled(rank, 6, dtype, 1)
                  .reshape(2, 3)]
        outputs = [[torch.empty_like(t) for t in inputs] for _ in range(size)]
        dist.all_gather_coalesced(outputs, inputs)
        for r in range(size):
            wants = [filled(r, 3, dtype), filled(r, 0, dtype), filled(r, 6, dtype, 1).reshape(2, 3)]
            for i, want in enumerate(wants):
                h.expect_equal(outputs[r][i], want, f"all_gather_coalesced {dtype} rank {r} "
                               f"tensor {i}")


def reduce_scatter():
    for dtype in DTYPES:
        for count in [0, 1, 7]:
            for name, op, _, _ in reduce_cases(dtype, count):
                if name in ("AVG", "PRODUCT"):
                    continue  # covered by all_reduce; the inputs below are the plain ones
                inputs = [filled(rank, count, dtype, salt=p) for p in range(size)]
                inputs[-1] = strided(inputs[-1])
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter(out, inputs, op=op)
                contributions = [filled(r, count, dtype, salt=rank) for r in range(size)]
                want = combine(name, contributions, dtype, count)
                h.expect_equal(out, want, f"reduce_scatter {name} {dtype} n={count}")


def combine(name, tensors, dtype, count):
    """The reduction of same-shaped tensors, computed wide."""
    if count == 0:
        return torch.zeros(0, dtype=dtype)
    if dtype == torch.bool:
        stack = torch.stack(tensors)
        return stack.any(0) if name in ("SUM", "MAX") else stack.all(0)
    stack = torch.stack([t.to(torch.int64) for t in tensors])
    if name == "SUM":
        return stack.sum(0).to(dtype)
    if name.startswith("PREMUL"):
        return (stack.sum(0).double() * 0.5).to(dtype)
    if name == "MIN":
        return stack.min(0).values.to(dtype)
    if name == "MAX":
        return stack.max(0).values.to(dtype)
    raise AssertionError(name)


def reduce_scatter_tensor():
    for dtype in DTYPES:
        for count in SIZES:
            for name in ["SUM", "MAX"] + (["PREMUL_SUM"] if dtype in FLOATS else []):
                op = {"SUM": R.SUM, "MAX": R.MAX}.get(name) or dist._make_nccl_premul_sum(0.5)
                full = torch.cat([filled(rank, count, dtype, salt=p) for p in range(size)])
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, full, op=op)
                want = combine(name, [filled(r, count, dtype, salt=rank) for r in range(size)],
                               dtype, count)
                h.expect_equal(out, want, f"reduce_scatter_tensor {name} {dtype} n={count}")
                # In place: the output is this rank's block of the input.
                block = full[rank * count:(rank + 1) * count]
                dist.reduce_scatter_tensor(block, full, op=op)
                h.expect_equal(block, want, f"reduce_scatter_tensor in place {name} {dtype} "
                               f"n={count}")
    # 2-D input (size x 5), non-contiguous output, async.
    full = torch.stack([filled(rank, 5, torch.float32, salt=p) for p in range(size)])
    out = strided(torch.zeros(5))
    dist.reduce_scatter_tensor(out, full, async_op=True).wait()
    h.expect_equal(out, sum(ints(r, 5, salt=rank) for r in range(size)).float(),
                   "reduce_scatter_tensor 2-D async strided output")


def gather():
    for dtype in DTYPES:
        for count in [0, 1, 7]:
            for root in range(size):
                outs = None
                if rank == root:
                    outs = [torch.empty(count, dtype=dtype) for _ in range(size)]
                    outs[0] = strided(outs[0])
                mine = filled(rank, count, dtype, salt=root)
                dist.gather(strided(mine) if root % 2 else mine, outs, dst=root)
                if rank == root:
                    for r in range(size):
                        h.expect_equal(outs[r], filled(r, count, dtype, salt=root),
                                       f"gather {dtype} n={count} root {root} from {r}")


def scatter():
    for dtype in DTYPES:
        for count in [0, 1, 7]:
            for root in range(size):
                ins = None
                if rank == root:
                    ins = [filled(p, count, dtype, salt=root + 1) for p in range(size)]
                    ins[0] = strided(ins[0])
                out = strided(torch.zeros(count, dtype=dtype)) if root % 2 else \
                    torch.zeros(count, dtype=dtype)
                dist.scatter(out, ins, src=root)
                h.expect_equal(out, filled(rank, count, dtype, salt=root + 1),
                               f"scatter {dtype} n={count} root {root}")


def a2a_count(src, dst):
    """Elements (or rows) rank src sends to rank dst: uneven, zero for some pairs."""
    return (src * 3 + dst * 5) % 4


def all_to_all():
    for dtype in [torch.float32, torch.int8, torch.bool, torch.float16]:
        ins = [filled(rank, a2a_count(rank, p), dtype, salt=p) for p in range(size)]
        outs = [torch.empty(a2a_count(p, rank), dtype=dtype) for p in range(size)]
        dist.all_to_all(outs, ins)
        for p in range(size):
            h.expect_equal(outs[p], filled(p, a2a_count(p, rank), dtype, salt=rank),
                           f"all_to_all {dtype} from {p}")


def all_to_all_single():
    for dtype in [torch.float64, torch.uint8, torch.bool, torch.bfloat16]:
        # Equal parts: 3 elements for every peer.
        full = torch.cat([filled(rank, 3, dtype, salt=p) for p in range(size)])
        out = torch.empty(3 * size, dtype=dtype)
        dist.all_to_all_single(out, full)
        want = torch.cat([filled(p, 3, dtype, salt=rank) for p in range(size)])
        h.expect_equal(out, want, f"all_to_all_single equal {dtype}")
        # Split sizes count rows of a 2-D tensor (rows of 2 elements).
        ins = [filled(rank, 2 * a2a_count(rank, p), dtype, salt=p).reshape(-1, 2)
               for p in range(size)]
        full = torch.cat(ins)
        in_splits = [a2a_count(rank, p) for p in range(size)]
        out_splits = [a2a_count(p, rank) for p in range(size)]
        out = torch.empty(sum(out_splits), 2, dtype=dtype)
        dist.all_to_all_single(out, full, output_split_sizes=out_splits,
                               input_split_sizes=in_splits)
        want = torch.cat([filled(p, 2 * a2a_count(p, rank), dtype, salt=rank).reshape(-1, 2)
                          for p in range(size)])
        h.expect_equal(out, want, f"all_to_all_single with split sizes {dtype}")
    # Non-contiguous input, async.
    full = strided(torch.cat([filled(rank, 2, torch.int64, salt=p) for p in range(size)]))
    out = torch.empty(2 * size, dtype=torch.int64)
    dist.all_to_all_single(out, full, async_op=True).wait()
    h.expect_equal(out, torch.cat([filled(p, 2, torch.int64, salt=rank) for p in range(size)]),
                   "all_to_all_single strided async")


def send_recv():
    if size == 1:
        return
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for dtype in DTYPES:
        for count in [0, 1, 7, 1031]:
            # A ring with isend / irecv: every rank sends and receives at once.
            got = torch.empty(count, dtype=dtype)
            recv_buf = strided(got) if count % 2 else got
            works = [dist.isend(filled(rank, count, dtype, salt=nxt), dst=nxt),
                     dist.irecv(recv_buf, src=prv)]
            for w in works:
                w.wait()
            h.expect_equal(recv_buf, filled(prv, count, dtype, salt=rank),
                           f"isend/irecv ring {dtype} n={count}")
    # Blocking send / recv between pairs, several messages kept in order.
    if rank % 2 == 0 and rank + 1 < size:
        for k in range(3):
            dist.send(filled(rank, 5 + k, torch.int32, salt=k), dst=rank + 1)
        back = torch.empty(4, dtype=torch.float32)
        dist.recv(back, src=rank + 1)
        h.expect_equal(back, filled(rank + 1, 4, torch.float32), "recv reply")
    elif rank % 2 == 1:
        for k in range(3):
            t = torch.empty(5 + k, dtype=torch.int32)
            src = dist.recv(t, src=rank - 1)
            h.expect(src == rank - 1, f"recv returned source {src}")
            h.expect_equal(t, filled(rank - 1, 5 + k, torch.int32, salt=k), f"recv message {k}")
        dist.send(filled(rank, 4, torch.float32), dst=rank - 1)
    # batch_isend_irecv: the ring again, as one batch.
    got = torch.empty(6, dtype=torch.float64)
    ops = [dist.P2POp(dist.isend, filled(rank, 6, torch.float64), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    h.expect_equal(got, filled(prv, 6, torch.float64), "batch_isend_irecv ring")
    # The receive listed first on every rank, small and larger than the transport buffers (a
    # 2 MiB message): the sends issued after the receives run with them.
    for count in (3, 1 << 19):
        got = torch.empty(count, dtype=torch.float32)
        ops = [dist.P2POp(dist.irecv, got, prv),
               dist.P2POp(dist.isend, filled(rank, count, torch.float32), nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        h.expect_equal(got, filled(prv, count, torch.float32), f"receive-first batch n={count}")


def barriers():
    for _ in range(3):
        dist.barrier()
    dist.barrier(async_op=True).wait()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=20))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=20), wait_all_ranks=True)


# ---------------------------------------------------------------- objects

def objects():
    mine = {"rank": rank, "payload": list(range(rank + 1)), "text": "x" * (rank * 50)}
    gathered = [None] * size
    dist.all_gather_object(gathered, mine)
    for r in range(size):
        h.expect(gathered[r] == {"rank": r, "payload": list(range(r + 1)), "text": "x" * (r * 50)},
                 f"all_gather_object from {r}: {gathered[r]!r}")
    for root in range(size):
        objs = [f"from {root}", {root: [1, 2]}, None] if rank == root else [None, None, None]
        dist.broadcast_object_list(objs, src=root)
        h.expect(objs == [f"from {root}", {root: [1, 2]}, None], f"broadcast_object_list {objs}")
    root = size - 1
    out = [None] * size if rank == root else None
    dist.gather_object(("g", rank, "y" * rank), out, dst=root)
    if rank == root:
        h.expect(out == [("g", r, "y" * r) for r in range(size)], f"gather_object {out}")
    got = [None]
    dist.scatter_object_list(got, [{"to": p, "v": [p] * p} for p in range(size)]
                             if rank == 0 else None, src=0)
    h.expect(got[0] == {"to": rank, "v": [rank] * rank}, f"scatter_object_list {got}")


# ---------------------------------------------------------------- groups

def groups():
    """Subsets and overlapping groups; every rank creates every group, as torch requires."""
    specs = {"self": [rank], "evens": list(range(0, size, 2)), "reversed": list(range(size))[::-1]}
    if size >= 3:
        specs["low"] = [0, 1]
        specs["high"] = [1, 2]  # overlaps "low" on rank 1
    made = {}
    for name in ["evens", "reversed", "low", "high"]:
        if name in specs:
            made[name] = dist.new_group(specs[name], timeout=datetime.timedelta(seconds=30))
    # one group per rank: each rank alone (every rank calls new_group for each of them)
    singles = [dist.new_group([r]) for r in range(size)]
    made["self"] = singles[rank]

    for name, g in made.items():
        members = sorted(specs[name])
        if rank not in members:
            h.expect(g == dist.GroupMember.NON_GROUP_MEMBER, f"group {name}: non-member handle")
            continue
        h.expect(dist.get_world_size(g) == len(members), f"group {name}: size")
        h.expect(dist.get_rank(g) == members.index(rank), f"group {name}: rank "
                 f"{dist.get_rank(g)}")
        h.expect(dist.get_backend(g) == "chorus", f"group {name}: backend {dist.get_backend(g)}")
        t = filled(rank, 9, torch.int64)
        dist.all_reduce(t, group=g)
        h.expect_equal(t, sum(ints(r, 9) for r in members), f"group {name}: all_reduce")
        src = members[-1]  # a global rank
        t = filled(rank, 4, torch.float32)
        dist.broadcast(t, src=src, group=g)
        h.expect_equal(t, filled(src, 4, torch.float32), f"group {name}: broadcast from {src}")
        outs = [torch.empty(3, dtype=torch.int16) for _ in members]
        dist.all_gather(outs, filled(rank, 3, torch.int16), group=g)
        for i, r in enumerate(members):
            h.expect_equal(outs[i], filled(r, 3, torch.int16), f"group {name}: all_gather {r}")
        # Roots are global ranks; torch maps them to the group's ranks.
        t = filled(rank, 5, torch.int32)
        dist.reduce(t, dst=src, op=R.MAX, group=g)
        if rank == src:
            h.expect_equal(t, torch.stack([ints(r, 5) for r in members]).max(0).values.int(),
                           f"group {name}: reduce MAX to {src}")
        out = torch.empty(2, dtype=torch.float64)
        first = members[0]
        dist.scatter(out, [filled(r, 2, torch.float64, salt=7) for r in members]
                     if rank == first else None, src=first, group=g)
        h.expect_equal(out, filled(rank, 2, torch.float64, salt=7),
                       f"group {name}: scatter from {first}")
        objs = [None] * len(members)
        dist.all_gather_object(objs, ("member", rank), group=g)
        h.expect(objs == [("member", r) for r in members], f"group {name}: all_gather_object")
        dist.barrier(group=g)

    if "low" in made and rank in (0, 1, 2):
        # Rank 1 has operations of both overlapping groups in flight at once.
        pending = []
        for name in ("low", "high"):
            if rank in specs[name]:
                t = filled(rank, 5, torch.float32, salt=len(name))
                pending.append((name, t, dist.all_reduce(t, group=made[name], async_op=True)))
        for name, t, w in reversed(pending):
            w.wait()
            h.expect_equal(t, sum(ints(r, 5, salt=len(name)) for r in specs[name]).float(),
                           f"overlapping group {name}: async all_reduce")
    # The world group still works after the subgroups.
    t = torch.ones(2)
    dist.all_reduce(t)
    h.expect_equal(t, torch.full((2,), float(size)), "world after groups")
    for g in made.values():
        if g != dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(g)


# ---------------------------------------------------------------- Work

def main():
    global rank, size
    p = argparse.ArgumentParser()
    p.add_argument("--init", default="env", choices=["env", "tcp", "file", "store"])
    args = p.parse_args()
    rank, size = h.init(timeout_s=30, method=args.init)
    work_and_misuse.rank, work_and_misuse.size = rank, size
    h.say(f"world of {size}, init {args.init}")
    h.run(backend_queries, torch_semantics, all_reduce, all_reduce_async, large,
          all_reduce_coalesced, broadcast, reduce, all_gather, all_gather_into_tensor,
          all_gather_coalesced, reduce_scatter, reduce_scatter_tensor, gather, scatter, all_to_all,
          all_to_all_single, send_recv, barriers, objects, groups, work_and_misuse.work_api,
          work_and_misuse.threads_and_lifetimes, work_and_misuse.misuse)
    h.finish()


if __name__ == "__main__":
    main()

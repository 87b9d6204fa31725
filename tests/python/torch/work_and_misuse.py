"""The Work API, threads and lifetimes, and misuse, on backend "chorus": the second half of
check_collectives.py's checks (it sets `rank` and `size` here before calling them).
"""

import datetime
import threading
import time

import torch
import torch.distributed as dist

import rank_harness as h
from tensors import filled, ints

R = dist.ReduceOp
rank = size = None  # set by check_collectives.main()


def work_api():
    t = filled(rank, 8, torch.float32)
    want = sum(ints(r, 8) for r in range(size)).float()
    w = dist.all_reduce(t, async_op=True)
    h.expect(w.wait() is True, "wait() returns True")
    h.expect(w.is_completed(), "is_completed after wait")
    h.expect(w.is_success(), "is_success after wait")
    try:  # torch 1.13's binding of Work.exception cannot convert its result, on every backend
        h.expect(w.exception() is None, "exception() after success")
    except TypeError as e:
        h.expect("exception_ptr" in str(e), f"exception(): {e}")
    h.expect_equal(t, want, "all_reduce waited on")
    res = w.result()
    h.expect(len(res) == 1 and res[0] is not None, f"result() {res}")
    h.expect_equal(res[0], want, "result()[0]")

    t = filled(rank, 8, torch.float32)
    w = dist.all_reduce(t, async_op=True)
    h.expect(w.wait(timeout=datetime.timedelta(seconds=20)), "wait(timeout)")
    h.expect_equal(t, want, "wait(timeout) result")

    t = filled(rank, 8, torch.float32)
    fut = dist.all_reduce(t, async_op=True).get_future()
    value = fut.wait()
    h.expect(isinstance(value, list) and len(value) == 1, f"future value {value!r}")
    h.expect_equal(value[0], want, "get_future().wait()")
    h.expect(fut.done(), "future done")

    t = filled(rank, 8, torch.float32)
    doubled = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    h.expect_equal(doubled.wait(), want * 2, "get_future().then()")

    # Futures of other collectives, and a future asked for after completion.
    outs = [torch.empty(2) for _ in range(size)]
    w = dist.all_gather(outs, torch.full((2,), float(rank)), async_op=True)
    w.wait()
    got = w.get_future().wait()
    h.expect(len(got) == size, f"all_gather future holds {len(got)} tensors")
    for r in range(size):
        h.expect_equal(got[r], torch.full((2,), float(r)), f"all_gather future tensor {r}")
    w = dist.barrier(async_op=True)
    w.get_future().wait()
    h.expect(w.is_completed(), "barrier future")

    if size >= 2:
        wait_with_timeout()
    # is_completed polls without blocking; the work finishes on its own.
    t = filled(rank, 100003, torch.float32)
    w = dist.all_reduce(t, async_op=True)
    polled = w.is_completed()
    h.expect(polled in (True, False), "is_completed returns a bool")
    w.wait()
    h.expect(w.is_completed(), "is_completed after wait (large)")


def wait_with_timeout():
    """Rank 1 sends only after rank 0's wait(timeout) expired (told through the store): the
    operation goes on and a later wait() gets the data; a Python thread keeps running meanwhile
    (waiting frees the GIL)."""
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        store.wait(["chorus-test/late-send"])
        time.sleep(0.3)
        dist.send(filled(1, 6, torch.int32), dst=0)
    elif rank == 0:
        got = torch.zeros(6, dtype=torch.int32)
        w = dist.irecv(got, src=1)
        h.expect_raises(RuntimeError, lambda: w.wait(timeout=datetime.timedelta(milliseconds=100)),
                        "wait(timeout) expiring", within_s=2.0)
        h.expect(not w.is_completed(), "is_completed while the sender is late")
        store.set("chorus-test/late-send", "go")
        ticks = [0]
        stop = threading.Event()

        def count():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)

        counter = threading.Thread(target=count)
        counter.start()
        h.expect(w.wait(), "wait() after an expired wait(timeout)")
        stop.set()
        counter.join()
        # Holding the GIL, wait() would leave the thread a tick or two; free, it runs ~300.
        h.expect(ticks[0] > 5, f"a Python thread ran only {ticks[0]} times during wait()")
        h.expect_equal(got, filled(1, 6, torch.int32), "irecv after an expired wait(timeout)")
    dist.barrier()


def threads_and_lifetimes():
    """What DDP and comm hooks do: collectives from another thread and inside a future's callback,
    Works dropped before they finish, a group destroyed with work pending."""
    want = sum(ints(r, 9) for r in range(size)).float()
    # A Work dropped at once still delivers, in issue order with the next collective.
    t = filled(rank, 9, torch.float32)
    dist.all_reduce(t, async_op=True)
    dist.barrier()
    h.expect_equal(t, want, "all_reduce whose Work was dropped")
    # Issued from a thread other than the main one.
    box = {}

    def worker():
        x = filled(rank, 9, torch.float32)
        dist.all_reduce(x)
        box["x"] = x

    th = threading.Thread(target=worker)
    th.start()
    th.join(timeout=30)
    h.expect("x" in box, "all_reduce from another thread finished")
    if "x" in box:
        h.expect_equal(box["x"], want, "all_reduce from another thread")

    # A callback that runs another collective (blocking, then async) and waits for it, the way
    # torch's PowerSGD hook does.
    def blocking_inside(fut):
        z = fut.value()[0].clone()
        dist.all_reduce(z)
        return z

    def async_inside(fut):
        z = fut.value()[0].clone()
        dist.all_reduce(z, async_op=True).wait()
        return z * 10

    got = dist.all_reduce(filled(rank, 9, torch.float32), async_op=True).get_future() \
        .then(blocking_inside).wait()
    h.expect_equal(got, want * size, "a collective inside then()")
    got = dist.all_reduce(filled(rank, 9, torch.float32), async_op=True).get_future() \
        .then(async_inside).wait()
    h.expect_equal(got, want * size * 10, "an async collective waited inside then()")

    # A group destroyed with operations not waited for: no hang, and the world goes on.
    g = dist.new_group(list(range(size)))
    pending = [dist.all_reduce(torch.ones(50000), group=g, async_op=True) for _ in range(4)]
    start = time.monotonic()
    dist.destroy_process_group(g)
    h.expect(time.monotonic() - start < 10, "destroying a group with pending work")
    del pending
    t = torch.ones(3)
    dist.all_reduce(t)
    h.expect_equal(t, torch.full((3,), float(size)), "world after a destroyed busy group")


# ---------------------------------------------------------------- misuse

def misuse():
    """Each misuse raises on this rank before anything is sent; the group works afterwards."""
    t = torch.ones(4)
    bad = (ValueError, RuntimeError)
    h.expect_raises(bad, lambda: dist.broadcast(t, src=size), "broadcast root = size")
    h.expect_raises(bad, lambda: dist.broadcast(t, src=-1), "broadcast root -1")
    h.expect_raises(bad, lambda: dist.reduce(t, dst=size + 2), "reduce root")
    h.expect_raises(bad, lambda: dist.gather(t, [torch.ones(4)] * size if rank == size else None,
                                             dst=size), "gather root")
    h.expect_raises(bad, lambda: dist.scatter(t, None, src=size + 1), "scatter root")
    h.expect_raises(ValueError, lambda: dist.all_gather([torch.ones(4)] * (size + 1), t),
                    "all_gather list too long", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.all_gather([torch.ones(5)] * size, t),
                    "all_gather wrong output size", must_name="chorus")
    h.expect_raises((TypeError, ValueError, RuntimeError),  # torch itself checks this one
                    lambda: dist.all_gather([torch.ones(4, dtype=torch.int32)] * size, t),
                    "all_gather wrong output dtype")
    h.expect_raises((TypeError, ValueError, RuntimeError),
                    lambda: dist.all_gather_into_tensor(torch.ones(4 * size, dtype=torch.int32),
                                                        t),
                    "all_gather_into_tensor wrong output dtype", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.all_gather_into_tensor(torch.empty(4 * size + 1), t),
                    "all_gather_into_tensor wrong output size", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.reduce_scatter_tensor(torch.empty(4),
                                                                   torch.ones(4 * size + 3)),
                    "reduce_scatter_tensor wrong input size", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.reduce_scatter(t, [torch.ones(4)] * (size + 1)),
                    "reduce_scatter list too long", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.all_to_all([torch.ones(1)] * (size + 1),
                                                        [torch.ones(1)] * (size + 1)),
                    "all_to_all list too long", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.all_to_all_single(torch.empty(size), torch.ones(size),
                                                               [1] * size, [1] * (size + 1)),
                    "all_to_all_single split list too long", must_name="chorus")
    h.expect_raises(ValueError, lambda: dist.all_to_all_single(torch.empty(size),
                                                               torch.ones(size), [2] * size),
                    "all_to_all_single splits do not add up", must_name="chorus")
    if rank == 0:
        h.expect_raises(ValueError, lambda: dist.scatter(t, [torch.ones(4)] * (size + 1), src=0),
                        "scatter list too long", must_name="chorus")
        h.expect_raises(ValueError, lambda: dist.gather(t, [torch.ones(3)] * size, dst=0),
                        "gather wrong output size", must_name="chorus")
    for op in (R.BAND, R.BOR, R.BXOR):
        h.expect_raises((ValueError, RuntimeError),
                        lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=op),
                        f"all_reduce {op}", must_name="chorus")
    h.expect_raises((ValueError, RuntimeError),
                    lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=R.AVG),
                    "all_reduce AVG on bool", must_name="chorus")
    h.expect_raises((TypeError, RuntimeError),
                    lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)),
                    "all_reduce int16", must_name="chorus")
    h.expect_raises((TypeError, ValueError, RuntimeError),
                    lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32),
                                            op=dist._make_nccl_premul_sum(2.0)),
                    "PREMUL_SUM on int32", must_name="chorus")
    h.expect_raises((ValueError, RuntimeError), lambda: dist.send(t, dst=rank), "send to self")
    h.expect_raises(RuntimeError, lambda: dist.recv(t), "recv from any source",
                    must_name="chorus")
    h.expect_raises((ValueError, RuntimeError), lambda: dist.recv(t, src=size + 3),
                    "recv from a rank outside the group")
    # Tensors the backend cannot read: a meta tensor, a sparse one. (No CUDA on these machines;
    # a CUDA tensor takes the same check as the meta one.)
    meta = torch.empty(4, device="meta")
    meta_calls = [
            ("all_reduce", lambda: dist.all_reduce(meta)),
            ("broadcast", lambda: dist.broadcast(meta, src=0)),
            ("all_gather_coalesced", lambda: dist.all_gather_coalesced(
                [[torch.empty(4, device="meta")] for _ in range(size)], [meta])),
            ("all_reduce_coalesced", lambda: dist.all_reduce_coalesced([meta])),
            ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(
                torch.empty(4 * size, device="meta"), meta)),
    ]
    sparse = torch.eye(3).to_sparse()
    if int(torch.__version__.split(".")[0]) < 2:
        for name, fn in meta_calls:
            h.expect_raises((RuntimeError, NotImplementedError, ValueError), fn,
                            f"{name} on a meta tensor")
        h.expect_raises(RuntimeError, lambda: dist.all_reduce_coalesced([meta]),
                        "all_reduce_coalesced on a meta tensor names the backend",
                        must_name="chorus")
        h.expect_raises(RuntimeError, lambda: dist.all_reduce_coalesced([sparse]),
                        "sparse tensor", must_name="chorus")
    else:
        # torch 2.x dispatches on the tensors' device before any backend: its meta kernels
        # (all_reduce, broadcast, all_gather_into_tensor) return without communicating, and an
        # operator without a meta or sparse kernel raises NotImplementedError. Either way
        # nothing reaches the backend, which the all_reduce below confirms.
        for name, fn in meta_calls:
            try:
                fn()
            except (RuntimeError, NotImplementedError, ValueError):
                pass
        h.expect_raises(NotImplementedError, lambda: dist.all_reduce_coalesced([sparse]),
                        "sparse tensor")
    # Nothing was sent: the next collective matches on every rank.
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    h.expect_equal(t, torch.full((3,), float(sum(range(size)))), "all_reduce after misuse")

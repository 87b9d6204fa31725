"""One rank of the chorus._core tests; started N times by chorus-run (CHORUS_RANK, ...).

    chorus-run -n N -- python3 core_ranks.py collectives   # every collective x dtype x op
    chorus-run -n N -- python3 core_ranks.py failures      # misuse and failures

Every expected value is computed here with numpy from what each rank contributes; a wrong
value, a missing exception or an unexpected one fails the rank (exit status 1), and
chorus-run then fails the test. Exit status 77 (skipped) when numpy is missing.
"""

import os
import sys
import time

try:
    import numpy as np
except ImportError:
    print("numpy is missing (python3-numpy): skipped", file=sys.stderr)
    sys.exit(77)

import chorus

# The element types Chorus reduces, by numpy dtype; bfloat16 travels as uint16 with dtype="bf16".
REDUCE_TYPES = ["float32", "float64", "float16", "bf16", "int8", "uint8", "int32", "int64"]
OPS = ["sum", "prod", "min", "max", "avg"]
COUNTS = [0, 1, 7, 13, 1031]  # empty, single, odd, prime, and not a multiple of any rank count


# ---- Values and references ----------------------------------------------------------------


def contribution(rank, count, type_name, seed):
    """Rank `rank`'s values: small integers, so sums and products are exact in every type
    (products of up to 5 ranks stay within int8 and uint8)."""
    k = np.arange(count, dtype=np.int64) * 7 + rank * 3 + seed
    if type_name == "uint8":
        values = k % 3 + 1
    else:
        values = k % 5 - 2
    return values.astype(np.float64)


def to_buffer(values, type_name):
    """The buffer a rank passes: numpy in the type, or bfloat16 bits in a uint16 array."""
    if type_name == "bf16":
        bits = values.astype(np.float32).view(np.uint32) >> 16  # exact: small integers
        return bits.astype(np.uint16)
    return values.astype(type_name)


def from_buffer(buf, type_name):
    if type_name == "bf16":
        return (buf.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return buf.astype(np.float64)


def reference(type_name, op, count, size, seed):
    values = np.stack([contribution(r, count, type_name, seed) for r in range(size)])
    if op == "sum":
        return values.sum(axis=0)
    if op == "prod":
        return values.prod(axis=0)
    if op == "min":
        return values.min(axis=0)
    if op == "max":
        return values.max(axis=0)
    total = values.sum(axis=0)
    if type_name.startswith("int") or type_name == "uint8":
        return np.trunc(total / size)  # integer average truncates toward zero
    return total / size


def check(got_buf, type_name, want, what):
    got = from_buffer(got_buf, type_name)
    # Averages divide in the element type: half precision rounds to about 3 decimal digits.
    rtol = {"float16": 2e-3, "bf16": 1e-2, "float32": 1e-6}.get(type_name, 1e-12)
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=0):
        bad = np.flatnonzero(~np.isclose(got, want, rtol=rtol, atol=0)) if got.shape == want.shape else []
        raise AssertionError(f"{what}: got {got[:8]} want {want[:8]} (first bad index {bad[:1]})")


def kw(type_name):
    return {"dtype": "bf16"} if type_name == "bf16" else {}


# ---- Collectives --------------------------------------------------------------------------


def test_all_reduce(comm):
    seed = 0
    for t in REDUCE_TYPES:
        for op in OPS:
            for i, count in enumerate(COUNTS):
                seed += 1
                want = reference(t, op, count, comm.size, seed)
                mine = to_buffer(contribution(comm.rank, count, t, seed), t)
                mode = (i + OPS.index(op)) % 4  # every op meets every mode across the counts
                what = f"all_reduce {t} {op} n={count} mode={mode}"
                if mode == 0:  # in place, blocking
                    assert comm.all_reduce(mine, op, **kw(t)) is None
                    check(mine, t, want, what)
                elif mode == 1:  # out of place, blocking; the input stays as it was
                    before = mine.copy()
                    out = np.empty_like(mine)
                    comm.all_reduce(mine, op, out=out, **kw(t))
                    check(out, t, want, what)
                    assert np.array_equal(mine, before), what + ": input changed"
                elif mode == 2:  # in place, async
                    work = comm.all_reduce(mine, op, async_op=True, **kw(t))
                    assert work.wait() is True
                    assert work.is_completed() and work.exception() is None
                    check(mine, t, want, what)
                else:  # out of place, async, with the enum
                    out = np.empty_like(mine)
                    work = comm.all_reduce(mine, getattr(chorus.ReduceOp, op.upper()), out=out,
                                           async_op=True, **kw(t))
                    while not work.is_completed():
                        time.sleep(0.0005)
                    work.wait()
                    check(out, t, want, what)
    # One larger buffer per op, where the algorithms that pipeline segments run.
    for op in OPS:
        seed += 1
        count = 100003
        want = reference("float32", op, count, comm.size, seed)
        mine = to_buffer(contribution(comm.rank, count, "float32", seed), "float32")
        comm.all_reduce(mine, op)
        check(mine, "float32", want, f"all_reduce large {op}")


def test_reduce_scatter(comm):
    seed = 1000
    for t in REDUCE_TYPES:
        for op in OPS:
            for count in (0, 1, 13):
                seed += 1
                full = reference(t, op, count * comm.size, comm.size, seed)
                want = full[comm.rank * count:(comm.rank + 1) * count]
                mine = to_buffer(contribution(comm.rank, count * comm.size, t, seed), t)
                out = np.empty(count, dtype=mine.dtype)
                if seed % 2:
                    comm.reduce_scatter(mine, out, op, **kw(t))
                else:
                    comm.reduce_scatter(mine, out, op, async_op=True, **kw(t)).wait()
                check(out, t, want, f"reduce_scatter {t} {op} n={count}")


def test_reduce(comm):
    seed = 2000
    for t in REDUCE_TYPES:
        for op in OPS:
            for count in (0, 7, 1031):
                seed += 1
                root = seed % comm.size
                want = reference(t, op, count, comm.size, seed)
                mine = to_buffer(contribution(comm.rank, count, t, seed), t)
                what = f"reduce {t} {op} n={count} root={root}"
                if seed % 3 == 0:  # in place on the root (outbuf None everywhere)
                    comm.reduce(mine, None, root, op, **kw(t))
                    if comm.rank == root:
                        check(mine, t, want, what)
                else:
                    out = np.zeros_like(mine)
                    work = comm.reduce(mine, out, root, op, async_op=seed % 3 == 1, **kw(t))
                    if work is not None:
                        work.wait()
                    if comm.rank == root:
                        check(out, t, want, what)
                    else:
                        assert not out.any(), what + ": a non-root's outbuf was written"


# Types of the collectives that only move data: every reducible one and some Chorus cannot
# reduce (bool, uint16, complex), which travel as bytes.
MOVE_TYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool",
              "uint16", "complex64"]


def rank_data(rank, count, t, seed):
    values = np.arange(count, dtype=np.int64) * 13 + rank * 1000 + seed
    if t == "bool":
        return (values % 3 == 0)
    return (values % 100).astype(t)


def test_data_movement(comm):
    n, r = comm.size, comm.rank
    seed = 3000
    for t in MOVE_TYPES:
        for count in (0, 1, 7, 1031):
            seed += 1
            async_op = seed % 2 == 0
            def finish(work):
                if async_op:
                    assert work is not None and work.wait()
                else:
                    assert work is None

            # all_gather: block q of the output is rank q's input.
            mine = rank_data(r, count, t, seed)
            out = np.empty(count * n, dtype=t)
            finish(comm.all_gather(mine, out, async_op=async_op))
            want = np.concatenate([rank_data(q, count, t, seed) for q in range(n)])
            assert np.array_equal(out, want), f"all_gather {t} n={count}"

            # broadcast from every root.
            for root in range(n):
                buf = rank_data(r, count, t, seed + root)
                finish(comm.broadcast(buf, root, async_op=async_op))
                assert np.array_equal(buf, rank_data(root, count, t, seed + root)), \
                    f"broadcast {t} n={count} root={root}"

            root = seed % n
            # gather: only the root receives; elsewhere outbuf may be None.
            out = np.empty(count * n, dtype=t) if r == root else None
            finish(comm.gather(mine, out, root, async_op=async_op))
            if r == root:
                assert np.array_equal(out, want), f"gather {t} n={count} root={root}"

            # scatter: rank q receives block q of the root's input.
            full = rank_data(root, count * n, t, seed)
            out = np.empty(count, dtype=t)
            finish(comm.scatter(full if r == root else None, out, root, async_op=async_op))
            assert np.array_equal(out, full[r * count:(r + 1) * count]), \
                f"scatter {t} n={count} root={root}"

            # all_to_all: block q of rank p's output is block p of rank q's input.
            src = rank_data(r, count * n, t, seed)
            out = np.empty_like(src)
            finish(comm.all_to_all(src, out, async_op=async_op))
            want_a2a = np.concatenate([rank_data(q, count * n, t, seed)[r * count:(r + 1) * count]
                                       for q in range(n)])
            assert np.array_equal(out, want_a2a), f"all_to_all {t} n={count}"


def test_send_recv(comm):
    n, r = comm.size, comm.rank
    if n == 1:
        return
    # A ring: each rank sends to the next and receives from the previous. Even ranks send
    # first so that a large message finds its receiver (odd sizes: the last rank is even too,
    # but its receiver, rank 0, has posted its recv after its own send completes).
    right, left = (r + 1) % n, (r - 1) % n
    for count in (0, 1, 1031, 300007):
        mine = rank_data(r, count, "float32", count)
        got = np.empty(count, dtype=np.float32)
        if r % 2 == 0:
            comm.send(mine, right)
            comm.recv(got, left)
        else:
            comm.recv(got, left)
            comm.send(mine, right)
        assert np.array_equal(got, rank_data(left, count, "float32", count)), f"send/recv n={count}"
    # Async pair, bytearray and memoryview buffers.
    payload = bytearray(b"chorus-%d" % r)
    got = bytearray(len(b"chorus-%d" % left))
    if r % 2 == 0:
        ws = comm.send(memoryview(payload), right, async_op=True)
        wr = comm.recv(got, left, async_op=True)
    else:
        wr = comm.recv(got, left, async_op=True)
        ws = comm.send(payload, right, async_op=True)
    ws.wait()
    wr.wait()
    assert bytes(got) == b"chorus-%d" % left, got


def test_barrier_and_work(comm):
    comm.barrier()
    assert comm.barrier(async_op=True).wait(timeout=30) is True
    # A Work holds the buffer it was given until it is seen to be finished.
    a = np.ones(17, dtype=np.float64)
    before = sys.getrefcount(a)
    work = comm.all_reduce(a, async_op=True)
    assert sys.getrefcount(a) == before + 1, "the Work does not hold the buffer"
    work.wait()
    assert sys.getrefcount(a) == before, "the Work did not release the buffer after wait"
    assert np.all(a == comm.size)
    # A bytearray cannot resize while exported; it can again once the Work is done.
    b = bytearray(8)
    work = comm.broadcast(b, 0, async_op=True)
    work.wait()
    b.extend(b"x")
    # A dropped Work waits for its operation: the result is there after the del.
    c = np.full(5, comm.rank + 1, dtype=np.int64)
    work = comm.all_reduce(c, "max", async_op=True)
    del work
    assert np.all(c == comm.size)
    if comm.size > 1:
        # wait(timeout) returns False while a peer has not joined yet.
        comm.barrier()
        if comm.rank == 0:
            work = comm.barrier(async_op=True)
            assert work.wait(timeout=0.2) is False, "barrier finished without the others"
            assert not work.is_completed()
            assert work.wait() is True
        else:
            time.sleep(1.5)
            comm.barrier()


def test_split(comm):
    color = comm.rank % 2
    sub = comm.split(color, key=-comm.rank)  # reversed order inside each half
    members = [q for q in range(comm.size) if q % 2 == color]
    assert sub.size == len(members), (sub.size, members)
    assert sub.rank == len(members) - 1 - members.index(comm.rank), sub.rank
    x = np.array([comm.rank], dtype=np.int64)
    sub.all_reduce(x)
    assert x[0] == sum(members), (x, members)
    none = comm.split(None if comm.rank == 0 else 0, comm.rank)
    assert (none is None) == (comm.rank == 0)
    if none is not None:
        assert none.size == comm.size - 1
        none.barrier()


def test_explicit_store(comm):
    """Communicator(store_url, rank, size): a second world over a file store of its own."""
    import shutil
    import tempfile

    # Every rank derives the same folder from the launcher's store address.
    tag = "".join(ch if ch.isalnum() else "_" for ch in os.environ.get("CHORUS_STORE", "solo"))
    folder = os.path.join(tempfile.gettempdir(), f"chorus-core-test-{os.getuid()}-{tag}")
    if comm.rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    comm.barrier()
    other = chorus.Communicator("file://" + folder, comm.rank, comm.size, timeout=20)
    assert (other.rank, other.size) == (comm.rank, comm.size)
    x = np.full(4, 2 ** comm.rank, dtype=np.float32)
    other.all_reduce(x, dtype=np.dtype(np.float32))  # a numpy dtype as the override
    assert np.all(x == 2 ** comm.size - 1), x
    other.barrier()
    del other
    comm.barrier()
    if comm.rank == 0:
        shutil.rmtree(folder, ignore_errors=True)


def test_launch_info(comm):
    """chorus-run's variables, as chorus.launch_info() reads them; a malformed one is an error."""
    info = chorus.launch_info()
    want = {"rank": comm.rank, "size": comm.size, "local_rank": comm.rank,
            "local_size": comm.size, "launcher": "chorus", "store": os.environ["CHORUS_STORE"],
            "store_from": "CHORUS_STORE"}
    assert info == want, (info, want)
    saved = os.environ["CHORUS_LOCAL_RANK"]
    os.environ["CHORUS_LOCAL_RANK"] = "x"
    try:
        expect(chorus.Error, chorus.launch_info, "a malformed CHORUS_LOCAL_RANK")
    finally:
        os.environ["CHORUS_LOCAL_RANK"] = saved


def run_collectives(comm):
    assert comm.rank == int(os.environ["CHORUS_RANK"]) and comm.size == int(os.environ["CHORUS_WORLD_SIZE"])
    test_all_reduce(comm)
    test_reduce_scatter(comm)
    test_reduce(comm)
    test_data_movement(comm)
    test_send_recv(comm)
    test_barrier_and_work(comm)
    test_split(comm)
    test_explicit_store(comm)
    test_launch_info(comm)
    assert comm.last_algorithm() != ""
    assert "torch" not in sys.modules, "import chorus imported torch"


# ---- Failures -----------------------------------------------------------------------------


def expect(exc_type, fn, what):
    try:
        fn()
    except exc_type as e:
        return e
    except Exception as e:  # noqa: BLE001 - report what came instead
        raise AssertionError(f"{what}: raised {type(e).__name__}: {e}, not {exc_type.__name__}")
    raise AssertionError(f"{what}: did not raise {exc_type.__name__}")


def run_failures(comm):
    n, r = comm.size, comm.rank
    x = np.zeros(8, dtype=np.float32)
    # Misuse raises on the calling rank at once and sends nothing: the communicator stays usable.
    expect(ValueError, lambda: comm.broadcast(x, n), "broadcast root=size")
    expect(ValueError, lambda: comm.reduce(x, None, -1), "reduce root=-1")
    expect(ValueError, lambda: comm.gather(x, None, 0) if r == 0 else comm.gather(x, x, n + 3),
           "gather without outbuf on the root / bad root")
    expect(ValueError, lambda: comm.all_reduce(x, out=np.zeros(9, dtype=np.float32)), "out size")
    expect(TypeError, lambda: comm.all_reduce(x, out=np.zeros(8, dtype=np.float64)), "out type")
    expect(ValueError, lambda: comm.all_gather(x, np.zeros(8 * n + 1, dtype=np.float32)),
           "all_gather outbuf size")
    expect(ValueError, lambda: comm.reduce_scatter(np.zeros(8 * n + 1, dtype=np.float32), x),
           "reduce_scatter inbuf size")
    expect(ValueError, lambda: comm.all_to_all(np.zeros(n * 3 + 1, dtype=np.int32),
                                               np.zeros(n * 3 + 1, dtype=np.int32))
           if n > 1 else comm.all_to_all(x, np.zeros(9, dtype=np.float32)), "all_to_all size")
    expect(ValueError, lambda: comm.send(x, r), "send to self")
    expect(ValueError, lambda: comm.recv(x, n), "recv from size")
    expect(ValueError, lambda: comm.all_reduce(np.zeros((4, 4), dtype=np.float32)[:, 0]),
           "non-contiguous")
    readonly = np.zeros(4, dtype=np.float32)
    readonly.flags.writeable = False
    expect(ValueError, lambda: comm.all_reduce(readonly), "read-only in place")
    expect(ValueError, lambda: comm.all_reduce(x, out=readonly[:0]), "read-only out")
    expect(TypeError, lambda: comm.all_reduce(np.zeros(4, dtype=bool)), "bool sum")
    expect(TypeError, lambda: comm.all_reduce(np.zeros(4, dtype=np.int16)), "int16 sum")
    expect(TypeError, lambda: comm.all_reduce(b"abc"[0]), "not a buffer")
    expect(ValueError, lambda: comm.all_reduce(x, "xor"), "unknown op")
    e = expect(ValueError, lambda: comm.all_reduce(x, "mean"), "op='mean' (not an alias of avg)")
    assert "'avg'" in str(e), e
    expect(ValueError, lambda: comm.all_reduce(bytearray(3), dtype="bf16"),
           "bf16 over an odd number of bytes")
    # dtype= on a typed buffer of another type would reinterpret its bits: refused.
    e = expect(TypeError, lambda: comm.all_reduce(np.ones(4, dtype=np.float32), dtype="int32"),
               "float32 buffer with dtype='int32'")
    assert "int32" in str(e) and "float32" in str(e), e
    expect(TypeError, lambda: comm.all_reduce(np.ones(4, dtype=np.uint8), dtype="int32"),
           "uint8 array with dtype='int32'")
    expect(TypeError, lambda: comm.all_reduce(np.ones(4, dtype=np.float16), dtype="bf16"),
           "float16 buffer with dtype='bf16'")
    expect(TypeError, lambda: comm.reduce_scatter(np.ones(4 * n, dtype=np.float32),
                                                  np.ones(4, dtype=np.int32), dtype="float32"),
           "reduce_scatter outbuf of another type than dtype")
    expect(ValueError, lambda: comm.all_reduce(x, dtype="complex"), "unknown dtype")
    expect(ValueError, lambda: chorus.Communicator("tcp://127.0.0.1:1", 2, 2), "rank >= size")
    # Still usable: a collective with the right values.
    y = np.full(3, r + 1, dtype=np.int32)
    comm.all_reduce(y)
    assert np.all(y == n * (n + 1) // 2), y
    # dtype= types raw bytes, and agrees with a buffer of its own type.
    raw = bytearray(np.full(3, r + 1, dtype=np.int32).tobytes())
    comm.all_reduce(raw, dtype="int32")
    assert np.all(np.frombuffer(raw, dtype=np.int32) == n * (n + 1) // 2), raw
    y = np.full(3, r + 1, dtype=np.int32)
    comm.all_reduce(y, dtype="int32")
    assert np.all(y == n * (n + 1) // 2), y
    if n == 1:
        return

    # Independent communicators for the failures below (each failure aborts its communicator).
    first = comm.split(0, r)
    second = comm.split(0, r)

    # Sizes that differ across ranks raise chorus.Error on every rank, not wrong data.
    mismatched = np.ones(10 + r, dtype=np.float32)
    start = time.monotonic()
    err = expect(chorus.Error, lambda: first.all_reduce(mismatched), "mismatched sizes")
    assert isinstance(err, RuntimeError) and err.code == "MISMATCH", (err.code, str(err))
    assert time.monotonic() - start < 10, "mismatch found only at the timeout"
    # ... and every later call on that communicator raises too.
    expect(chorus.Error, lambda: first.barrier(), "call after a failure")

    # Async: the Work reports the failure through wait() and exception().
    work = second.all_gather(np.ones(2 + r, dtype=np.int64), np.zeros((2 + r) * n, dtype=np.int64),
                             async_op=True)
    expect(chorus.Error, lambda: work.wait(), "async mismatched sizes")
    assert work.is_completed()
    exc = work.exception()
    assert isinstance(exc, chorus.Error) and exc.code == "MISMATCH", repr(exc)

    # abort() on one rank: every other rank's next call fails, naming it.
    if r == 0:
        comm.abort()
        expect(chorus.Error, lambda: comm.barrier(), "barrier after abort").code == "ABORTED"
    else:
        err = expect(chorus.Error, lambda: comm.barrier(), "barrier with an aborted peer")
        assert err.code in ("ABORTED", "PEER_FAILURE"), (err.code, str(err))
        assert "rank 0" in str(err), str(err)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "collectives"
    comm = chorus.Communicator.from_env(timeout=float(os.environ.get("CORE_TEST_TIMEOUT", "30")))
    {"collectives": run_collectives, "failures": run_failures}[mode](comm)
    print(f"rank {comm.rank}/{comm.size}: {mode} passed", flush=True)


if __name__ == "__main__":
    main()

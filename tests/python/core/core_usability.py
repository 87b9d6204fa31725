"""What a new user of chorus._core (the numpy API) runs into; 2 ranks started by chorus-run.

    chorus-run -n 2 -- python3 core_usability.py

help(chorus.Communicator) names argument types (no pybind11 "handle") and shows ReduceOp.SUM as
op's default; close() and the with block close the communicator and later calls raise
ValueError; chorus.Options given as options= reach the communicator; Ctrl-C (SIGINT from rank 1) interrupts rank 0 blocked in a collective, in
Work.wait() and in Work.wait(timeout) with KeyboardInterrupt within about a second, and rank 1's next call then fails at
once naming rank 0 (not at its timeout; its first may still complete with what rank 0 sent
before the interrupt). Exit status 77 (skipped) when numpy is missing.
"""

import os
import pydoc
import signal
import sys
import time

try:
    import numpy as np
except ImportError:
    print("numpy is missing (python3-numpy): skipped", file=sys.stderr)
    sys.exit(77)

import chorus

TIMEOUT_S = 30.0  # the communicators' timeout: an interrupt must come long before it
failures = []


def say(*parts):
    print(f"[rank {os.environ.get('CHORUS_RANK', '?')}]", *parts, flush=True)


def expect(cond, what):
    if not cond:
        failures.append(what)
        say("FAIL:", what)


def check_help():
    text = pydoc.render_doc(chorus.Communicator, renderer=pydoc.plaintext)
    expect("handle" not in text, "help(chorus.Communicator) still shows 'handle': " +
           "; ".join(line.strip() for line in text.splitlines() if "handle" in line)[:400])
    expect("op: str | ReduceOp = ReduceOp.SUM" in text, "all_reduce's op shows no ReduceOp default")
    expect("buf: Buffer" in text, "all_reduce's buf shows no Buffer type")
    expect("close(" in text and "__enter__" in text, "no close() or context manager in help")


def check_close(rank, size):
    with chorus.Communicator.from_env(timeout=TIMEOUT_S) as comm:
        x = np.full(4, rank + 1, dtype=np.float32)
        comm.all_reduce(x)
        expect(np.array_equal(x, np.full(4, size * (size + 1) / 2, np.float32)), f"all_reduce: {x}")
    expect("closed" in repr(comm), f"repr after the with block: {repr(comm)}")
    expect(comm.rank == rank and comm.size == size, "rank and size after close")
    try:
        comm.all_reduce(np.ones(4, np.float32))
        expect(False, "all_reduce after close did not raise")
    except ValueError as e:
        expect("all_reduce" in str(e) and "closed" in str(e), f"the error after close: {e}")
    comm.close()  # again: nothing happens


def interrupted(rank, comm, what, block, marker):
    """Rank 1 sends SIGINT to rank 0 while rank 0 blocks in block(); rank 1 then calls a
    collective, which must fail at once (rank 0 aborted), not at the timeout."""
    pids = np.zeros(2, np.int64)
    comm.all_gather(np.array([os.getpid()], np.int64), pids)
    if rank == 0:
        entered = time.time()
        try:
            block()
            expect(False, f"{what}: returned although rank 1 never joined")
        except KeyboardInterrupt:
            now = time.time()
            with open(marker) as f:
                sent = float(f.read())
            os.remove(marker)
            say(f"{what}: KeyboardInterrupt {now - sent:.2f} s after SIGINT")
            expect(sent > entered, f"{what}: SIGINT came before the call (inconclusive)")
            expect(now - sent < 1.5, f"{what}: KeyboardInterrupt {now - sent:.2f} s after SIGINT")
        return
    time.sleep(1.0)  # rank 0 is blocked by now
    with open(marker + ".tmp", "w") as f:
        f.write(repr(time.time()))
    os.rename(marker + ".tmp", marker)
    os.kill(int(pids[0]), signal.SIGINT)
    time.sleep(2.5)  # rank 0 is interrupted by now (a barrier here would let its barrier end)
    # A first barrier might still complete with what rank 0 sent before it was interrupted; the
    # next cannot.
    start = time.monotonic()
    try:
        comm.barrier()
        comm.barrier()
        expect(False, f"{what}: rank 1's barriers succeeded after rank 0 was interrupted")
    except chorus.Error as e:
        took = time.monotonic() - start
        say(f"{what}: rank 1 got {e.code} after {took:.2f} s: {e}")
        expect(took < 5.0, f"{what}: rank 1 failed {took:.1f} s later")
        expect(e.code != "TIMEOUT" and "rank 0" in str(e), f"{what}: rank 1's error: {e}")


def check_options(rank, size):
    """chorus.Options: settings given in code reach the communicator; bad ones are refused."""
    o = chorus.Options.from_env(trace_entries=0, timeout=TIMEOUT_S)
    expect(o.trace_entries == 0 and o.timeout == TIMEOUT_S, f"Options.from_env keywords: {o!r}")
    expect("trace_entries=0" in repr(o), f"repr: {o!r}")
    o.tcp_zerocopy_bytes = 1 << 20
    with chorus.Communicator.from_env(options=o) as comm:
        got = comm.options
        expect(got.trace_entries == 0 and got.tcp_zerocopy_bytes == 1 << 20,
               f"comm.options: {got!r}")
        x = np.full(4, rank + 1, dtype=np.float32)
        comm.all_reduce(x)
        expect(np.array_equal(x, np.full(4, size * (size + 1) / 2, np.float32)), f"all_reduce: {x}")
    expect(chorus.Options().trace_entries == 2048, "Options() is not the defaults")
    # Authentication required, and no key: every rank fails alike, before the rendezvous.
    try:
        chorus.Communicator.from_env(
            options=chorus.Options.from_env(auth="required", auth_key_file=""))
        expect(False, "auth='required' without a key was accepted")
    except chorus.Error as e:
        expect("CHORUS_AUTH=required" in str(e), f"auth='required' without a key: {e}")
    for bad, kind in (({"trace_entries": -1}, ValueError), ({"auth": "sometimes"}, ValueError),
                      ({"no_such_setting": 1}, TypeError)):
        try:
            chorus.Options(**bad)
            expect(False, f"Options(**{bad}) was accepted")
        except kind:
            pass


def main():
    rank, size = int(os.environ["CHORUS_RANK"]), int(os.environ["CHORUS_WORLD_SIZE"])
    assert size == 2, "run on 2 ranks"
    check_help()
    check_close(rank, size)
    check_options(rank, size)
    tag = os.environ["CHORUS_STORE"].rsplit(":", 1)[-1]
    tmp = os.environ.get("TMPDIR", "/tmp")
    comm = chorus.Communicator.from_env(timeout=TIMEOUT_S)
    interrupted(rank, comm, "blocking barrier", comm.barrier,
                os.path.join(tmp, f"chorus-core-usability-{tag}-blocking"))
    comm = chorus.Communicator.from_env(timeout=TIMEOUT_S)
    interrupted(rank, comm, "Work.wait", lambda: comm.barrier(async_op=True).wait(),
                os.path.join(tmp, f"chorus-core-usability-{tag}-wait"))
    comm = chorus.Communicator.from_env(timeout=TIMEOUT_S)
    interrupted(rank, comm, "Work.wait(timeout)", lambda: comm.barrier(async_op=True).wait(20.0),
                os.path.join(tmp, f"chorus-core-usability-{tag}-timed"))
    say(f"{len(failures)} failed")
    os._exit(1 if failures else 0)  # the communicators are aborted: no orderly teardown


if __name__ == "__main__":
    main()

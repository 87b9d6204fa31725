#!/usr/bin/python3
"""chorus.torchft.ProcessGroupChorus's calls as torchft's Manager makes them, in one process
(a group of one, no lighthouse): configure() makes a chorus group through the store prefix it is
given, the collectives run on it, errored() is None while it works and names the failure once the
group failed (so that the Manager discards the step), a second configure() (the next quorum, a
new prefix) replaces the failed group with a working one, shutdown() ends it.
Exits 77 (skipped) where torchft is not installed.
"""

import datetime
import sys


def main():
    try:
        import torchft  # noqa: F401
    except ImportError as e:
        print(f"skipped: torchft is not installed here ({e})")
        return 77
    import torch
    from torch.distributed import TCPStore

    import chorus.torch
    from chorus.torchft import ProcessGroupChorus

    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    pg = ProcessGroupChorus(timeout=datetime.timedelta(seconds=10))
    assert pg.getBackendName() == "torchft-chorus", pg.getBackendName()

    def configure(quorum):
        pg.configure(f"127.0.0.1:{store.port}/torchft/{quorum}/0", "replica_0", 0, 1,
                     quorum_id=quorum, group_rank=0, group_world_size=1, global_ranks=[0])
        backend = pg.parent._get_backend(torch.device("cpu"))
        assert backend.name() == "chorus", backend.name()
        return backend

    def allreduce():
        t = torch.arange(4, dtype=torch.float32)
        pg.allreduce([t], torch.distributed.AllreduceOptions()).wait()
        assert torch.equal(t, torch.arange(4, dtype=torch.float32)), t

    backend = configure(1)
    allreduce()
    assert pg.errored() is None, pg.errored()
    chorus.torch._ext.abort(backend)  # as a lost peer or a timeout would leave it
    err = pg.errored()
    assert isinstance(err, RuntimeError) and "chorus process group" in str(err), repr(err)
    print(f"after the failure: errored() = {err}")
    configure(2)  # the next quorum
    assert pg.errored() is None, pg.errored()
    allreduce()
    pg.shutdown()
    assert pg.errored() is None
    print("ok: configure, collectives, errored() and reconfigure on the chorus group")
    return 0


if __name__ == "__main__":
    sys.exit(main())

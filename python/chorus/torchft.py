"""A Chorus process group for torchft's Manager, in place of torchft's gloo one.

torchft (PyPI ``torchft``) rebuilds its process group on every quorum change through the group's
``configure(store_addr, replica_id, rank, world_size, ...)``; ``ProcessGroupChorus`` builds a
chorus backend there, so the replica groups' collectives (``manager.allreduce``, torchft's DDP,
LocalSGD and DiLoCo) run on Chorus. The only line a torchft user changes::

    from chorus.torchft import ProcessGroupChorus
    manager = torchft.Manager(pg=ProcessGroupChorus(timeout=timeout), ...)

What it changes: a replica that dies in the middle of a collective fails the survivors' call at
once (Chorus tells every member of the communicator), where a gloo peer waiting on a live rank
sits out the whole collective timeout; a stopped replica is declared dead after the chorus
backend's heartbeat (CHORUS_HEARTBEAT_SECONDS, 5 s by default). The quorum itself stays
torchft's (its lighthouse decides who takes part).

Importing this module does not import torchft; the first use of ProcessGroupChorus does, with an
ImportError that says what to install where torchft is missing. CPU tensors only (the chorus
backend's devices), like torchft's gloo group.
"""

import datetime

_INSTALL = (
    "chorus.torchft.ProcessGroupChorus needs torchft (pip install torchft, beside torch 2.x; "
    "in this project scripts/install-torch2 --torchft)"
)


def _torchft_wrapper_base():
    try:
        from torchft.process_group import ProcessGroupWrapper
    except ImportError as e:
        raise ImportError(f"{_INSTALL}: {e}") from e
    return ProcessGroupWrapper


def _make_class():
    base = _torchft_wrapper_base()  # first: the error for a missing torchft says so

    import torch
    import torch.distributed as dist

    import chorus.torch as chorus_torch

    class ProcessGroupChorus(base):
        """torchft's reconfigurable process group on the chorus backend: ``configure()`` (which
        torchft's Manager calls at every new quorum, with a fresh store prefix) aborts the group
        of the previous quorum and meets the new one's members through the store it is given.

        timeout: bounds every collective (and the store's waits while the group is made), as
        the timeout of torchft's ProcessGroupGloo does."""

        def __init__(self, timeout=datetime.timedelta(seconds=60)):
            super().__init__(timeout=timeout)
            self._configures = 0

        def _create_pg(self, store, rank, world_size):
            # Explicit global ranks keep this group apart from the chorus backend's handling of
            # a launcher's first default group (chorus-run's store, CHORUS_JOIN): each quorum's
            # group meets only in the store torchft hands it.
            ranks = list(self._global_ranks) if self._global_ranks else list(range(world_size))
            if len(ranks) != world_size or len(set(ranks)) != world_size:
                ranks = list(range(world_size))
            self._configures += 1
            name = f"torchft_quorum_{self._quorum_id}_{self._configures}"
            backend = chorus_torch._ext.create_process_group(
                store, rank, world_size, self._timeout, ranks, name
            )
            pg = dist.ProcessGroup(store, rank, world_size)
            kind = dist.ProcessGroup.BackendType.CUSTOM
            pg._register_backend(torch.device("cpu"), kind, backend)
            pg._set_default_backend(kind)
            self._backend = backend
            return pg

        def getBackendName(self):
            return "torchft-chorus"

        def errored(self):
            """The chorus communicator's failure (a peer lost or declared dead, a timeout, an
            abort) as an exception, or None: torchft's Manager then discards the step even
            where the failing call's error was swallowed."""
            backend = getattr(self, "_backend", None)
            if backend is None or self._pg is None:
                return None
            cause = chorus_torch._ext.failure(backend)
            return RuntimeError(f"chorus process group: {cause}") if cause else None

        def abort(self, errored=True):
            super().abort(errored=errored)
            self._backend = None

        def shutdown(self):
            backend = getattr(self, "_backend", None)
            if backend is not None:
                chorus_torch._ext.abort(backend)
            self._backend = None
            super().shutdown()

    ProcessGroupChorus.__module__ = __name__
    ProcessGroupChorus.__qualname__ = "ProcessGroupChorus"
    return ProcessGroupChorus


_classes = {}


def __getattr__(name):
    if name == "ProcessGroupChorus":
        if name not in _classes:
            _classes[name] = _make_class()
        return _classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ProcessGroupChorus"]

"""The torch.distributed backend "chorus".

Importing this module registers the backend; then, in an unmodified training script::

    import chorus.torch  # noqa: F401
    torch.distributed.init_process_group("chorus")   # env://, tcp://, file:// or store=

``chorus.torch.CompressionState`` and ``chorus.torch.compress_hook`` are chorus.hooks' gradient
compressors for DDP (``ddp.register_comm_hook(CompressionState("powersgd:2"), compress_hook)``).

Every init method torch supports works: the backend meets its peers through the store torch
hands it (torchrun's, a FileStore, a group's PrefixStore), so it needs no port or CHORUS_STORE of
its own. The group's timeout (``init_process_group(timeout=...)``, ``new_group(timeout=...)``)
bounds every step of every collective, or CHORUS_TIMEOUT where that is set and shorter (rank 0
says which at init when they differ). CHORUS_* variables (docs/config.md) tune the rest.

Ctrl-C interrupts a rank blocked in a collective or in ``Work.wait()``: it raises
KeyboardInterrupt within about a second and aborts the group, whose peers fail at once naming
this rank. Launched by chorus-run (CHORUS_STORE set), the backend also publishes its progress
records to chorus-run's store, so ``chorus-run --hang-seconds`` and ``chorus-doctor --live`` see
a torch job as they see a C++ one (ranks there are the group's ranks).

On torch 2.x the backend serves CPU tensors (``devices=["cpu"]``): ``init_process_group("chorus")``
maps the CPU to it, and ``init_process_group("cpu:chorus,cuda:nccl")`` pairs it with NCCL for
CUDA tensors. On torch 1.13 it is a process group of its own, for CPU tensors only.
"""

import collections
import contextlib

import torch
import torch.distributed as _dist

from chorus import _torch_build

_torch_build.check(torch)  # an ImportError that says what to do, not a symbol error or a crash

from chorus import _torch as _ext  # noqa: E402  after torch: it extends torch's ProcessGroup

# The compressors as DDP comm hooks (bf16, fp16, int8, powersgd:R with error feedback), also
# here for users of the backend; they live in chorus.hooks, which needs no backend.
from chorus.hooks import CompressionState, compress_hook  # noqa: F401

BACKEND = "chorus"

# torch 2.x: the backend is a c10d.Backend that torch's ProcessGroup holds per device type;
# torch 1.13: it is the ProcessGroup.
_TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def _create(backend_options, pg_options):
    if pg_options is not None:
        raise ValueError("the chorus backend takes no pg_options; set CHORUS_* variables instead")
    if getattr(backend_options, "enable_reconfigure", False):
        raise ValueError(
            "the chorus backend does not take enable_reconfigure: create the group as usual; "
            "chorus.torch.shrink() (or dist._reconfigure()) then changes it in place"
        )
    return _ext.create_process_group(
        backend_options.store,
        backend_options.group_rank,
        backend_options.group_size,
        backend_options.timeout,
        list(backend_options.global_ranks_in_group),
        str(backend_options.group_id),
    )


def _register():
    if BACKEND.upper() in _dist.Backend._plugins:
        return
    if _TORCH2:
        _dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
    else:  # 1.13's register_backend knows no devices
        _dist.Backend.register_backend(BACKEND, _create, extended_api=True)


# TORCH_DISTRIBUTED_DEBUG=DETAIL wraps a group's backend in a ProcessGroupWrapper, which checks
# every collective's arguments across the ranks (through a gloo group of its own) first.
_WRAPPER = getattr(_dist.distributed_c10d, "_ProcessGroupWrapper", None)


def _backend_of(pg):
    """The chorus backend object of a ProcessGroup, or None where its CPU backend is another."""
    if _TORCH2:
        try:
            backend = pg._get_backend(torch.device("cpu"))
        except RuntimeError:  # no backend for the CPU in this group
            return None
    else:
        backend = pg
    if _WRAPPER is not None and isinstance(backend, _WRAPPER):
        backend = backend.wrapped_pg
    return backend if backend.name().lower() == BACKEND else None


def _is_chorus(group):
    pg = _dist.distributed_c10d._get_default_group() if group is None else group
    return _backend_of(pg) is not None


def _patch_monitored_barrier():
    # dist.monitored_barrier of torch 1.13 to 2.x (2.6, 2.7 at least) accepts only gloo groups,
    # although it only calls the group's monitored_barrier, which reaches this backend (on 2.x
    # through the group's CPU backend); newer torch accepts any group with a CPU backend.
    original = _dist.monitored_barrier
    if getattr(original, "_chorus", False):
        return

    def monitored_barrier(group=_dist.GroupMember.WORLD, timeout=None, wait_all_ranks=False):
        if group is _dist.GroupMember.NON_GROUP_MEMBER or not _is_chorus(group):
            return original(group, timeout, wait_all_ranks)
        if timeout is None:
            timeout = _dist.distributed_c10d.default_pg_timeout
        pg = _dist.distributed_c10d._get_default_group() if group is None else group
        return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier.__doc__ = original.__doc__
    monitored_barrier._chorus = True
    _dist.monitored_barrier = monitored_barrier
    _dist.distributed_c10d.monitored_barrier = monitored_barrier


def last_algorithm(group=None):
    """The algorithm the group's last collective ran ("ring", "rd", "rhd", ...)."""
    return _ext.last_algorithm(_group(group))


def transport_to(peer, group=None):
    """How data reaches `peer` (a rank of the group): "shm", "tcp" or "self"."""
    return _ext.transport_to(_group(group), peer)


def abort(group=None):
    """Fails every pending and later operation of the group, here and on its peers."""
    _ext.abort(_group(group))


# What shrink() returns. former_ranks: for each rank now, its rank before the change (-1: a
# newcomer); lost_ranks: the ranks before it that are gone.
Membership = collections.namedtuple("Membership", "generation rank size former_ranks lost_ranks")


def can_shrink():
    """Whether this torch lets a group shrink in place (C10D_BACKEND_HAS_RECONFIGURE)."""
    return bool(_ext.can_shrink)


def shrink(group=None, gone=()):
    """Shrinks the default group in place after a failure: collective among its live ranks,
    which agree on the members (a rank that died or was declared dead is left out) and go on
    with them; ``dist.get_rank()`` and ``dist.get_world_size()`` then say the new rank and size.
    Operations still in flight on the group fail. `gone`: ranks of the group the caller knows to
    be gone or leaving beyond those the group saw fail (the members of a broken replica group):
    the agreement does not wait for them. Subgroups follow: one whose members all stayed keeps
    working under their new global ranks (``dist.get_rank(sub)``,
    ``get_process_group_ranks(sub)``); one that lost a member is aborted, so its operations
    raise instead of waiting. Returns a Membership. Needs can_shrink()."""
    pg = _dist.distributed_c10d._get_default_group()
    if group is not None:
        _group(group)  # a TypeError for a group of another backend
    if group is not None and group is not pg:
        raise ValueError("chorus.torch.shrink: only the default group can shrink in place "
                         "(its subgroups follow it)")
    generation, rank, size, former, lost = _ext.shrink(_group(pg), [int(r) for r in gone])
    _follow(pg, list(former), size)
    return Membership(generation, rank, size, list(former), list(lost))


def _follow(default, former, size):
    """torch's tables of global ranks after the default group changed: the default group's
    ranks are 0..size-1; a subgroup's members take their new global ranks (their group ranks
    stay), and a subgroup that lost a member is aborted."""
    tables = getattr(_dist.distributed_c10d._world, "pg_group_ranks", None)
    if tables is None:
        return
    now = {old: new for new, old in enumerate(former) if old >= 0}
    for pg, table in list(tables.items()):
        if pg is default:
            tables[pg] = {r: r for r in range(size)}
            continue
        if not isinstance(pg, _dist.ProcessGroup):
            continue
        tables[pg] = {now[g]: r for g, r in table.items() if g in now}
        if len(tables[pg]) < len(table):
            backend = _backend_of(pg)
            if backend is not None:
                _ext.abort(backend)


def split_group(color, key, ranks, name):
    """Collective on the default group (Chorus's Communicator::split): the ranks that pass the
    same color form a new chorus group, ranked by key, which torch knows as it knows a
    new_group's (group=, DeviceMesh.from_group); `ranks` are its members' global ranks in that
    order, `name` a group name unique in this process (the same on every member). None for a
    negative color. It meets in the default group's store (under chorus-run, chorus-run's), not
    in torch's, and without torch's group counters: a replacement can make one with the ranks it
    joined."""
    c10d = _dist.distributed_c10d
    register = getattr(c10d, "_register_pg_in_world", None)
    if register is None:
        raise RuntimeError(f"chorus.torch.split_group needs torch 2.15 or later, not "
                           f"{torch.__version__}")
    backend = _ext.split(_group(None), int(color), int(key), [int(r) for r in ranks], name)
    if backend is None:
        return None
    store = _dist.HashStore()  # torch's ProcessGroup wants one; the backend uses its own
    pg = _dist.ProcessGroup(store, backend.rank(), backend.size())
    kind = _dist.ProcessGroup.BackendType.CUSTOM
    pg._set_default_backend(kind)
    pg._register_backend(torch.device("cpu"), kind, backend)
    pg._set_group_name(name)
    pg._set_group_desc(name)
    register(pg, BACKEND, store, name, f"cpu:{BACKEND}", {g: i for i, g in enumerate(ranks)})
    return pg


def failed_ranks(group=None):
    """Ranks of the group (its ranks, not global ones) known to have failed so far: seen dead,
    timed out or declared dead. Never blocks."""
    return list(_ext.failed_ranks(_group(group)))


def membership(group=None):
    """The group's membership now, as a Membership (lost_ranks empty): generation 0 for a group
    as created, one more per change; former_ranks[rank] is -1 in a replacement that joined."""
    generation, rank, size, former = _ext.membership(_group(group))
    return Membership(generation, rank, size, list(former), [])


def join_pending():
    """Whether this process is a replacement (CHORUS_JOIN=1) whose default group has yet to
    join the running job: until join(), its collectives raise and dist.get_rank() /
    dist.get_world_size() say what the launcher gave (RANK, WORLD_SIZE)."""
    return bool(_ext.join_pending(_group(None)))


def join():
    """A replacement's default group joins the running job: waits (within the group's timeout)
    until the running ranks admit it at a membership change (they look for waiting replacements
    every few steps: chorus.torch.elastic.Trainer), then takes the rank and size it gets there.
    Call it when ready to take part (chorus.torch.elastic.Trainer does). Returns a Membership."""
    generation, rank, size, former = _ext.join(_group(None))
    pg = _dist.distributed_c10d._get_default_group()
    ranks = getattr(_dist.distributed_c10d._world, "pg_group_ranks", None)
    if ranks is not None and pg in ranks:
        ranks[pg] = {r: r for r in range(size)}
    return Membership(generation, rank, size, list(former), [])


def joiners_waiting(group=None):
    """Replacements (CHORUS_JOIN=1) waiting to join at the group's next shrink(). Reads the
    store, not collective: ranks may see different values, agree before acting on it."""
    return _ext.joiners_waiting(_group(group))


def spares_waiting(group=None):
    """Newcomers waiting beyond the room the job has: the spares of a full job (chorus-run
    --spares), ready to take the places of the next ranks lost; joiners_waiting() leaves them
    out. Reads the store, not collective."""
    return _ext.spares_waiting(_group(group))


def set_stall_timeout(seconds, group=None):
    """The stall check of the group's communicator: while this rank has waited in a collective
    for `seconds`, a peer that is alive (its heartbeat fresh) but has been in no collective of
    the group for as long (its loop stuck outside them: a data loader, say) is declared dead, as
    a stopped one is after the heartbeat timeout. 0: off (the default). Needs the heartbeat
    (CHORUS_HEARTBEAT_SECONDS, 5 s by default here). A shrink or join turns it off again.
    chorus.torch.elastic.Trainer turns it on inside its steps."""
    _ext.set_stall_timeout(_group(group), float(seconds))


@contextlib.contextmanager
def paused(group=None):
    """Marks this rank as away from the group's collectives on purpose while the block runs
    (saving a checkpoint or evaluating alone while the others wait): its peers' stall checks
    pass it over. The heartbeat still applies (a stopped process is still declared dead)."""
    backend = _group(group)
    _ext.set_paused(backend, True)
    try:
        yield
    finally:
        _ext.set_paused(backend, False)


class JobStore:
    """Keys of the application's in the launcher's store (chorus-run's, CHORUS_STORE), which
    outlives every rank: torch's env:// store lives in rank 0 and goes with it. Values are
    bytes (a str is encoded); get() waits up to `timeout` seconds for the key."""

    def set(self, key, value):
        _ext.job_store_set(key, value.encode() if isinstance(value, str) else bytes(value))

    def get(self, key, timeout=30.0):
        import datetime

        return _ext.job_store_get(key, datetime.timedelta(seconds=timeout))

    def check(self, keys):
        return all(_ext.job_store_check(k) for k in keys)


def job_store():
    """A JobStore on the launcher's store, or None where there is none (no CHORUS_STORE)."""
    return JobStore() if _ext.job_store_available() else None


def failure(group=None):
    """Why the group's communicator failed (a lost rank, a timeout, an abort), or None while it
    works: a failed group takes no more operations until it shrinks."""
    return _ext.failure(_group(group)) or None


def __getattr__(name):
    # chorus.torch.elastic, imported when first used (it imports this module).
    if name == "elastic":
        import chorus.elastic

        return chorus.elastic
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _group(group):
    pg = _dist.distributed_c10d._get_default_group() if group is None else group
    backend = _backend_of(pg)
    if backend is None:
        raise TypeError(f"not a process group of the chorus backend: {pg}")
    return backend


_register()
_patch_monitored_barrier()

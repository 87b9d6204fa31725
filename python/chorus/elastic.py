"""DDP training that survives a lost rank, without a restart: ``chorus.torch.elastic``.

Each training step is a transaction. When a rank is lost (killed, crashed) during a step, every
survivor discards that step (no partial average is applied: parameters and optimizer state stay
as they were before it), the default group shrinks in place to the live ranks (``dist.get_rank()``
and ``dist.get_world_size()`` say the new rank and size), a hook of the user's sets the policy for
the new size (batch per rank, learning rate, data shard), and the caller redoes the step. A
replacement (``chorus-run --elastic`` restarts the lost rank with CHORUS_JOIN=1) joins inside
``init_process_group``, is admitted at a later step and takes the model, optimizer state, step,
RNG and the user's ``state`` from a peer::

    import chorus.torch
    from chorus.torch import elastic

    dist.init_process_group("chorus")
    model = elastic.ddp(net)                      # DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    trainer = elastic.Trainer(model, opt, on_change=lambda change: ..., state=data_position)
    while trainer.steps < total:
        x, y = batch_for(trainer.steps, dist.get_rank(), dist.get_world_size())
        trainer.step(lambda: F.cross_entropy(model(x), y))   # None when the step was discarded

HSDP (FSDP2 within replica groups, the replicate dimension over the default group) survives a
lost rank too, a replica group being the unit of failure: ``hsdp_mesh`` and ``HSDPTrainer``
(chorus._elastic_hsdp).

Needs a torch whose c10d lets a backend's size change (``C10D_BACKEND_HAS_RECONFIGURE``, see
``chorus.torch.shrink``). The store must outlive any rank that can be lost: torch's env://
store lives in rank 0, so losing rank 0 ends the job (docs/python.md, "Surviving a lost rank").
"""

import collections
import io
import os
import time
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import chorus.torch as _chorus_torch

# What on_change receives: the membership change and the step it happened at. former_ranks: for
# each rank now, its rank before the change; lost_ranks: ranks before it that are gone; cause:
# the failure; noticed: when this rank caught it (time.time()); seconds: how long the shrink and
# catch-up took.
Change = collections.namedtuple(
    "Change",
    "step generation rank size previous_size former_ranks lost_ranks cause noticed seconds")


class Removed(RuntimeError):
    """Raised by Trainer.step on a rank that the others left out of the group: it was stopped
    (SIGSTOP), frozen or too slow past the heartbeat timeout (CHORUS_HEARTBEAT_SECONDS) or the
    group's timeout, and they went on without it. It cannot take part any more: exit (under
    chorus-run --elastic a replacement then joins in its place)."""


def joining():
    """Whether this process is a replacement (chorus-run --elastic restarts a lost rank with
    CHORUS_JOIN=1) that has yet to join the running job (the Trainer's constructor does)."""
    return _chorus_torch._is_chorus(None) and _chorus_torch.join_pending()


def ddp(module, **kwargs):
    """DistributedDataParallel(module, **kwargs) on the default group; in a replacement, without
    DDP's initial collectives (the running ranks do not make them: the Trainer brings the state)."""
    if joining():
        kwargs.setdefault("init_sync", False)
    return DistributedDataParallel(module, **kwargs)


class Trainer:
    """Runs the steps of a DistributedDataParallel model on the default chorus group as
    transactions (see the module's doc).

    model: a DistributedDataParallel on the default group, whose backend is "chorus" (in a
    replacement, made by ddp()).
    optimizer: steps the model's parameters.
    on_change(change): called on every rank after each membership change (a replacement too),
    before the discarded step is redone: set the learning rate, batch or data shard for
    change.size here.
    state: an object with state_dict() and load_state_dict() (the data position, say) that a
    rank behind or a replacement takes from a peer with the model, optimizer, step and RNG.
    admit_every: every this many committed steps, rank 0 looks for replacements waiting to join
    and, when there are, all ranks admit them after the step (0: never).
    stall_seconds: inside step(), a rank that has waited this long in a collective declares dead
    a peer that is alive but has been in no collective for as long: its loop is stuck outside
    the Trainer (a data loader, say), and the others go on without it (it gets Removed if it
    comes back). None: the heartbeat timeout (CHORUS_HEARTBEAT_SECONDS, 5 s by default); 0:
    off. Work that one rank does alone between steps while the others may already wait (saving
    a checkpoint) goes inside ``with trainer.paused():``.
    In a replacement, the constructor takes the state from a peer.
    """

    def __init__(self, model, optimizer, on_change=None, state=None, admit_every=10,
                 stall_seconds=None):
        if not isinstance(model, DistributedDataParallel):
            raise TypeError(
                "chorus.torch.elastic.Trainer takes a DistributedDataParallel model, got "
                f"{type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                "chorus.torch.elastic.Trainer takes a torch.optim.Optimizer, got "
                f"{type(optimizer).__name__}")
        if state is not None and not (hasattr(state, "state_dict")
                                      and hasattr(state, "load_state_dict")):
            raise TypeError("chorus.torch.elastic.Trainer: state needs state_dict() and "
                            f"load_state_dict(), {type(state).__name__} has not")
        if not isinstance(admit_every, int) or admit_every < 0:
            raise ValueError("chorus.torch.elastic.Trainer: admit_every must be an int >= 0, "
                             f"got {admit_every!r}")
        default = dist.distributed_c10d._get_default_group()
        if model.process_group is not default:
            raise ValueError(
                "chorus.torch.elastic.Trainer: the model's DDP group must be the default group "
                "(only it can shrink in place)")
        if not _chorus_torch._is_chorus(default):
            raise ValueError(
                "chorus.torch.elastic.Trainer: the default group's backend is not chorus "
                "(init_process_group(\"chorus\"))")
        if not _chorus_torch.can_shrink():
            raise RuntimeError(
                "chorus.torch.elastic.Trainer needs a torch whose c10d lets a backend's size "
                f"change (C10D_BACKEND_HAS_RECONFIGURE); torch {torch.__version__} has none")
        self.stall_seconds = _stall_seconds(stall_seconds)
        self._stall_by_default = stall_seconds is None
        self.model = model
        self.optimizer = optimizer
        self.on_change = on_change
        self.state = state
        self.admit_every = admit_every
        self.steps = 0  # committed steps
        self.changes = []  # every Change so far
        self._vote = torch.zeros(2, dtype=torch.int64)
        self._admit_next = False  # replacements seen waiting at the last committed step
        if joining():
            self._welcome(_chorus_torch.join())

    def step(self, loss_fn):
        """One step: loss_fn() runs the forward pass and returns the loss; backward, the
        gradient all-reduce and the optimizer step follow. Returns the loss when the step
        committed, None when it was discarded after a lost rank (the group has shrunk and
        on_change ran: compute the batch again for the new rank and size and call step again).
        Replacements seen waiting at a committed step are admitted at the start of the next
        call, which then also returns None without running the step: the caller's own
        bookkeeping of the committed step (its data position) is done by then, and the state a
        replacement takes includes it."""
        if self._admit_next:
            self._admit_next = False
            self._change(None, None)
            return None
        if not self.stall_seconds:
            return self._step(loss_fn)
        try:
            _chorus_torch.set_stall_timeout(self.stall_seconds)
        except RuntimeError as e:
            if not self._stall_by_default:
                raise
            # The progress records are off (CHORUS_PROGRESS_SECONDS=0): no stall check, said once.
            warnings.warn(f"chorus.torch.elastic.Trainer: no stall check: {e}", stacklevel=2)
            self.stall_seconds = 0
            return self._step(loss_fn)
        try:
            return self._step(loss_fn)
        finally:
            # Off between steps: the caller's own work there (evaluation on one rank, say) is
            # not a stall. A change replaced the communicator (the check is off on the new one).
            if _chorus_torch.failure() is None:
                _chorus_torch.set_stall_timeout(0)

    def paused(self):
        """``with trainer.paused():`` around work this rank does alone between steps while the
        others may be waiting in the next step (saving a checkpoint): they do not take it for a
        stalled rank (chorus.torch.paused)."""
        return _chorus_torch.paused()

    def _step(self, loss_fn):
        self.optimizer.zero_grad(set_to_none=True)
        try:
            loss = loss_fn()
            loss.backward()
            # Commits when every rank's backward finished: a rank that got this far has the
            # full average; one that saw a failure never adds its 1. Rank 0 adds the
            # replacements it sees waiting.
            self._vote[0] = 1
            self._vote[1] = self._joiners_seen()
            dist.all_reduce(self._vote)
            if int(self._vote[0]) != dist.get_world_size():
                raise RuntimeError(f"commit vote of step {self.steps}: {int(self._vote[0])} of "
                                   f"{dist.get_world_size()} ranks")
        except Exception as e:  # noqa: BLE001  only a failure of the group is handled here
            cause = _chorus_torch.failure()
            if cause is None:
                raise
            self._change(cause, e)
            return None
        self.optimizer.step()
        self.steps += 1
        self._admit_next = int(self._vote[1]) > 0
        return loss

    def admit(self):
        """Collective, between steps: admits the replacements waiting now (rank 0 looks), as
        step() does every admit_every steps. Returns how many joined."""
        seen = torch.tensor([_chorus_torch.joiners_waiting() if dist.get_rank() == 0 else 0],
                            dtype=torch.int64)
        dist.broadcast(seen, src=0)
        if int(seen.item()) == 0:
            return 0
        self._change(None, None)
        return self.changes[-1].former_ranks.count(-1)

    def _joiners_seen(self):
        if (self.admit_every and dist.get_rank() == 0
                and (self.steps + 1) % self.admit_every == 0):
            return _chorus_torch.joiners_waiting()
        return 0

    def _change(self, cause, error):
        """Discards this step (after a failure), shrinks the group (admitting replacements
        waiting) and brings every member to the newest committed state."""
        noticed, started = time.time(), time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        previous = dist.get_world_size()
        # Another rank may be lost while the members change (in the agreement, which Chorus
        # retries itself, or in the catch-up after it): then they change again, from where
        # they are, until a membership gets through. Each round leaves a rank out, so this
        # ends; former_ranks and lost_ranks are composed to refer to the group before the first.
        former, lost = list(range(previous)), []
        while True:
            m = self._shrink(cause, error)
            lost += [former[r] for r in m.lost_ranks]
            former = [former[f] if f >= 0 else -1 for f in m.former_ranks]
            try:
                # DDP's reducer kept the failed step's state (its divisor among them): torch's
                # own reset for a group whose size changed, on the same (shrunk) group.
                self.model._update_process_group(self.model.process_group)
                self._catch_up(previous)
                if -1 in m.former_ranks:
                    _same_buckets(self.model)
                break
            except Exception as e:  # noqa: BLE001  only a failure of the group is handled
                again = _chorus_torch.failure()
                if again is None:
                    raise
                cause = f"{cause or 'admitting replacements'}; then, during the recovery: {again}"
                error = e
        self._changed(Change(self.steps, m.generation, m.rank, m.size, previous, former,
                             sorted(lost), cause, noticed, time.perf_counter() - started))

    def _shrink(self, cause, error):
        # The failure names this rank as declared dead (its heartbeat was silent, or it stalled):
        # the others leave it out of any agreement, which it need not wait for (nor the store,
        # which may be gone by the time a long-stuck rank comes back).
        if cause and f"rank {dist.get_rank()} was declared dead" in cause:
            raise Removed(self._removed_text(cause)) from error
        try:
            return _chorus_torch.shrink()
        except Exception as e:
            if "was declared dead by the survivors" in str(e):
                raise Removed(self._removed_text(e)) from error
            why = f"a failure ({cause})" if cause else "admitting replacements"
            raise RuntimeError(f"chorus.torch.elastic: the membership change at step "
                               f"{self.steps} after {why} failed: {e}") from error

    def _removed_text(self, why):
        return (f"chorus.torch.elastic: rank {dist.get_rank()} was removed from the job at step "
                f"{self.steps}: the other ranks declared it dead and went on without it (it was "
                f"stopped, frozen, stuck or too slow: {why}); it cannot take part any more")

    def _welcome(self, m):
        """A replacement, just admitted by the running ranks' _change: takes the state (their
        catch-up) and applies the change's policy as they do."""
        started = time.perf_counter()
        self.steps = -1  # behind everyone
        previous = self._catch_up(None)
        _same_buckets(self.model)
        self._changed(Change(self.steps, m.generation, m.rank, m.size, previous, m.former_ranks,
                             [], "joined as a replacement", time.time(),
                             time.perf_counter() - started))

    def _changed(self, change):
        self.changes.append(change)
        if self.on_change is not None:
            self.on_change(change)

    def _catch_up(self, previous):
        """A rank whose commit vote completed applied the step; one whose vote failed did not;
        a replacement has nothing. The ranks behind take the state of the first rank ahead
        (_take_newest)."""
        return _take_newest(self.steps, self._state, self._load, previous)

    def _load(self, state, whose):
        self.model.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = state["steps"]
        torch.set_rng_state(state["rng"])
        if self.state is not None:
            self.state.load_state_dict(state["state"])

    def _state(self):
        return {"model": self.model.module.state_dict(),
                "optimizer": self.optimizer.state_dict(), "steps": self.steps,
                "rng": torch.get_rng_state(),
                "state": None if self.state is None else self.state.state_dict()}


def _take_newest(count, make_state, load, previous):
    """Collective: the ranks whose `count` (committed steps or synchronisations; -1 in a
    replacement) is below the highest take the state (make_state()) of the first rank with it,
    through load(state, whose). previous: the group's size before the change (None in a
    newcomer, which does not know it); returns the source's, the size the state was made for (a
    spare admitted with a rank's loss replaces it: 4 ranks before and after)."""
    mine = torch.tensor([count], dtype=torch.int64)
    every = torch.zeros(dist.get_world_size(), dtype=torch.int64)
    dist.all_gather_into_tensor(every, mine)
    newest = int(every.max())
    if int(every.min()) == newest:
        return previous
    source = int((every == newest).nonzero()[0])
    payload = None
    if dist.get_rank() == source:
        payload = _pack(dict(make_state(), previous_size=previous))
    state = _unpack(_broadcast_bytes(payload, source))
    if dist.get_rank() != source:
        load(state, f"rank {source}'s")
    return state["previous_size"]


def _stall_seconds(value):
    heartbeat = float(os.environ.get("CHORUS_HEARTBEAT_SECONDS") or 5)  # the backend's default
    if value is None:
        return heartbeat
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError("chorus.torch.elastic.Trainer: stall_seconds must be a number >= 0 "
                         f"(0: off), got {value!r}")
    if value > 0 and heartbeat <= 0:
        raise ValueError("chorus.torch.elastic.Trainer: stall_seconds needs the heartbeat, which "
                         "CHORUS_HEARTBEAT_SECONDS=0 turned off")
    return float(value)


def _same_buckets(model):
    """After replacements joined: every member rebuilds DDP's gradient buckets now, from rank 0's
    layout. A fresh DDP (the replacement's) starts with its first layout and the running ranks'
    have been rebuilt in gradient-ready order: their first all-reduces would not match.

    The layout they agree on now is in parameter order (the only order torch lets every rank
    push at once), whose first bucket, the first layers', is ready last: no all-reduce would
    start before the whole backward ends. So the reducer is reset as DDP starts: the next
    backward records the ready order on every rank and the forward after it rebuilds the
    buckets in that order, on every member at the same step, as before the change."""
    model.reducer._push_all_rebuilt_params()
    model.reducer._rebuild_buckets()  # collective: rank 0 broadcasts its bucket layout
    model.reducer._reset_state()
    model._has_rebuilt_buckets = False


def _pack(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _unpack(data):
    return torch.load(io.BytesIO(data.numpy().tobytes()), weights_only=False)


def _broadcast_bytes(data, source):
    """data (a uint8 tensor) on rank `source`, None elsewhere; returns it on every rank."""
    length = torch.tensor([0 if data is None else data.numel()], dtype=torch.int64)
    dist.broadcast(length, src=source)
    if data is None:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    dist.broadcast(data, src=source)
    return data


# HSDP's replicate dimension (it uses Change, Removed and the helpers above).
from chorus._elastic_hsdp import HSDPTrainer, hsdp_mesh  # noqa: E402,F401


def __getattr__(name):
    # AsyncTrainer (chorus.async_training's wrappers under lost ranks) lives apart.
    if name == "AsyncTrainer":
        from chorus._elastic_async import AsyncTrainer

        return AsyncTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""chorus.async_training's wrappers (LocalSGD, DiLoCo, DelayedUpdates) surviving a lost rank,
without a restart: ``chorus.torch.elastic.AsyncTrainer`` (docs/python.md, "Surviving a lost rank")::

    dist.init_process_group("chorus")            # in a replacement: joins the running job
    model = Net(); opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    trainer = elastic.AsyncTrainer(DiLoCo(model, opt, sync_every=32, fragments=4, overlap=True),
                                   on_change=policy, state=data_position)
    while trainer.steps < total:
        x, y = batch_for(trainer.steps, dist.get_rank(), dist.get_world_size())
        trainer.step(lambda: F.cross_entropy(model(x), y))   # None: replacements were admitted
    trainer.synchronize()                        # every rank: bit-identical parameters

The inner steps make no collective; every step that synchronises (LocalSGD's average, DiLoCo's
outer step of the fragments due, the completion of fragments launched at the step before, a
divergence check, the final synchronize(); with DelayedUpdates every step, see _Delayed) is a
transaction: the wrapper's state (parameters,
anchor, outer momentum, error feedback, fragments in flight, divergence history) is copied
first, and a one-integer commit vote ends it. When a rank is lost during it, every survivor
puts that state back (no partial average is applied), the default group shrinks, the wrapper's
size follows (the divisor of the averages), fragments that were in flight are launched again
from their launch-time parameters and error feedback, and the synchronisation is redone among
the survivors. A rank whose vote completed while another's failed (the lost rank voted, then
died) committed; the ranks behind then take its whole state, as a replacement does.

Overlapped DiLoCo fragments (overlap=True) are launched after the vote, so they overlap the next
step's compute and are completed (and committed) in the next step's transaction.
"""

import copy
import os
import time

import torch
import torch.distributed as dist

import chorus.elastic as _el
import chorus.torch as _chorus_torch
from chorus import async_training as _at
from chorus._tensor_packing import _flat

# The vote's own reference: a test that patches dist.all_reduce to fail inside a
# synchronisation leaves the vote alone.
_vote_all_reduce = dist.all_reduce


class AsyncTrainer:
    """Runs a chorus.async_training wrapper on the default chorus group, surviving lost ranks
    and admitting replacements (see the module's doc).

    wrapper: LocalSGD, DiLoCo or DelayedUpdates on the default group (group=None), made
    before any step (in a replacement its constructor makes no collective; the state comes
    from a peer, its configuration checked against the peer's).
    on_change(change), state, admit_every: as chorus.torch.elastic.Trainer's (on_change runs on
    every rank after each membership change, before the failed synchronisation is redone; state
    goes with the model, optimizers and wrapper to a rank behind or a replacement; every
    admit_every steps, at a synchronising step, rank 0 looks for replacements waiting).
    """

    def __init__(self, wrapper, on_change=None, state=None, admit_every=10):
        if not isinstance(wrapper, (_at.LocalSGD, _at.DiLoCo, _at.DelayedUpdates)):
            raise TypeError("chorus.torch.elastic.AsyncTrainer takes a chorus.async_training "
                            f"wrapper (LocalSGD, DiLoCo, DelayedUpdates), got "
                            f"{type(wrapper).__name__}")
        if wrapper.group is not None:
            raise ValueError("chorus.torch.elastic.AsyncTrainer: the wrapper's group must be the "
                             "default group (only it can shrink in place)")
        if state is not None and not (hasattr(state, "state_dict")
                                      and hasattr(state, "load_state_dict")):
            raise TypeError("chorus.torch.elastic.AsyncTrainer: state needs state_dict() and "
                            f"load_state_dict(), {type(state).__name__} has not")
        if not isinstance(admit_every, int) or admit_every < 0:
            raise ValueError("chorus.torch.elastic.AsyncTrainer: admit_every must be an int >= "
                             f"0, got {admit_every!r}")
        if not _chorus_torch._is_chorus(None):
            raise ValueError("chorus.torch.elastic.AsyncTrainer: the default group's backend is "
                             "not chorus (init_process_group(\"chorus\"))")
        if not _chorus_torch.can_shrink():
            raise RuntimeError(
                "chorus.torch.elastic.AsyncTrainer needs a torch whose c10d lets a backend's "
                f"size change (C10D_BACKEND_HAS_RECONFIGURE); torch {torch.__version__} has none")
        if os.environ.get("CHORUS_SPARES", "0") not in ("", "0"):
            # The survivors redo a failed synchronisation within the same step(), which a spare
            # admitted by the failure's membership change would not take part in.
            raise ValueError(
                "chorus.torch.elastic.AsyncTrainer does not take spares (chorus-run --spares) "
                "yet: start replacements instead (--max-restarts); they are admitted between "
                "steps")
        self.wrapper = wrapper
        self.model, self.optimizer = wrapper.model, wrapper.optimizer
        self.on_change, self.state, self.admit_every = on_change, state, admit_every
        self.changes = []  # every Change so far
        self.commits = 0  # committed synchronisations
        self._diloco = isinstance(wrapper, _at.DiLoCo)
        self._delayed = _Delayed(wrapper) if isinstance(wrapper, _at.DelayedUpdates) else None
        if self._diloco:
            wrapper._deferred = []  # overlapped launches: after the vote (_launch_deferred)
        self._vote = torch.zeros(2, dtype=torch.int64)
        self._admit_next = False
        self._looked = 0  # the step at which rank 0 last looked for replacements
        if _el.joining():
            self._welcome(_chorus_torch.join())

    @property
    def steps(self):
        """Steps taken (the wrapper's step count)."""
        return self.wrapper.step_count

    def step(self, loss_fn):
        """One step: loss_fn() runs the forward pass and returns the loss; backward, the inner
        optimizer step and, when due, the synchronisation (a transaction) follow. Returns the
        loss. Replacements seen waiting at a synchronisation are admitted at the start of the
        next call, which then returns None without running the step (compute the batch again
        for the new rank and size, as Trainer.step asks)."""
        if self._admit_next:
            self._admit()
            return None
        w = self.wrapper
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        w.step_count += 1
        if self._delayed:
            self._delayed.gradients()  # sent after this step's vote
        else:
            w._step()  # the inner step: no collective
        if self._delayed or self._check_due() or self._sync_due():
            self._transaction(self._sync)
        return loss

    def synchronize(self):
        """Collective: the wrapper's final synchronize() as a transaction (redone among the
        survivors after a lost rank). Returns the parameters' hash."""
        out = []

        def sync():
            self._drain()  # DelayedUpdates: the last average is waited for, never applied
            out.append(self.wrapper.synchronize())

        self._transaction(sync)
        return out[-1]

    def admit(self):
        """Collective, between steps: admits the replacements waiting now (rank 0 looks).
        Returns how many joined."""
        seen = torch.tensor([_chorus_torch.joiners_waiting() if dist.get_rank() == 0 else 0],
                            dtype=torch.int64)
        dist.broadcast(seen, src=0)
        if int(seen.item()) == 0:
            return 0
        self._admit()
        return self.changes[-1].former_ranks.count(-1)

    # --- transactions -----------------------------------------------------------------------
    def _sync(self):
        """A transaction's work. After a change a rank behind may hold a peer's state, of
        another step: what is due is decided again for each try."""
        if self._delayed:
            self._delayed.apply_previous()
        self.wrapper._sync(self._check_due())

    def _check_due(self):
        w = self.wrapper
        return bool(w.check_every) and w.step_count % w.check_every == 0

    def _sync_due(self):
        w = self.wrapper
        if self._diloco:
            return bool(w._in_flight) or bool(w._due(w.step_count))
        return w.step_count % w.sync_every == 0

    def _transaction(self, sync):
        snapshot = self._snapshot()
        while True:
            try:
                self._relaunch()
                sync()
                self._vote[0] = 1
                self._vote[1] = self._joiners_seen()
                _vote_all_reduce(self._vote)
                if int(self._vote[0]) != dist.get_world_size():
                    raise RuntimeError(f"commit vote at step {self.steps}: {int(self._vote[0])} "
                                       f"of {dist.get_world_size()} ranks")
                break
            except Exception as e:  # noqa: BLE001  only a failure of the group is handled here
                cause = _chorus_torch.failure()
                if cause is None:
                    raise
                self._restore(snapshot)
                self._change(cause, e)
                snapshot = self._snapshot()
        self.commits += 1
        self._admit_next = self._admit_next or int(self._vote[1]) > 0
        self._launch_deferred()

    def _joiners_seen(self):
        if self.admit_every and dist.get_rank() == 0 and \
                self.steps - self._looked >= self.admit_every:
            self._looked = self.steps
            return _chorus_torch.joiners_waiting()
        return 0

    def _snapshot(self):
        """What a synchronisation may change, copied."""
        w = self.wrapper
        s = {"params": [p.detach().clone() for p in w.params], "history": len(w.history),
             "divergence": w.divergence, "step": w.step_count}
        if self._delayed:
            s["delayed"] = self._delayed.snapshot()
        if self._diloco:
            s.update(anchor=[a.detach().clone() for a in w.anchor],
                     outer=copy.deepcopy(w.outer_optimizer.state_dict()),
                     errors=[None if e is None else e.clone() for e in w.errors],
                     in_flight=[_bare(p, mean=False) for p in w._in_flight])
        return s

    def _restore(self, s):
        w = self.wrapper
        with torch.no_grad():
            for p, saved in zip(w.params, s["params"]):
                p.copy_(saved)
        del w.history[s["history"]:]
        w.divergence, w.step_count = s["divergence"], s["step"]
        if self._delayed:
            self._delayed.restore(s["delayed"])
        if self._diloco:
            with torch.no_grad():
                for a, saved in zip(w.anchor, s["anchor"]):
                    a.copy_(saved)
                    a.grad = None
            # deepcopy: load_state_dict keeps the tensors it is given (the momentum buffers)
            w.outer_optimizer.load_state_dict(copy.deepcopy(s["outer"]))
            w.errors = [None if e is None else e.clone() for e in s["errors"]]
            w._in_flight = [dict(p) for p in s["in_flight"]]  # launched again: _relaunch
            w._deferred = []

    def _relaunch(self):
        """Launches again, on the group as it is now, the fragments in flight whose collective
        was lost with a membership change, from their launch-time parameters and error
        feedback: every rank sends what it sent the first time."""
        if self._delayed:
            self._delayed.relaunch()
        if not self._diloco:
            return
        w = self.wrapper
        for i, p in enumerate(w._in_flight):
            if "work" in p or "mean" in p:
                continue
            f, before = p["fragment"], p.get("error_before")
            w.errors[f] = None if before is None else before.clone()
            again = w._launch(f, local=p["local"])
            again["error_before"] = before
            w._in_flight[i] = again

    def _launch_deferred(self):
        """DiLoCo's overlapped fragments due at this step, launched after its vote: they overlap
        the next step's compute and are completed in its transaction."""
        if self._delayed:
            self._delayed.launch()
        if not self._diloco:
            return
        w = self.wrapper
        deferred, w._deferred = w._deferred, []
        for f in deferred:
            before = None if w.errors[f] is None else w.errors[f].clone()
            try:
                p = w._launch(f)
            except Exception:  # noqa: BLE001  the group failed: the next transaction recovers
                if _chorus_torch.failure() is None:
                    raise
                w.errors[f] = before
                idx = w.fragments[f]
                p = {"fragment": f, "local": _flat([w.params[i] for i in idx])}
            p["error_before"] = before
            w._in_flight.append(p)

    def _drain(self):
        if self._delayed:
            self._delayed.mean()
        for p in getattr(self.wrapper, "_in_flight", []):
            self.wrapper._mean_delta(p)

    # --- membership changes -----------------------------------------------------------------
    def _admit(self):
        """Admits the replacements seen waiting: fragments in flight are completed first (a
        transaction of their own), so that the group changes with nothing in flight."""
        if (self._diloco and self.wrapper._in_flight) or self._delayed:
            self._transaction(self._drain)
        self._admit_next = False
        self._change(None, None)

    def _change(self, cause, error):
        """Shrinks the group (admitting replacements waiting), makes the wrapper follow the new
        size and brings the ranks behind to the newest committed state."""
        noticed, started = time.time(), time.perf_counter()
        previous = dist.get_world_size()
        former, lost = list(range(previous)), []
        while True:  # as Trainer._change: a failure during the recovery changes again
            m = _el.Trainer._shrink(self, cause, error)
            lost += [former[r] for r in m.lost_ranks]
            former = [former[f] if f >= 0 else -1 for f in m.former_ranks]
            try:
                self._follow()
                self._catch_up(previous)
                break
            except Exception as e:  # noqa: BLE001  only a failure of the group is handled
                again = _chorus_torch.failure()
                if again is None:
                    raise
                cause = f"{cause or 'admitting replacements'}; then, during the recovery: {again}"
                error = e
        self._changed(_el.Change(self.steps, m.generation, m.rank, m.size, previous, former,
                                 sorted(lost), cause, noticed, time.perf_counter() - started))

    def _follow(self):
        self.wrapper.world, self.wrapper.rank = dist.get_world_size(), dist.get_rank()

    def _welcome(self, m):
        """A replacement, just admitted: takes the state from a peer and applies the change's
        policy as the running ranks do."""
        started = time.perf_counter()
        self.commits = -1  # behind everyone
        self._follow()
        previous = self._catch_up(None)
        self._changed(_el.Change(self.steps, m.generation, m.rank, m.size, previous,
                                 m.former_ranks, [], "joined as a replacement", time.time(),
                                 time.perf_counter() - started))

    def _changed(self, change):
        self.changes.append(change)
        if self.on_change is not None:
            self.on_change(change)

    def _catch_up(self, previous):
        """The ranks with fewer committed synchronisations (a replacement has none) take the
        whole state of the first rank with the most (elastic._take_newest)."""
        return _el._take_newest(self.commits, self._state, self._load, previous)

    def _load(self, state, whose):
        """Takes a state of _state()'s: a peer's (whose) or a saved one."""
        if state["config"] != self.wrapper._config_digest:
            raise ValueError(
                f"chorus.torch.elastic.AsyncTrainer: the {type(self.wrapper).__name__} "
                f"configuration of rank {dist.get_rank()} differs from {whose}, whose state it "
                "takes (a replacement must be made with the same settings)")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._load_wrapper(state["wrapper"])
        self.commits = state["commits"]
        self._looked = state["looked"]
        torch.set_rng_state(state["rng"])
        if self.state is not None:
            self.state.load_state_dict(state["state"])

    def _state(self):
        w = self.wrapper
        s = _at._Base.state_dict(w)
        if self._delayed:
            s["delayed"] = self._delayed.state()
        if self._diloco:
            s.update(anchor=[a.detach() for a in w.anchor],
                     outer=w.outer_optimizer.state_dict(), errors=w.errors,
                     in_flight=[_bare(p, mean=True) for p in w._in_flight])
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "wrapper": s, "commits": self.commits, "looked": self._looked,
                "rng": torch.get_rng_state(), "config": w._config_digest,
                "state": None if self.state is None else self.state.state_dict()}

    def _load_wrapper(self, s):
        w = self.wrapper
        _at._Base.load_state_dict(w, s)
        if self._delayed:
            self._delayed.load(s["delayed"])
        if self._diloco:
            with torch.no_grad():
                for a, saved in zip(w.anchor, s["anchor"]):
                    a.copy_(saved)
            w.outer_optimizer.load_state_dict(s["outer"])
            w.errors = list(s["errors"])
            w._in_flight = [dict(p) for p in s["in_flight"]]
            w._deferred = []


def _bare(pending, mean):
    """A fragment in flight without its collective: what launching it again needs (and its
    mean delta, where it was completed and `mean`)."""
    keep = ("fragment", "local", "error_before") + (("anchor", "n", "mean") if mean else ())
    out = {k: pending[k] for k in keep if k in pending}
    if "mean" not in out:
        out.pop("anchor", None)
        out.pop("n", None)
    return out


class _Delayed:
    """DelayedUpdates under AsyncTrainer: every step is a transaction that applies the previous
    step's average (waited for), and this step's gradients leave after its vote, overlapping the
    next step's compute (the wrapper's arithmetic, in another order: the same bits)."""

    def __init__(self, wrapper):
        self.w = wrapper
        self.prev = None  # the previous step's gradients: local, and sums/works or mean
        self.next = None  # this step's, until its vote

    def gradients(self):
        self.next = [torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p))
                                .detach().reshape(-1) for p in bucket])
                     for bucket in self.w._buckets]

    def launch(self):
        if self.next is None:
            return
        local, self.next = self.next, None
        try:
            self.prev = self._send(local)
        except Exception:  # noqa: BLE001  the group failed: the next transaction recovers
            if _chorus_torch.failure() is None:
                raise
            self.prev = {"local": local}  # sent again there (relaunch)

    def _send(self, local):
        sums = [t.clone() for t in local]
        return {"local": local, "sums": sums,
                "works": [self.w._all_reduce(t, async_op=True) for t in sums]}

    def mean(self):
        p = self.prev
        if p is not None and "mean" not in p:
            for work in p["works"]:
                work.wait()
            p["mean"] = [t.div_(self.w.world) for t in p["sums"]]
        return None if p is None else p["mean"]

    def apply_previous(self):
        w, mean = self.w, self.mean()
        for p in w.params:
            p.grad = None
        if mean is None:  # step 1: nothing to apply yet
            return
        for bucket, flat in zip(w._buckets, mean):
            off = 0
            for p in bucket:
                p.grad = flat[off:off + p.numel()].view_as(p).clone()
                off += p.numel()
        w.optimizer.step()

    def relaunch(self):
        if self.prev is not None and "works" not in self.prev and "mean" not in self.prev:
            self.prev = self._send(self.prev["local"])

    def snapshot(self):
        return {"optimizer": copy.deepcopy(self.w.optimizer.state_dict()),
                "prev": None if self.prev is None else {"local": self.prev["local"]},
                "next": self.next}

    def restore(self, s):
        self.w.optimizer.load_state_dict(copy.deepcopy(s["optimizer"]))
        self.prev = None if s["prev"] is None else dict(s["prev"])
        self.next = s["next"]

    def state(self):
        keep = ("local", "mean")
        return {"prev": None if self.prev is None else
                {k: self.prev[k] for k in keep if k in self.prev}, "next": self.next}

    def load(self, s):
        self.prev = None if s["prev"] is None else dict(s["prev"])
        self.next = s["next"]

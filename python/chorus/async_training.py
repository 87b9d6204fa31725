"""Asynchronous and low-bandwidth data-parallel training for any torch model and optimizer.

The wrapper replaces ``optimizer.step()``; the rest of the loop is unchanged::

    from chorus.async_training import DelayedUpdates, LocalSGD, DiLoCo
    trainer = DiLoCo(model, optimizer, sync_every=32, compress="int8", check_every=16,
                     divergence_limit=0.05)      # or LocalSGD(model, opt, sync_every=8),
    for x, y in batches:                         #    DelayedUpdates(model, opt)
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        trainer.step()                           # instead of optimizer.step()
    trainer.synchronize()                        # every rank: bit-identical parameters

It uses only torch.distributed calls, on the default group or ``group=`` (backend "chorus" or
"gloo"); ``import chorus.async_training`` does not load the chorus backend. The arithmetic is the
one of the C++ data-parallel layer (docs/dp.md, "Modes" and "DiLoCo"):

* DelayedUpdates: step t's gradients go out in an asynchronous all-reduce (a few flat buckets)
  when ``step()`` is called and are waited for in step t+1's ``step()``, after its forward and
  backward: step t applies step t-1's average (step 1 applies nothing). Every rank applies the
  same bits, so the replicas stay identical. The last step's average is never applied.
* LocalSGD: each rank steps alone; every ``sync_every`` (H) steps the parameters are averaged.
* DiLoCo: each rank's optimizer is the inner one; every H steps the outer step:
  ``delta = mean_r(anchor - params_r)``, then SGD with Nesterov momentum on the anchor
  (``m = mu m + delta; anchor -= lr (delta + mu m)``, torch.optim.SGD(nesterov=True)),
  ``params = anchor``. ``compress="bf16"|"int8"`` sends each rank's delta (with its error
  feedback: ``q = round(delta + err); err = delta + err - q``) as bf16, or int8 in blocks of
  ``block`` values with a float32 scale (chorus.hooks' encoding); the payloads are all-gathered
  and summed in float32 in rank order, the same bits on every rank. ``fragments=F`` cuts the
  parameters into F contiguous groups of whole tensors of about equal size; fragment f syncs
  after the steps where ``step % H == f * H // F`` (no step sends the whole model).
  ``overlap=True``: a fragment's collective is started after its step and completed after the
  next step's inner optimizer step, so it overlaps that step's forward and backward; the
  fragment's parameters then become the new anchor plus what this rank's inner step changed
  meanwhile.

Divergence (``check_every=K``, 0 = never): every K steps, before that step's synchronisation,
one float32 all-reduce of the parameters gives their mean over ranks (on a step where LocalSGD
averages, or where uncompressed DiLoCo syncs every fragment, the sync's all-reduce gives it), and
two small all-reduces (max, sum) give, without an all-gather:

* ``max``: the largest over ranks of ||p_r - mean|| / ||mean|| (L2 over all parameters);
* ``rms``: sqrt(mean over ranks of ||p_r - mean||^2) / ||mean||;
* ``elementwise``: 2 max_i max_r |p_r[i] - mean[i]|, the C++ layer's divergence.

The last one is in ``trainer.divergence`` and every one in ``trainer.history``; each is logged
(``log=``, default: stderr on rank 0). Past ``divergence_limit`` (on ``max``) the wrapper
synchronises at once (LocalSGD: averages; DiLoCo: an outer step of every fragment; DelayedUpdates:
averages the parameters) and says so; a step that synchronises anyway just says so.

Checkpoints: ``state_dict()`` / ``load_state_dict()`` with ``torch.save`` per rank, or
``save_checkpoint(path, state)`` / ``load_checkpoint(path)`` with torch.distributed.checkpoint
(one directory, every rank's state under keys of its own: the replicas differ between
synchronisations); either resumes bit for bit.

``bytes_sent`` counts what this rank sent since construction (the start's broadcast left out), as
a ring algorithm sends it: an all-reduce of n bytes 2 n (N-1) / N, an all-gather of n bytes per
rank n (N-1), a broadcast n from the root. Divergence checks count too.
"""

import dataclasses
import math
import sys

import torch
import torch.distributed as dist

from chorus._async_checkpoint import load_checkpoint, save_checkpoint  # noqa: F401  public API
from chorus._tensor_packing import (  # noqa: F401  state_hash is public API here
    COMPRESSIONS,
    _buckets,
    _flat,
    _fragments,
    _unflat,
    decode,
    encode,
    state_hash,
    state_hash_text,
)


@dataclasses.dataclass
class Divergence:
    """One measurement: the step, the three figures (see the module's help), and whether it
    forced a synchronisation."""

    step: int
    max: float
    rms: float
    elementwise: float
    forced_sync: bool = False


def _default_log(group):
    def log(text):  # rank 0 now: a membership change (chorus.torch.elastic) may move it
        if dist.get_rank(group) == 0:
            print(text, file=sys.stderr, flush=True)

    return log


def _joining(group):
    """Whether this process is a replacement whose default chorus group has yet to join the job
    (chorus.torch.elastic): its collectives would raise, and AsyncTrainer brings the state."""
    backend = sys.modules.get("chorus.torch")  # not imported here: no backend needed
    return group is None and backend is not None and backend._is_chorus(None) \
        and backend.join_pending()


class _Base:
    mode = None

    def __init__(self, model, optimizer, *, group=None, sync_every=1, check_every=0,
                 divergence_limit=None, log=None, bucket_mb=25.0, extra=None):
        self.model = model
        self.optimizer = optimizer
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.sync_every = sync_every
        self.check_every = check_every
        self.divergence_limit = divergence_limit
        self.log = log or _default_log(group)
        self.bucket_bytes = int(bucket_mb * 2**20)
        self.step_count = 0
        self.bytes_sent = 0
        self.divergence = None
        self.history = []
        config = dict(mode=self.mode, sync_every=sync_every, check_every=check_every,
                      divergence_limit=divergence_limit, **(extra or {}),
                      parameters=(len(self.params), sum(p.numel() for p in self.params),
                                  state_hash_text(repr([tuple(p.shape) for p in self.params]))))
        self._config_digest = state_hash_text(repr(sorted(config.items())))
        if _joining(group):  # checked against a peer's when it joins, which brings the state
            problem = self._problem(config)
            if problem:
                raise ValueError(f"chorus {type(self).__name__}: invalid configuration: {problem}")
            return
        self._check_config(config, self._problem(config))
        # Every rank starts from rank 0's parameters and buffers.
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                self._broadcast(t.data)
        self.bytes_sent = 0  # from the first step on

    # --- configuration -------------------------------------------------------------------
    def _problem(self, config):
        """What is wrong with this rank's configuration (None: nothing)."""
        if not isinstance(config["sync_every"], int) or config["sync_every"] < 1:
            return f"sync_every (H) must be an integer >= 1, got {config['sync_every']!r}"
        if not isinstance(config["check_every"], int) or config["check_every"] < 0:
            return f"check_every must be an integer >= 0, got {config['check_every']!r}"
        if config["divergence_limit"] is not None and not config["divergence_limit"] > 0:
            return f"divergence_limit must be > 0, got {config['divergence_limit']!r}"
        if not self.params:
            return "the model has no parameter that requires a gradient"
        if any(p.dtype != torch.float32 for p in self.params):
            return "every parameter must be float32"
        return None

    def _check_config(self, config, problem):
        """All-gathers each rank's configuration and problem; raises the same error on every
        rank when any rank's is invalid or differs from rank 0's."""
        every = [None] * self.world
        dist.all_gather_object(every, (self._config_digest, config, problem), group=self.group)
        name = type(self).__name__
        bad = [(r, p) for r, (_, _, p) in enumerate(every) if p]
        if bad:
            raise ValueError(f"chorus {name}: invalid configuration on rank(s) "
                             + "; ".join(f"{r}: {p}" for r, p in bad))
        differ = [r for r, (d, _, _) in enumerate(every) if d != every[0][0]]
        if differ:
            first, theirs = every[0][1], every[differ[0]][1]
            keys = sorted(set(first) | set(theirs))
            what = ", ".join(f"{k} {first.get(k)!r} on rank 0, {theirs.get(k)!r} on rank "
                             f"{differ[0]}" for k in keys if first.get(k) != theirs.get(k))
            raise ValueError(f"chorus {name}: the configuration of rank(s) {differ} differs from "
                             f"rank 0's: {what}")

    # --- collectives, counted ---------------------------------------------------------------
    def _all_reduce(self, t, op=dist.ReduceOp.SUM, async_op=False):
        self.bytes_sent += 2 * t.numel() * t.element_size() * (self.world - 1) // self.world
        return dist.all_reduce(t, op=op, group=self.group, async_op=async_op)

    def _all_gather(self, parts, t):
        self.bytes_sent += t.numel() * t.element_size() * (self.world - 1)
        dist.all_gather(parts, t, group=self.group)

    def _broadcast(self, t, src_rank=0):
        if self.rank == src_rank:
            self.bytes_sent += t.numel() * t.element_size()
        src = src_rank
        if self.group is not None:  # torch 1.13 has only the private name
            global_rank = getattr(dist, "get_global_rank", None) or \
                dist.distributed_c10d._get_global_rank
            src = global_rank(self.group, src_rank)
        dist.broadcast(t, src=src, group=self.group)

    def _average(self, tensors):
        """Averages the tensors over ranks in place (f32 all-reduce, sum / N: every rank gets
        the same bits)."""
        for bucket in _buckets(tensors, self.bucket_bytes):
            flat = _flat(bucket)
            self._all_reduce(flat)
            flat.div_(self.world)
            _unflat(flat, bucket)

    # --- the step ---------------------------------------------------------------------------
    def step(self):
        """Instead of optimizer.step(), after backward."""
        self.step_count += 1
        self._step()
        self._sync(bool(self.check_every) and self.step_count % self.check_every == 0)

    def _sync(self, check):
        """The step's synchronisation, and the divergence check when `check`."""
        if check:
            self._check_divergence()

    def measure_divergence(self):
        """(max, rms, elementwise) of the parameters now (collective; see the module's help)."""
        with torch.no_grad():
            local = _flat(self.params)
            mean = local.clone()
            self._all_reduce(mean)
            mean.div_(self.world)
            return self._figures(local, mean)

    def _figures(self, local, mean):
        """The figures from this rank's parameters and their mean over ranks (two scalar
        all-reduces)."""
        with torch.no_grad():
            diff = local - mean
            dist2 = float(diff.double().pow(2).sum())
            mx = torch.tensor([math.sqrt(dist2), float(diff.abs().max())], dtype=torch.float64)
            sm = torch.tensor([dist2], dtype=torch.float64)
            self._all_reduce(mx, op=dist.ReduceOp.MAX)
            self._all_reduce(sm)
            norm = float(mean.double().norm()) or 1.0
            return (mx[0].item() / norm, math.sqrt(sm[0].item() / self.world) / norm,
                    2.0 * mx[1].item())

    def _check_divergence(self, figures=None):
        """Measures (unless `figures` were measured already, on a step that synchronised),
        records and logs; past the bound synchronises now."""
        mx, rms, elem = figures or self.measure_divergence()
        d = Divergence(self.step_count, mx, rms, elem)
        self.divergence = d
        self.history.append(d)
        self.log(f"chorus {self.mode} step {d.step}: divergence max {mx:.3e} rms {rms:.3e} "
                 f"(relative to the parameter norm), elementwise {elem:.3e}")
        if self.divergence_limit is not None and mx > self.divergence_limit:
            if figures:
                self.log(f"chorus {self.mode} step {d.step}: divergence {mx:.3e} above the bound "
                         f"{self.divergence_limit:g}, measured as this step synchronised")
                return
            d.forced_sync = True
            self.log(f"chorus {self.mode} step {d.step}: divergence {mx:.3e} above the bound "
                     f"{self.divergence_limit:g}: synchronising now")
            self._forced_sync()

    def _forced_sync(self):
        with torch.no_grad():
            self._average(self.params)

    # --- end, checkpoints -------------------------------------------------------------------
    def synchronize(self):
        """Collective: leaves every rank with bit-identical parameters and buffers (averaged
        parameters, rank 0's buffers; rank 0's parameters if an average came out different
        somewhere). Returns the parameters' hash."""
        self._finish()
        with torch.no_grad():
            self._average(self.params)
            for b in self.model.buffers():
                self._broadcast(b.data)
            if self.ranks_differing():
                for p in self.params:
                    self._broadcast(p.data)
        return state_hash(self.params)

    def ranks_differing(self):
        """Collective: the ranks whose parameters' hash differs from rank 0's."""
        hashes = torch.tensor([state_hash(self.params)], dtype=torch.int64)
        parts = [torch.empty_like(hashes) for _ in range(self.world)]
        self._all_gather(parts, hashes)
        return [r for r, h in enumerate(parts) if h.item() != parts[0].item()]

    def _finish(self):
        pass

    def state_dict(self):
        return {"mode": self.mode, "step": self.step_count, "bytes_sent": self.bytes_sent,
                "history": [dataclasses.asdict(d) for d in self.history]}

    def load_state_dict(self, state):
        if state.get("mode") != self.mode:
            raise ValueError(f"chorus {type(self).__name__}.load_state_dict: the state is of mode "
                             f"{state.get('mode')!r}, not {self.mode!r}")
        self.step_count = state["step"]
        self.bytes_sent = state["bytes_sent"]
        self.history = [Divergence(**d) for d in state["history"]]
        self.divergence = self.history[-1] if self.history else None


class DelayedUpdates(_Base):
    """Step t applies the average of step t-1's gradients (see the module's help)."""

    mode = "delayed"

    def __init__(self, model, optimizer, *, group=None, check_every=0, divergence_limit=None,
                 log=None, bucket_mb=25.0):
        super().__init__(model, optimizer, group=group, check_every=check_every,
                         divergence_limit=divergence_limit, log=log, bucket_mb=bucket_mb)
        self._buckets = _buckets(self.params, self.bucket_bytes)
        self._pending = None  # [(flat, work)] of the previous step

    def _step(self):
        # This step's gradients leave now; the previous step's average is applied.
        flats = []
        for bucket in self._buckets:
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p))
                              .detach().reshape(-1) for p in bucket])
            flats.append((flat, self._all_reduce(flat, async_op=True)))
        previous, self._pending = self._pending, flats
        if previous is None:  # step 1: nothing to apply yet
            for p in self.params:
                p.grad = None
            return
        for bucket, (flat, work) in zip(self._buckets, previous):
            work.wait()
            flat.div_(self.world)
            off = 0
            for p in bucket:
                n = p.numel()
                p.grad = flat[off:off + n].view_as(p)
                off += n
        self.optimizer.step()

    def _finish(self):
        self._wait_pending()

    def _wait_pending(self):
        for _, work in self._pending or []:
            work.wait()

    def state_dict(self):
        """The in-flight average (waited for) goes with the state, so that a resumed run
        applies it at its next step."""
        s = super().state_dict()
        self._wait_pending()
        s["pending"] = [flat.clone() for flat, _ in self._pending] if self._pending else None
        return s

    def load_state_dict(self, state):
        super().load_state_dict(state)
        pending = state["pending"]
        self._pending = None if pending is None else [(f.clone(), _Done()) for f in pending]


class _Done:
    def wait(self):
        return True


class LocalSGD(_Base):
    """Each rank steps alone; the parameters are averaged every sync_every steps."""

    mode = "localsgd"

    def __init__(self, model, optimizer, *, sync_every, group=None, check_every=0,
                 divergence_limit=None, log=None, bucket_mb=25.0):
        super().__init__(model, optimizer, group=group, sync_every=sync_every,
                         check_every=check_every, divergence_limit=divergence_limit, log=log,
                         bucket_mb=bucket_mb)

    def _step(self):
        self.optimizer.step()

    def _sync(self, check):
        if self.step_count % self.sync_every:
            return super()._sync(check)
        # Divergence on an averaging step: from the parameters before it and the average (after
        # it every rank holds the mean), at the cost of two scalar all-reduces.
        with torch.no_grad():
            local = _flat(self.params) if check else None
            self._average(self.params)
            if check:
                self._check_divergence(self._figures(local, _flat(self.params)))


class DiLoCo(_Base):
    """Inner optimizer per rank; every sync_every steps an outer Nesterov SGD step on the
    averaged parameter delta (see the module's help)."""

    mode = "diloco"

    def __init__(self, model, optimizer, *, sync_every, outer_lr=0.7, outer_momentum=0.9,
                 compress="none", fragments=1, overlap=False, block=256, group=None,
                 check_every=0, divergence_limit=None, log=None, bucket_mb=25.0):
        self.compress = compress
        self.overlap = overlap
        self.block = block
        self._in_flight = []
        self._deferred = None  # a list: overlapped launches left to the caller (AsyncTrainer)
        extra = dict(outer_lr=outer_lr, outer_momentum=outer_momentum, compress=compress,
                     fragments=fragments, overlap=overlap, block=block)
        super().__init__(model, optimizer, group=group, sync_every=sync_every,
                         check_every=check_every, divergence_limit=divergence_limit, log=log,
                         bucket_mb=bucket_mb, extra=extra)
        # The anchor: the parameters at the last sync, the same on every rank.
        self.anchor = [p.detach().clone() for p in self.params]
        self.outer_optimizer = torch.optim.SGD(self.anchor, lr=outer_lr, momentum=outer_momentum,
                                               nesterov=outer_momentum > 0)
        self.fragments = _fragments([p.numel() for p in self.params], fragments)
        self.errors = [None] * len(self.fragments)  # per fragment, f32, when compressing

    def _problem(self, config):
        problem = super()._problem(config)
        if problem:
            return problem
        if config["compress"] not in COMPRESSIONS:
            return f"compress must be one of {COMPRESSIONS}, got {config['compress']!r}"
        if not isinstance(config["fragments"], int) or config["fragments"] < 1:
            return f"fragments must be an integer >= 1, got {config['fragments']!r}"
        if config["fragments"] > len(self.params):
            return (f"fragments ({config['fragments']}) above the number of parameter tensors "
                    f"({len(self.params)})")
        if not config["outer_lr"] > 0:
            return f"outer_lr must be > 0, got {config['outer_lr']!r}"
        if not 0 <= config["outer_momentum"] < 1:
            return f"outer_momentum must be in [0, 1), got {config['outer_momentum']!r}"
        if not isinstance(config["block"], int) or config["block"] < 1:
            return f"block must be an integer >= 1, got {config['block']!r}"
        return None

    def _step(self):
        self.optimizer.step()

    def _due(self, step):
        """The fragments that sync after `step`."""
        H, F = self.sync_every, len(self.fragments)
        return [f for f in range(F) if step % H == (f * H) // F]

    def _sync(self, check):
        self._complete_in_flight()  # launched after the previous step (overlap)
        due = self._due(self.step_count)
        if check and self.compress == "none" and len(due) == len(self.fragments) \
                and not self.overlap:
            # Every fragment syncs: the mean of the parameters is anchor - mean(delta), known
            # from the sync's all-reduce (the anchor is the same everywhere); two scalar
            # all-reduces more give the figures.
            local = _flat(self.params)
            mean = torch.cat([self._complete(self._launch(f)) for f in due])
            self._check_divergence(self._figures(local, mean))
            return
        super()._sync(check)  # measured before the sync; may sync every fragment at once
        d = self.divergence
        if check and d.forced_sync:
            return
        for f in due:
            if self.overlap and self._deferred is not None:
                self._deferred.append(f)
            elif self.overlap:
                self._in_flight.append(self._launch(f))
            else:
                self._complete(self._launch(f))

    def _forced_sync(self):
        self._complete_in_flight()
        for f in range(len(self.fragments)):
            self._complete(self._launch(f))

    def _complete_in_flight(self):
        in_flight, self._in_flight = self._in_flight, []
        for pending in in_flight:
            self._complete(pending)

    def _finish(self):
        self._complete_in_flight()

    def _launch(self, f, local=None):
        """Starts fragment f's sync: delta = anchor - params (plus the error feedback,
        compressed if asked) leaves in an asynchronous collective. Returns what _complete
        needs. `local`: the fragment's parameters at an earlier launch, to launch it again."""
        idx = self.fragments[f]
        with torch.no_grad():
            anchor = _flat([self.anchor[i] for i in idx])
            local = _flat([self.params[i] for i in idx]) if local is None else local
            delta = anchor - local
            pending = {"fragment": f, "anchor": anchor, "local": local, "n": delta.numel()}
            if self.compress == "none":
                pending["sum"] = delta
                pending["work"] = self._all_reduce(delta, async_op=True)
                return pending
            if self.errors[f] is None:
                self.errors[f] = torch.zeros_like(delta)
            x = delta + self.errors[f]
            payload, sent = encode(self.compress, x, self.block)
            torch.sub(x, sent, out=self.errors[f])
            parts = [torch.empty_like(payload) for _ in range(self.world)]
            self.bytes_sent += payload.numel() * (self.world - 1)
            pending["parts"] = parts
            pending["work"] = dist.all_gather(parts, payload, group=self.group, async_op=True)
            return pending

    def _mean_delta(self, pending):
        """Waits for the fragment's collective (once) and returns the mean delta."""
        if "mean" not in pending:
            pending["work"].wait()
            if self.compress == "none":
                pending["mean"] = pending["sum"].div_(self.world)
            else:
                total = torch.zeros(pending["n"], dtype=torch.float32)
                for p in pending["parts"]:  # rank order: the same sum on every rank
                    total.add_(decode(self.compress, p, pending["n"], self.block))
                pending["mean"] = total.div_(self.world)
        return pending["mean"]

    def _complete(self, pending):
        """The outer optimizer steps the fragment's anchor by the mean delta; the parameters
        become the new anchor, plus (with overlap) what this rank's inner steps changed while
        the delta was in flight. Returns the fragment's mean parameters at the launch
        (anchor - mean delta)."""
        idx = self.fragments[pending["fragment"]]
        with torch.no_grad():
            delta = self._mean_delta(pending)
            off = 0
            for i in idx:
                n = self.anchor[i].numel()
                self.anchor[i].grad = delta[off:off + n].view_as(self.anchor[i]).clone()
                off += n
            # Only this fragment's anchors have a gradient: SGD skips the others.
            for j, a in enumerate(self.anchor):
                if j not in idx:
                    a.grad = None
            self.outer_optimizer.step()
            moved = _flat([self.params[i] for i in idx]) - pending["local"]
            off = 0
            for i in idx:
                n = self.anchor[i].numel()
                self.anchor[i].grad = None
                if self.overlap:
                    self.params[i].copy_(self.anchor[i] + moved[off:off + n].view_as(
                        self.anchor[i]))
                else:
                    self.params[i].copy_(self.anchor[i])
                off += n
            return pending["anchor"] - delta

    def synchronize(self):
        """As the base's; the anchor becomes the synchronised parameters (momentum kept)."""
        h = super().synchronize()
        with torch.no_grad():
            for a, p in zip(self.anchor, self.params):
                a.copy_(p)
        return h

    def state_dict(self):
        s = super().state_dict()
        s.update(anchor=[a.clone() for a in self.anchor],
                 outer_optimizer=self.outer_optimizer.state_dict(),
                 errors=[None if e is None else e.clone() for e in self.errors])
        # Deltas in flight (overlap) are waited for and saved with their mean.
        s["in_flight"] = [{"fragment": p["fragment"], "anchor": p["anchor"].clone(),
                           "local": p["local"].clone(), "n": p["n"],
                           "mean": self._mean_delta(p).clone()} for p in self._in_flight]
        return s

    def load_state_dict(self, state):
        super().load_state_dict(state)
        with torch.no_grad():
            for a, saved in zip(self.anchor, state["anchor"]):
                a.copy_(saved)
        self.outer_optimizer.load_state_dict(state["outer_optimizer"])
        self.errors = [None if e is None else e.clone() for e in state["errors"]]
        self._in_flight = [dict(p) for p in state.get("in_flight", [])]

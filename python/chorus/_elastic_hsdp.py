"""HSDP that survives a lost rank: ``chorus.torch.elastic.hsdp_mesh`` and ``HSDPTrainer``.

The world is R replica groups of S ranks (replica r: ranks r*S .. r*S+S-1). Each replica group
shards the model with FSDP2 (``fully_shard``) over a 1-D mesh of its own S ranks; the trainer
does the replicate dimension itself: each rank's averaged gradient shard is summed with the
shards of the same index in the other replicas by one all-reduce on the default group, and
divided by R. A replica group is the unit of failure: when a rank is lost, its replica-mates
leave the job (``elastic.Removed``), the other replicas discard the step, shrink the default
group (not waiting for the leavers) and go on with R-1 replicas, their own shard groups intact::

    mesh = elastic.hsdp_mesh(shards=2)          # this rank's replica group, a 1-D CPU mesh
    for layer in net: fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    trainer = elastic.HSDPTrainer(net, opt, mesh, on_change=..., state=data_position)
    while trainer.steps < total:
        x, y = batch_for(dist.get_rank(), dist.get_world_size())
        trainer.step(lambda: F.cross_entropy(net(x), y))   # None: discarded, the group shrank

A step is a transaction over the default group: a gate (one integer: a rank that went on while
others were changing the members finds out here, not inside its replica group's all-gathers,
where it would wait for a replica-mate that is busy in the change), the gradient all-reduce, and
a commit vote; the optimizer steps only when the vote saw every rank. A rank whose vote failed
while another's completed holds the same averaged gradients (every rank finished the all-reduce
before voting), so it applies the step itself: nothing sharded needs to travel.

Replacements (chorus-run --elastic restarts the lost rank and its replica-mates) join as whole
replica groups: hsdp_mesh, in a replacement, joins the job once the running ranks admit it (rank
0 looks every admit_every steps for a replica group's worth of them waiting), the newcomers of
each new replica group make their shard group by a split of the default group (in its store,
not torch's), and HSDPTrainer takes each shard, its optimizer state, the step, RNG and `state`
from the rank of replica group 0 with the same shard index (docs/python.md, "Surviving a lost
rank").
"""

import math
import os
import time

import torch
import torch.distributed as dist

import chorus.elastic as _elastic
import chorus.torch as _chorus_torch

# A replacement's admission (Membership, former ranks, start time), from hsdp_mesh to the
# HSDPTrainer that takes the state.
_joined = []


def hsdp_mesh(shards):
    """This rank's replica group as a 1-D CPU DeviceMesh for ``fully_shard``: the world is
    dist.get_world_size() // shards replica groups of `shards` consecutive ranks. Collective on
    the default group (every rank makes every replica group's subgroup)."""
    if os.environ.get("CHORUS_SPARES", "0") not in ("", "0"):
        raise ValueError(
            "chorus.torch.elastic.hsdp_mesh: HSDP does not take spares (chorus-run --spares) "
            "yet: a spare replaces one rank and HSDP loses whole replica groups; start "
            "replacements instead (--max-restarts)")
    from torch.distributed.device_mesh import DeviceMesh

    if _elastic.joining():
        # A replacement: joins the running job, which made room for whole replica groups; the
        # newcomers of each make its group among themselves (the running ranks take part).
        started = time.perf_counter()
        m = _chorus_torch.join()
        former = list(m.former_ranks)
        m, former, _ = _whole_replicas(m, former, [], shards, _leave_at_admission,
                                       _chorus_torch.shrink)
        group = _split_replica_groups(former, shards)
        _joined.append((m, former, started))
        return DeviceMesh.from_group(group, "cpu", mesh_dim_names=("shard",))
    world, rank = dist.get_world_size(), dist.get_rank()
    if not isinstance(shards, int) or shards < 1 or world % shards:
        raise ValueError(f"chorus.torch.elastic.hsdp_mesh: shards must divide the world size "
                         f"{world}, got {shards!r}")
    mine = None
    for replica in range(world // shards):
        ranks = list(range(replica * shards, (replica + 1) * shards))
        group = dist.new_group(ranks)
        if rank in ranks:
            mine = group
    return DeviceMesh.from_group(mine, "cpu", mesh_dim_names=("shard",))


class HSDPTrainer:
    """Runs the steps of an FSDP2 model sharded over `mesh` (hsdp_mesh) as transactions, its
    replicate dimension over the default chorus group (see the module's doc). on_change and
    state as for elastic.Trainer; trainer.steps, trainer.changes, trainer.replicas and
    trainer.replica say the committed steps, the changes, the replica groups and this rank's."""

    def __init__(self, model, optimizer, mesh, on_change=None, state=None, admit_every=10):
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.tensor import DTensor

        if not isinstance(model, FSDPModule):
            raise TypeError("chorus.torch.elastic.HSDPTrainer takes a model sharded by "
                            f"fully_shard, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("chorus.torch.elastic.HSDPTrainer takes a torch.optim.Optimizer, "
                            f"got {type(optimizer).__name__}")
        if mesh.ndim != 1:
            raise ValueError("chorus.torch.elastic.HSDPTrainer: the mesh must be this rank's "
                             f"replica group, 1-D (hsdp_mesh), not {mesh.ndim}-D")
        if state is not None and not (hasattr(state, "state_dict")
                                      and hasattr(state, "load_state_dict")):
            raise TypeError("chorus.torch.elastic.HSDPTrainer: state needs state_dict() and "
                            f"load_state_dict(), {type(state).__name__} has not")
        default = dist.distributed_c10d._get_default_group()
        if not _chorus_torch._is_chorus(default):
            raise ValueError("chorus.torch.elastic.HSDPTrainer: the default group's backend is "
                             "not chorus (init_process_group(\"chorus\"))")
        if not _chorus_torch.can_shrink():
            raise RuntimeError(
                "chorus.torch.elastic.HSDPTrainer needs a torch whose c10d lets a backend's "
                f"size change (C10D_BACKEND_HAS_RECONFIGURE); torch {torch.__version__} has none")
        if _elastic.joining():
            raise RuntimeError("chorus.torch.elastic.HSDPTrainer in a replacement (CHORUS_JOIN=1) "
                               "needs the mesh from elastic.hsdp_mesh, which joins the job")
        if not isinstance(admit_every, int) or admit_every < 0:
            raise ValueError("chorus.torch.elastic.HSDPTrainer: admit_every must be an int >= 0, "
                             f"got {admit_every!r}")
        self.shards = mesh.size()
        if dist.get_world_size() % self.shards:
            raise ValueError(f"chorus.torch.elastic.HSDPTrainer: the mesh's {self.shards} ranks "
                             f"do not divide the world size {dist.get_world_size()}")
        self.params = [p for p in model.parameters() if p.requires_grad]
        for p in self.params:
            if not isinstance(p, DTensor) or p.device_mesh != mesh or p.dtype != torch.float32:
                raise ValueError("chorus.torch.elastic.HSDPTrainer: every trained parameter must "
                                 "be a float32 DTensor on the mesh given (fully_shard(..., "
                                 "mesh=mesh))")
        self.model, self.optimizer, self.mesh = model, optimizer, mesh
        self.on_change, self.state, self.admit_every = on_change, state, admit_every
        self.index = mesh.get_local_rank()  # this rank's shard index in its replica group
        self.group = mesh.get_group()
        # Each shard index's part of the all-reduce buffer: room for the largest local shard of
        # every parameter (fully_shard splits dim 0 as torch.chunk does).
        self._room = [math.ceil(p.shape[0] / self.shards) * (p.numel() // max(p.shape[0], 1))
                      for p in self.params]
        self._slot = sum(self._room)
        self.steps = 0
        self.changes = []
        self._averaged = None  # this step's averaged shard, once the all-reduce completed
        self._vote = torch.zeros(2, dtype=torch.int64)  # [ranks that commit, replacements seen]
        self._gate_flag = torch.zeros(1, dtype=torch.int64)
        self._admit_next = False
        if _joined:
            self._welcome(*_joined.pop())

    @property
    def replicas(self):
        return dist.get_world_size() // self.shards

    @property
    def replica(self):
        return dist.get_rank() // self.shards

    def step(self, loss_fn):
        """One step: loss_fn() runs the forward pass and returns the loss; backward (FSDP2
        reduce-scatters within the replica group), the replicate all-reduce, the commit vote and
        the optimizer step follow. Returns the loss when the step committed, None when it was
        discarded after a lost rank (the group has shrunk and on_change ran). Raises
        elastic.Removed on the ranks of a replica group that lost a member: they must exit.
        Replacements seen waiting (a whole replica group of them) at a committed step are
        admitted at the start of the next call, which then returns None without running it."""
        if self._admit_next:
            self._admit_next = False
            self._change(None, None)
            return None
        self.optimizer.zero_grad(set_to_none=True)
        self._averaged = None
        try:
            self._gate()
            loss = loss_fn()
            loss.backward()
            self._average()
            self._vote[0], self._vote[1] = 1, self._joiners_seen()
            dist.all_reduce(self._vote)
            if int(self._vote[0]) != dist.get_world_size():
                raise RuntimeError(f"commit vote of step {self.steps}: {int(self._vote[0])} of "
                                   f"{dist.get_world_size()} ranks")
        except Exception as e:  # noqa: BLE001  only a failure of a group is handled here
            self._recover(e)
            return None
        self._apply()
        self.steps += 1
        self._admit_next = int(self._vote[1]) > 0
        return loss

    def admit(self):
        """Collective, between steps: admits the replacements waiting now when they make whole
        replica groups (rank 0 looks), as step() does every admit_every steps. Returns how many
        joined."""
        seen = torch.tensor([_chorus_torch.joiners_waiting() if dist.get_rank() == 0 else 0],
                            dtype=torch.int64)
        dist.broadcast(seen, src=0)
        if int(seen.item()) < self.shards:
            return 0
        self._change(None, None)
        return self.changes[-1].former_ranks.count(-1)

    def _joiners_seen(self):
        if (self.admit_every and dist.get_rank() == 0
                and (self.steps + 1) % self.admit_every == 0):
            waiting = _chorus_torch.joiners_waiting()
            return waiting if waiting >= self.shards else 0
        return 0

    def _gate(self):
        # Its all-reduce fails at once when other ranks began a membership change.
        self._gate_flag[0] = 1
        dist.all_reduce(self._gate_flag)

    def _average(self):
        buf = torch.zeros(self.shards * self._slot + 1, dtype=torch.float32)
        at = self.index * self._slot
        for p, room in zip(self.params, self._room):
            if p.grad is not None:
                g = p.grad.to_local().reshape(-1)
                buf[at : at + g.numel()] = g
            at += room
        buf[-1] = 1  # every rank's 1: the sum says that all took part
        dist.all_reduce(buf)
        if int(buf[-1].item()) != dist.get_world_size():
            raise RuntimeError(f"gradient all-reduce of step {self.steps}: "
                               f"{int(buf[-1].item())} of {dist.get_world_size()} ranks")
        start = self.index * self._slot
        self._averaged = buf[start : start + self._slot] / self.replicas

    def _apply(self):
        """The optimizer step with this rank's averaged gradient shard."""
        at = 0
        for p, room in zip(self.params, self._room):
            local = p.to_local()
            g = self._averaged[at : at + local.numel()].view_as(local)
            if p.grad is None:
                from torch.distributed.tensor import DTensor

                p.grad = DTensor.from_local(g.clone(), p.device_mesh, p.placements,
                                            shape=p.shape, stride=p.stride())
            else:
                p.grad.to_local().copy_(g)
            at += room
        self.optimizer.step()
        self._averaged = None

    def _recover(self, error):
        """After a failure: leave if this rank's replica group broke, else change the members."""
        shard_failure = _chorus_torch.failure(self.group)
        if shard_failure is not None:
            self._leave(f"its replica group {self._members()} failed: {shard_failure}", error)
        cause = _chorus_torch.failure()
        if cause is None:
            raise error
        self._change(cause, error)

    def _change(self, cause, error):
        """Discards this step (after a failure), changes the members (admitting the
        replacements waiting) until only whole replica groups are left, brings every rank to
        the newest committed step, gives the newcomers their shards, and runs on_change."""
        noticed, started = time.time(), time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        previous = dist.get_world_size()
        former, lost = list(range(previous)), []
        # Ranks the default group saw fail take their replica-mates with them.
        gone = self._replica_mates(_chorus_torch.failed_ranks()) if cause else []
        if dist.get_rank() in gone:
            self._leave(f"its replica group {self._members()} lost a rank ({cause})", error)
        while True:
            try:
                m = self._shrink(gone, cause, error)
                lost += [former[r] for r in m.lost_ranks if former[r] >= 0]
                former = [former[f] if f >= 0 else -1 for f in m.former_ranks]
                m, former, lost = _whole_replicas(
                    m, former, lost, self.shards, lambda why: self._leave(why, error),
                    lambda orphans: self._shrink(orphans, cause, error))
                if -1 in former:
                    _split_replica_groups(former, self.shards)
                self._catch_up()
                if -1 in former:
                    self._transfer_state(former)
                break
            except _elastic.Removed:
                raise
            except Exception as e:  # noqa: BLE001  only a failure of the group is handled
                again = _chorus_torch.failure()
                if again is None:
                    raise
                cause = f"{cause or 'admitting replacements'}; then, during the recovery: {again}"
                error = e
                gone = self._replica_mates(_chorus_torch.failed_ranks())
                if dist.get_rank() in gone:
                    self._leave(f"its replica group lost a rank ({again})", error)
        self._changed(_elastic.Change(self.steps, m.generation, m.rank, m.size, previous, former,
                                      sorted(lost), cause, noticed,
                                      time.perf_counter() - started))

    def _replica_mates(self, ranks):
        return sorted({r // self.shards * self.shards + i for r in ranks
                       for i in range(self.shards)})

    def _members(self):
        first = self.replica * self.shards
        return f"(ranks {first}..{first + self.shards - 1})"

    def _leave(self, why, error):
        raise _elastic.Removed(
            f"chorus.torch.elastic: rank {dist.get_rank()} leaves the job at step {self.steps}: "
            f"{why}; the other replica groups go on without it") from error

    def _shrink(self, gone, cause, error):
        try:
            return _chorus_torch.shrink(gone=gone)
        except Exception as e:
            if "was declared dead by the survivors" in str(e):
                raise _elastic.Removed(
                    f"chorus.torch.elastic: rank {dist.get_rank()} was removed from the job at "
                    f"step {self.steps}: the other ranks declared it dead and went on without "
                    f"it (it was stopped, frozen or too slow: {e}); it cannot take part any "
                    "more") from error
            why = f"a failure ({cause})" if cause else "admitting replacements"
            raise RuntimeError(f"chorus.torch.elastic: the membership change at step "
                               f"{self.steps} after {why} failed: {e}") from error

    def _catch_up(self):
        """A rank whose vote failed while another's completed is one step behind, with that
        step's averaged gradients: it applies them, and takes the step count, RNG and state of
        the first rank ahead."""
        mine = torch.tensor([self.steps, self._averaged is not None], dtype=torch.int64)
        every = torch.zeros(2 * dist.get_world_size(), dtype=torch.int64)
        dist.all_gather_into_tensor(every, mine)
        steps = every[0::2]
        newest = int(steps.max())
        if int(steps[steps >= 0].min()) == newest:  # newcomers (-1) take their shards later
            return
        source = int((steps == newest).nonzero()[0])
        payload = None
        if dist.get_rank() == source:
            payload = _elastic._pack({"rng": torch.get_rng_state(),
                                      "state": None if self.state is None
                                      else self.state.state_dict()})
        taken = _elastic._unpack(_elastic._broadcast_bytes(payload, source))
        if self.steps == newest or self.steps < 0:
            return
        if self.steps != newest - 1 or self._averaged is None:
            raise RuntimeError(f"chorus.torch.elastic: rank {dist.get_rank()} is at step "
                               f"{self.steps}, without the averaged gradients of step "
                               f"{newest - 1}, while rank {source} committed it")
        self._apply()
        self.steps = newest
        torch.set_rng_state(taken["rng"])
        if self.state is not None:
            self.state.load_state_dict(taken["state"])

    def _welcome(self, m, former, started):
        """A replacement admitted in hsdp_mesh: takes part in the running ranks' catch-up, takes
        its shard from the healthy replica group's rank with the same index, and applies the
        change's policy as they do."""
        self.steps = -1  # behind everyone, and not counted by the catch-up
        self._catch_up()
        self._transfer_state(former)
        previous = sum(1 for f in former if f >= 0)
        self._changed(_elastic.Change(self.steps, m.generation, m.rank, m.size, previous, former,
                                      [], "joined as a replacement", time.time(),
                                      time.perf_counter() - started))

    def _transfer_state(self, former):
        """Collective: for each shard index, the rank of replica group 0 (a running one: they
        come first) sends its shard, optimizer state, step, RNG and `state` to the newcomers
        with that index."""
        new = former[dist.get_rank()] < 0
        for index in range(self.shards):
            payload = _elastic._pack(self._shard_state()) if dist.get_rank() == index else None
            data = _elastic._broadcast_bytes(payload, index)
            if new and self.index == index:
                self._load_shard_state(_elastic._unpack(data))

    def _shard_state(self):
        from torch.distributed.tensor import DTensor

        def local(v):
            return (v.to_local(), True) if isinstance(v, DTensor) else (v, False)

        return {"params": [p.to_local() for p in self.params],
                "optimizer": [{k: local(v) for k, v in self.optimizer.state.get(p, {}).items()}
                              for p in self.params],
                "groups": [{k: v for k, v in g.items() if k != "params"}
                           for g in self.optimizer.param_groups],
                "steps": self.steps, "rng": torch.get_rng_state(),
                "state": None if self.state is None else self.state.state_dict()}

    def _load_shard_state(self, taken):
        from torch.distributed.tensor import DTensor

        with torch.no_grad():
            for p, t in zip(self.params, taken["params"]):
                p.to_local().copy_(t)
        for p, saved in zip(self.params, taken["optimizer"]):
            self.optimizer.state[p] = {
                k: DTensor.from_local(v.clone(), p.device_mesh, p.placements, shape=p.shape,
                                      stride=p.stride()) if sharded else v
                for k, (v, sharded) in saved.items()}
        for group, saved in zip(self.optimizer.param_groups, taken["groups"]):
            group.update(saved)
        self.steps = taken["steps"]
        torch.set_rng_state(taken["rng"])
        if self.state is not None:
            self.state.load_state_dict(taken["state"])

    def _changed(self, change):
        self.changes.append(change)
        if self.on_change is not None:
            self.on_change(change)


def _broken_replicas(former_ranks, shards):
    """Ranks now whose replica group is not whole: running ranks by their ranks before the
    change, newcomers (-1, after them) in groups of `shards` in their order, the rest left
    over."""
    members, newcomers = {}, []
    for now, before in enumerate(former_ranks):
        if before >= 0:
            members.setdefault(before // shards, []).append(now)
        else:
            newcomers.append(now)
    broken = [r for group in members.values() if len(group) != shards for r in group]
    return sorted(broken + newcomers[len(newcomers) // shards * shards:])


def _whole_replicas(m, former, lost, shards, leave, shrink):
    """After a shrink (m; former: the ranks before the change, composed): while a replica group
    in the membership is not whole, its members leave (leave(why) raises) and the others change
    again without them (shrink(gone))."""
    while True:
        orphans = _broken_replicas(former, shards)
        if not orphans:
            return m, former, lost
        if dist.get_rank() in orphans:
            leave("its replica group is not whole in the new membership")
        m = shrink(orphans)
        lost += [former[r] for r in m.lost_ranks if former[r] >= 0]
        former = [former[f] if f >= 0 else -1 for f in m.former_ranks]


def _split_replica_groups(former, shards):
    """Collective on the default group after an admission: the newcomers of each new replica
    group make its group (the others take part in the split and get None)."""
    rank = dist.get_rank()
    block = rank // shards
    color = block if former[rank] < 0 else -1
    generation = _chorus_torch.membership().generation
    return _chorus_torch.split_group(color, rank, range(block * shards, (block + 1) * shards),
                                     f"chorus_replica_g{generation}_{block}")


def _leave_at_admission(why):
    raise _elastic.Removed(f"chorus.torch.elastic: rank {dist.get_rank()} leaves the job as it "
                           f"joins: {why} (more replacements came than whole replica groups)")

#!/usr/bin/python3
"""One rank of a 2-rank chorus group (run_ranks.py starts them): chorus.torch.shrink and torch's
reconfigure contract when nothing failed, and the errors a misuse gets. Prints "rank R: ok".
Where the torch has no in-place reconfigure, checks that shrink says so instead."""

import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch
from chorus.torch import elastic


def raises(kind, words, fn):
    try:
        fn()
    except kind as e:
        for w in words:
            assert w in str(e), f"{kind.__name__} without {w!r}: {e}"
        return
    raise AssertionError(f"expected {kind.__name__} naming {words}")


def all_reduce_sum(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item()


def main():
    dist.init_process_group("chorus", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    assert chorus.torch.failure() is None
    if not chorus.torch.can_shrink():
        raises(RuntimeError, ["C10D_BACKEND_HAS_RECONFIGURE"], chorus.torch.shrink)
        print(f"rank {rank}: ok (this torch cannot shrink in place: the error says so)")
        # Rank 0 hosts torch's env:// store: it must not leave while another rank still uses it
        # at the end of init_process_group.
        dist.barrier()
        dist.destroy_process_group()
        return

    # Misuse: clear errors, and the group still works after them.
    raises(TypeError, ["DistributedDataParallel", "Linear"],
           lambda: elastic.Trainer(torch.nn.Linear(2, 2), None))
    model = DDP(torch.nn.Linear(4, 2))
    raises(TypeError, ["Optimizer"], lambda: elastic.Trainer(model, object()))
    sub = dist.new_group([0, 1])
    raises(ValueError, ["default group"], lambda: chorus.torch.shrink(sub))
    sub_model = DDP(torch.nn.Linear(4, 2), process_group=sub)
    raises(ValueError, ["default group"],
           lambda: elastic.Trainer(sub_model, torch.optim.SGD(sub_model.parameters(), lr=0.1)))
    gloo = dist.new_group([0, 1], backend="gloo")
    raises(TypeError, ["not a process group of the chorus backend"],
           lambda: chorus.torch.shrink(gloo))
    # join() is for a replacement (CHORUS_JOIN=1) only.
    assert not elastic.joining()
    raises(ValueError, ["not a replacement", "CHORUS_JOIN=1"], chorus.torch.join)
    # HSDP takes no spares (chorus-run --spares sets CHORUS_SPARES in every process).
    os.environ["CHORUS_SPARES"] = "1"
    raises(ValueError, ["HSDP does not take spares", "--max-restarts"],
           lambda: elastic.hsdp_mesh(2))
    del os.environ["CHORUS_SPARES"]
    # A step whose loss function fails for a reason of its own is not a membership change.
    trainer = elastic.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    raises(ZeroDivisionError, [], lambda: trainer.step(lambda: 1 / 0))
    assert trainer.changes == [] and trainer.steps == 0
    assert trainer.step(lambda: model(torch.ones(3, 4)).sum()) is not None and trainer.steps == 1

    # Catch-up after a change: a rank whose commit vote failed while another's completed is one
    # step behind; it takes the state of the first rank ahead.
    if rank == 1:
        trainer.steps = 0
        with torch.no_grad():
            model.module.weight.add_(1.0)
    # Rank 1 passes no size before the change (as a newcomer does): it learns rank 0's.
    assert trainer._catch_up(2 if rank == 0 else None) == 2
    weights = [torch.zeros_like(model.module.weight) for _ in range(2)]
    dist.all_gather(weights, model.module.weight.detach())
    assert trainer.steps == 1 and torch.equal(weights[0], weights[1]), (trainer.steps, weights)

    # Shrink with nothing failed: the same members, a new communicator, collectives go on.
    m = chorus.torch.shrink()
    got = (m.generation, m.rank, m.size, m.former_ranks, m.lost_ranks)
    assert got == (1, rank, 2, [0, 1], []), m
    assert dist.get_world_size() == 2 and dist.get_rank() == rank
    assert all_reduce_sum(rank + 1) == 3.0

    # torch's contract: handles exchanged out of band, then reconfigure with a fresh uuid.
    handles = [None, None]
    dist.all_gather_object(handles, dist._get_reconfigure_handle())
    assert dist._supports_reconfigure() and len(set(handles)) == 2, handles
    dist._reconfigure(uuid=7, handles=set(handles)).wait()
    assert all_reduce_sum(1) == 2.0
    raises(ValueError, ["uuid 7", "fresh"], lambda: dist._reconfigure(uuid=7, handles=handles))
    # A list fixes the ranks: Chorus keeps the survivors' order, and says so when asked another.
    raises(RuntimeError, ["rank order", handles[0]],
           lambda: dist._reconfigure(uuid=8, handles=list(reversed(handles))).wait())
    dist._reconfigure(uuid=9, handles=handles).wait()
    assert dist.get_world_size() == 2 and all_reduce_sum(rank) == 1.0

    print(f"rank {rank}: ok")
    del model, sub_model, trainer
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""One rank of a 2-rank chorus group (run_ranks.py starts them): chorus.torch.elastic.AsyncTrainer
when nothing fails. The errors a misuse gets; a step whose loss function fails for a reason of
its own is no membership change; the catch-up of a rank behind (the one whose commit vote failed
while another's completed) takes the whole state of the rank ahead, a streamed DiLoCo fragment
in flight included, which both launch again and complete alike; a state of another configuration
is refused. Prints "rank R: ok". Where the torch has no in-place reconfigure, checks that the
trainer says so instead."""

import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import chorus.torch
from chorus import async_training as at
from chorus.torch import elastic


def raises(kind, words, fn):
    try:
        fn()
    except kind as e:
        for w in words:
            assert w in str(e), f"{kind.__name__} without {w!r}: {e}"
        return
    raise AssertionError(f"expected {kind.__name__} naming {words}")


def model_and_opt(seed=3):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def loss_of(model, step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)
    x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
    return lambda: F.cross_entropy(model(x), y)


def hashes(trainer):
    """This rank's whole state, hashed; all-gathered."""
    state = trainer._state()
    tensors = list(trainer.wrapper.params) + list(trainer.wrapper.anchor) + [
        t for p in state["wrapper"]["in_flight"] for t in (p["local"],)]
    mine = torch.tensor([at.state_hash(tensors), trainer.steps, trainer.commits])
    every = [torch.zeros_like(mine) for _ in range(2)]
    dist.all_gather(every, mine)
    return [e.tolist() for e in every]


def main():
    dist.init_process_group("chorus", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    model, opt = model_and_opt()
    wrapper = at.DiLoCo(model, opt, sync_every=4, fragments=2, overlap=True, compress="int8")
    if not chorus.torch.can_shrink():
        raises(RuntimeError, ["C10D_BACKEND_HAS_RECONFIGURE"],
               lambda: elastic.AsyncTrainer(wrapper))
        print(f"rank {rank}: ok (this torch cannot shrink in place: the error says so)")
        dist.destroy_process_group()
        return

    # Misuse: clear errors.
    raises(TypeError, ["LocalSGD", "DiLoCo", "DelayedUpdates", "Linear"],
           lambda: elastic.AsyncTrainer(torch.nn.Linear(2, 2)))
    raises(TypeError, ["state_dict"], lambda: elastic.AsyncTrainer(wrapper, state=object()))
    raises(ValueError, ["admit_every"], lambda: elastic.AsyncTrainer(wrapper, admit_every=-1))
    os.environ["CHORUS_SPARES"] = "1"  # as chorus-run --spares sets it
    raises(ValueError, ["does not take spares", "--max-restarts"],
           lambda: elastic.AsyncTrainer(wrapper))
    del os.environ["CHORUS_SPARES"]
    sub = dist.new_group([0, 1])
    sub_model, sub_opt = model_and_opt()
    raises(ValueError, ["default group"],
           lambda: elastic.AsyncTrainer(at.LocalSGD(sub_model, sub_opt, sync_every=2, group=sub)))

    trainer = elastic.AsyncTrainer(wrapper)
    raises(ZeroDivisionError, [], lambda: trainer.step(lambda: 1 / 0))
    assert trainer.changes == [] and trainer.steps == 0
    for step in range(4):  # transactions at steps 2, 3 and 4; fragment 0 launched at 4, in flight
        assert trainer.step(loss_of(model, step, rank)) is not None
    assert trainer.steps == 4 and len(wrapper._in_flight) == 1 and trainer.commits == 3

    # As after a failure: the state put back (the fragment in flight to be launched again);
    # rank 1 behind, with other parameters: it takes rank 0's whole state.
    trainer._restore(trainer._snapshot())
    if rank == 1:
        trainer.commits -= 1
        with torch.no_grad():
            wrapper.params[0].add_(1.0)
            wrapper.anchor[1].add_(1.0)
    # Rank 1 passes no size before the change (as a newcomer does): it learns rank 0's.
    assert trainer._catch_up(2 if rank == 0 else None) == 2
    h = hashes(trainer)
    assert h[0] == h[1], h
    trainer._relaunch()
    for step in range(4, 7):
        trainer.step(loss_of(model, step, rank))
    trainer.synchronize()
    h = hashes(trainer)
    assert h[0] == h[1] and trainer.steps == 7, h

    # A state of another configuration (a replacement made with other settings) is refused.
    state = trainer._state()
    state["config"] = "another"
    raises(ValueError, ["configuration of rank", "differs from rank 0's"],
           lambda: trainer._load(state, "rank 0's"))

    print(f"rank {rank}: ok")
    del trainer, wrapper
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Unmodified DistributedDataParallel on the chorus backend, one rank of it (run_ranks.py starts
them): `ddp_cases.py CASE...` runs the cases in one process group and prints
"rank R: CASE ok" for each. Every case trains a few steps and compares the parameters with a
reference computed here without any backend, and checks, over gloo, that all ranks agree."""

import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_support import (assert_close, assert_identical_on_all_ranks, batch, init, loss_of,
                         new_net, reference_step, report)

STEPS = 4
LR = 0.1


def sgd(model, momentum=0.0):
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=LR,
                           momentum=momentum)


def train_ddp(ddp, opt, rank, steps=STEPS, use_alt=lambda rank, step: False):
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        x, y = batch(rank, step)
        torch.nn.functional.cross_entropy(ddp(x, use_alt=use_alt(rank, step)), y).backward()
        opt.step()


def train_reference(world, steps=STEPS, momentum=0.0, use_alt=lambda rank, step: False, **net):
    model = new_net(**net)
    opt = sgd(model, momentum)
    for step in range(steps):
        losses = [loss_of(model, r, step, use_alt(r, step)) for r in range(world)]
        reference_step(model, opt, losses)
    return model


def matches_gloo(rank, world, gloo):
    """Several buckets per step (a tiny bucket cap); chorus's result is bit-identical on every
    rank and equal to gloo's and to the reference within rounding."""
    models = {}
    for name, group in (("chorus", None), ("gloo", gloo)):
        model = new_net()
        ddp = DDP(model, process_group=group, bucket_cap_mb=0.0005)
        train_ddp(ddp, sgd(model, momentum=0.9), rank, steps=6)
        assert_identical_on_all_ranks(model, gloo, f"DDP on {name}")
        models[name] = model
    assert_close(models["chorus"], models["gloo"], "chorus against gloo")
    assert_close(models["chorus"], train_reference(world, steps=6, momentum=0.9),
                 "chorus against the reference")


def find_unused_parameters(rank, world, gloo):
    """Ranks use different heads in different steps; one head nobody uses stays untouched."""
    def use_alt(r, step):
        return (r + step) % 2 == 1

    model = new_net(extra_heads=True)
    start = model.never_used.weight.detach().clone()
    ddp = DDP(model, find_unused_parameters=True)
    train_ddp(ddp, sgd(model), rank, use_alt=use_alt)
    assert_identical_on_all_ranks(model, gloo, "find_unused_parameters")
    assert_close(model, train_reference(world, use_alt=use_alt, extra_heads=True),
                 "find_unused_parameters against the reference")
    assert torch.equal(model.never_used.weight, start), "an unused parameter changed"


def no_sync(rank, world, gloo):
    """Gradients of two micro-batches accumulate locally inside no_sync(); the third, outside
    it, all-reduces the sum."""
    model = new_net()
    ddp = DDP(model)
    opt = sgd(model)
    for step in range(2):
        opt.zero_grad(set_to_none=True)
        with ddp.no_sync():
            for micro in range(2):
                loss_of(ddp, rank, 10 * step + micro).backward()
        loss_of(ddp, rank, 10 * step + 2).backward()
        opt.step()
    assert_identical_on_all_ranks(model, gloo, "no_sync")

    reference = new_net()
    ref_opt = sgd(reference)
    for step in range(2):
        losses = [sum(loss_of(reference, r, 10 * step + m) for m in range(3)) for r in range(world)]
        reference_step(reference, ref_opt, losses)
    assert_close(model, reference, "no_sync against the reference")


def static_graph(rank, world, gloo):
    """static_graph=True, with a parameter that is never used (allowed with a static graph)."""
    model = new_net(extra_heads=True)
    model.alt_head.requires_grad_(False)
    ddp = DDP(model, static_graph=True)
    train_ddp(ddp, sgd(model), rank, steps=5)
    assert_identical_on_all_ranks(model, gloo, "static_graph")
    reference = new_net(extra_heads=True)
    reference.alt_head.requires_grad_(False)
    opt = sgd(reference)
    for step in range(5):
        reference_step(reference, opt, [loss_of(reference, r, step) for r in range(world)])
    assert_close(model, reference, "static_graph against the reference")


def join_uneven_inputs(rank, world, gloo):
    """Rank r has 2 + r batches; under join() the ranks that ran out shadow the all-reduces
    with zeros, so a step's gradient is the sum over the ranks still training / world."""
    def steps_of(r):
        return 2 + r

    model = new_net()
    ddp = DDP(model)
    opt = sgd(model)
    with ddp.join():
        for step in range(steps_of(rank)):
            opt.zero_grad(set_to_none=True)
            loss_of(ddp, rank, step).backward()
            opt.step()
    assert_identical_on_all_ranks(model, gloo, "join")

    reference = new_net()
    ref_opt = sgd(reference)
    for step in range(steps_of(world - 1)):
        active = [loss_of(reference, r, step) for r in range(world) if step < steps_of(r)]
        ref_opt.zero_grad(set_to_none=True)
        (sum(active) / world).backward()
        ref_opt.step()
    assert_close(model, reference, "join against the reference")


def compression_hooks(rank, world, gloo):
    """torch's fp16 and bf16 compression hooks run their all-reduce on chorus; the result is
    the reference up to the rounding of the compressed gradients."""
    for name, hook, tolerance in (("fp16", default_hooks.fp16_compress_hook, 2e-3),
                                  ("bf16", default_hooks.bf16_compress_hook, 2e-2)):
        calls = []

        def counted(state, bucket, hook=hook, calls=calls):
            calls.append(bucket.index())
            return hook(state, bucket)

        model = new_net()
        ddp = DDP(model)
        ddp.register_comm_hook(None, counted)  # state None: the default (chorus) group
        train_ddp(ddp, sgd(model), rank)
        assert len(calls) >= STEPS, f"the {name} hook ran {len(calls)} times in {STEPS} steps"
        assert_identical_on_all_ranks(model, gloo, f"{name}_compress_hook")
        assert_close(model, train_reference(world), f"{name}_compress_hook against the reference",
                     rtol=tolerance, atol=tolerance)


def powersgd_hook(rank, world, gloo):
    """PowerSGD from step 2 on, with a rank as large as every gradient matrix, which makes its
    low-rank product exact: the result is the reference up to rounding. Tanh keeps every hidden
    unit alive, so the gradient matrices have full rank."""
    model = new_net(activation=torch.nn.Tanh)
    ddp = DDP(model)
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=16,
                                   start_powerSGD_iter=2, min_compression_rate=0,
                                   use_error_feedback=True, warm_start=True)
    ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    steps = 6
    train_ddp(ddp, sgd(model), rank, steps=steps)
    assert state.iter == steps, f"PowerSGD counted {state.iter} steps, expected {steps}"
    assert state.p_memory_dict, "PowerSGD never compressed a bucket"
    assert_identical_on_all_ranks(model, gloo, "powerSGD_hook")
    reference = train_reference(world, steps=steps, activation=torch.nn.Tanh)
    assert_close(model, reference, "powerSGD_hook against the reference", rtol=1e-3, atol=1e-4)


def zero_redundancy_optimizer(rank, world, gloo):
    """ZeroRedundancyOptimizer shards SGD's momentum across ranks and broadcasts the updated
    shards; consolidate_state_dict gathers the whole optimizer state on rank 0."""
    model = new_net()
    ddp = DDP(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.SGD, lr=LR, momentum=0.9)
    train_ddp(ddp, opt, rank, steps=5)
    assert_identical_on_all_ranks(model, gloo, "ZeroRedundancyOptimizer")
    assert_close(model, train_reference(world, steps=5, momentum=0.9),
                 "ZeroRedundancyOptimizer against the reference")
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        state = opt.state_dict()["state"]
        assert len(state) == len(params), f"consolidated state has {len(state)} of {len(params)}"
        assert all("momentum_buffer" in s for s in state.values()), "momentum buffers missing"


CASES = {f.__name__: f for f in (matches_gloo, find_unused_parameters, no_sync, static_graph,
                                 join_uneven_inputs, compression_hooks, powersgd_hook,
                                 zero_redundancy_optimizer)}


def main():
    names = sys.argv[1:]
    unknown = [n for n in names if n not in CASES]
    if not names or unknown:
        sys.exit(f"usage: ddp_cases.py CASE... (unknown: {unknown}; cases: {', '.join(CASES)})")
    rank, world, gloo = init()
    for name in names:
        CASES[name](rank, world, gloo)
        dist.barrier(group=gloo)  # the ranks finish each case together
        report(name)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

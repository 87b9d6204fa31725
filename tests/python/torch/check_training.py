"""Unmodified torch 2.x training code on CPU with backend "chorus", checked against gloo.

    launch.py -n N -- check_training.py ddp|ddp_compiled|fsdp|hsdp|dtensor|checkpoint

Every rank joins one world of backend "chorus" (init_process_group("chorus"), env://) and makes
a gloo group of the same ranks (new_group(backend="gloo")). Each training function runs twice in
the same processes: as a user writes it, on the default group and init_device_mesh; then on the
gloo group (DDP's process_group, DeviceMesh.from_group). The chorus run's results are compared
with the gloo run's on each rank, and gathered over gloo to check they are the same on every
rank. (Destroying the world and joining another of gloo instead hangs now and then in torch
2.7.1's destroy_process_group, on gloo alone too.)

* ddp: DistributedDataParallel over a small MLP, a few SGD steps; without a hook, with torch's
  fp16_compress_hook and bf16_compress_hook, and with chorus.hooks' bf16 compress_hook.
* ddp_compiled: the same DDP (no hook) of a model under torch.compile (inductor).
* fsdp: FSDP2 fully_shard over init_device_mesh("cpu", (N,)), fp32 and bf16 mixed precision
  (MixedPrecisionPolicy), reshard_after_forward True and False.
* hsdp: fully_shard over a 2-D mesh (replicate x shard), 4 ranks.
* dtensor: DTensor redistribution (Shard <-> Replicate, Partial -> Replicate / Shard) on a 1-D and
  a 2-D mesh, against the tensor every rank builds itself (no gloo run).
* checkpoint: torch.distributed.checkpoint save of an FSDP2 model's state on ranks {0, 1} of 3,
  load on all 3 (resharded 3 ways) and on rank 0 alone (no_dist), against the saved values.

Where the values cannot be bit-identical to gloo's (a sum of more than two addends in another
order), the comparison states its tolerance and the reason. CHORUS_TEST_BACKEND=gloo puts gloo in
chorus's place (gloo against gloo), to tell a limit of torch from one of chorus.
"""

import argparse
import datetime
import faulthandler
import os
import shutil
import traceback
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import chorus.torch  # noqa: F401  registers "chorus"
import rank_harness as h

STEPS = 4
UNDER_TEST = os.environ.get("CHORUS_TEST_BACKEND", "chorus")
rank, size = h.rank_and_size()
REF = None  # the gloo group of every rank
GLOO_AVG = None  # why gloo's ReduceOp.AVG cannot serve as a reference (None: it can)


def init():
    global REF, GLOO_AVG
    dist.init_process_group(UNDER_TEST, timeout=datetime.timedelta(seconds=40))
    REF = dist.new_group(backend="gloo")
    # FSDP2 averages gradients with ReduceOp.AVG. Torch 2.7.1's gloo returns the sum from
    # reduce_scatter_tensor(op=AVG), and its all_reduce raises "Cannot use ReduceOp.AVG with
    # Gloo"; there the one-process reference alone checks FSDP2.
    out = torch.empty(1)
    dist.reduce_scatter_tensor(out, torch.ones(size), op=dist.ReduceOp.AVG, group=REF)
    if out.item() != 1.0:
        GLOO_AVG = f"gloo's reduce_scatter_tensor(op=AVG) of ones gave {out.item()}, not 1"


def hsdp_ref_groups():
    """This rank's gloo groups laid out as init_device_mesh("cpu", (2, 2)) lays out its own:
    dimension 0 (replicate) the columns of [[0, 1], [2, 3]], dimension 1 (shard) the rows."""
    grid = torch.arange(size).view(2, 2)
    mine = []
    for dim in range(2):
        for members in (grid.t() if dim == 0 else grid).tolist():
            g = dist.new_group(members, backend="gloo")
            if rank in members:
                mine.append(g)
    return mine


def mlp(seed=0, width=32):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 8))


def batch(step, r=None):
    """Rank r's batch of a step, the same in every run."""
    g = torch.Generator().manual_seed(1000 * step + (rank if r is None else r))
    return torch.randn(8, 16, generator=g), torch.randn(8, 8, generator=g)


def flat(tensors):
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


def compare(what, got, want, atol=0.0, rtol=0.0, reason=""):
    """got (chorus) against want (gloo) on this rank; the largest difference said where a
    tolerance applies."""
    label = f"{what}: chorus vs gloo" + (f" (atol {atol}, rtol {rtol}: {reason})" if atol or rtol
                                         else " (bitwise)")
    if got.shape == want.shape and got.dtype == want.dtype:
        diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
        if diff and (atol or rtol):
            h.say(f"  {what}: max |chorus - gloo| {diff:.3g}")
    h.expect_equal(got, want, label, atol=atol, rtol=rtol)


def same_on_every_rank(what, t):
    """`t` (a chorus result) is bit-identical on every rank (gathered over gloo)."""
    everyone = [torch.empty_like(t) for _ in range(size)]
    dist.all_gather(everyone, t, group=REF)
    for r, other in enumerate(everyone):
        h.expect_equal(other, everyone[0], f"{what}: rank {r}'s chorus result equals rank 0's")


def sum_tolerance():
    """Two addends sum the same in any order; more may round differently from gloo's order."""
    if size <= 2:
        return 0.0, ""
    return 1e-5, f"{size} addends summed in another order than gloo's"


# ----------------------------------------------------------------------------------------------
# DDP


def ddp_train(hook, group=None, compiled=None):
    """group None: the default group, as a user writes it. compiled: torch.compile's backend
    for the model DDP wraps (None: not compiled)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    from chorus import hooks

    model = DDP(mlp() if compiled is None else torch.compile(mlp(), backend=compiled),
                process_group=group)
    if hook == "fp16":
        model.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif hook == "bf16":
        model.register_comm_hook(group, default_hooks.bf16_compress_hook)
    elif hook == "chorus-bf16":
        model.register_comm_hook(hooks.CompressionState("bf16", group=group), hooks.compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return flat(model.parameters()), torch.stack(losses)


def ddp():
    for hook in ["none", "fp16", "bf16", "chorus-bf16"]:
        got = ddp_train(hook)
        want = ddp_train(hook, REF)
        atol, why = sum_tolerance()
        if hook != "none" and size > 2:
            # One 16-bit rounding of a gradient (2^-8 relative in bf16, 2^-11 in fp16) moves a
            # parameter by about lr * |gradient| * 2^-8 per step, momentum adding up.
            atol = 5e-5 if hook == "fp16" else 1e-3
            why = f"16-bit sums of {size} addends round in another order than gloo's"
        compare(f"DDP hook={hook} parameters after {STEPS} steps", got[0], want[0], atol=atol,
                reason=why)
        compare(f"DDP hook={hook} losses", got[1], want[1], atol=atol, reason=why)
        same_on_every_rank(f"DDP hook={hook} parameters", got[0])


def ddp_compiled():
    """DDP of a model under torch.compile (inductor), against the same on the gloo group.

    DDP(torch.compile(model)): torch.compile(DDP(model)) of torch 2.15 compiled no graph on CPU
    in a 1-rank world of gloo or chorus (Dynamo breaks the graph at DDP's forward, which it
    marks as skipped: "Attempted to call function marked as skipped ...
    DistributedDataParallel._inside_ddp_forward") and so ran DDP uncompiled."""
    import torch._dynamo
    from torch._inductor.compile_fx import compile_fx

    graphs = []

    def inductor(gm, example_inputs):  # inductor, counting the graphs it is handed
        graphs.append(gm)
        return compile_fx(gm, example_inputs)

    got = ddp_train("none", compiled=inductor)
    h.expect(len(graphs) > 0, f"torch.compile compiled {len(graphs)} graphs")
    h.say(f"torch.compile: inductor compiled {len(graphs)} graphs")
    torch._dynamo.reset()
    want = ddp_train("none", REF, compiled=inductor)
    torch._dynamo.reset()
    atol, why = sum_tolerance()
    compare(f"DDP under torch.compile parameters after {STEPS} steps", got[0], want[0],
            atol=atol, reason=why)
    compare("DDP under torch.compile losses", got[1], want[1], atol=atol, reason=why)
    same_on_every_rank("DDP under torch.compile parameters", got[0])


# ----------------------------------------------------------------------------------------------
# FSDP2 and HSDP


def fsdp_train(mesh_shape, mp, reshard, ref_groups=None):
    """ref_groups None: the mesh from init_device_mesh, as a user writes it; else a mesh of these
    groups (one per mesh dimension)."""
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Replicate, Shard

    names = ("replicate", "shard") if len(mesh_shape) > 1 else None
    if ref_groups is None:
        mesh = init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
        backend = UNDER_TEST
    else:
        layout = torch.arange(size).view(mesh_shape)
        groups = ref_groups if len(ref_groups) > 1 else ref_groups[0]
        mesh = DeviceMesh.from_group(groups, "cpu", mesh=layout, mesh_dim_names=names)
        backend = "gloo"
    policy = MixedPrecisionPolicy()
    if mp == "bf16":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    model = mlp(width=40)  # 40 rows: uneven shards on 3 ranks
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    for d in range(mesh.ndim):
        name = mesh.get_group(d)._get_backend(torch.device("cpu")).name()
        h.expect(name == backend, f"mesh dimension {d} runs on {name}, not {backend}")
    want = [Shard(0)] if len(mesh_shape) == 1 else [Replicate(), Shard(0)]
    for p in model.parameters():
        h.expect(list(p.placements) == want, f"placements {p.placements}, expected {want}")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    local = flat(p.to_local() for p in model.parameters())
    full = flat(p.full_tensor() for p in model.parameters())
    return local, full, torch.stack(losses)


def one_process(width=40):
    """FSDP2's training in one process: each step's gradient the average of every rank's."""
    model = mlp(width=width)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        loss = sum(nn.functional.mse_loss(model(x), y) for x, y in
                   (batch(step, r) for r in range(size))) / size
        loss.backward()
        opt.step()
    return flat(model.parameters())


def fsdp_case(mesh_shape, mp, reshard, ref_groups):
    name = f"{'HSDP' if len(mesh_shape) > 1 else 'FSDP2'} mesh={mesh_shape} {mp} " \
           f"reshard_after_forward={reshard}"
    got = fsdp_train(mesh_shape, mp, reshard)
    # Against one process: the ranks' gradients summed in another order; in bf16, every
    # forward and backward rounded to 8 bits of mantissa.
    # Seen: 1.5e-8 in fp32, 1.6e-3 in bf16.
    atol = 1e-5 if mp == "fp32" else 1e-2
    why = "one process adds the ranks' gradients in autograd's order" if mp == "fp32" else \
          "bf16 compute against the fp32 one-process run"
    one = one_process()
    h.say(f"  {name}: max |chorus - one process| {(got[1] - one).abs().max().item():.3g}")
    h.expect_equal(got[1], one, f"{name}: full parameters against one process "
                   f"(atol {atol}: {why})", atol=atol)
    same_on_every_rank(f"{name}: full parameters", got[1])
    if GLOO_AVG:
        h.say(f"note: {name}: not compared with gloo: {GLOO_AVG}")
        return
    want = fsdp_train(mesh_shape, mp, reshard, ref_groups)
    # Bitwise on 2 ranks and on the 2 x 2 mesh (every sum has two addends); seen bitwise on 3
    # ranks in fp32 too, but not promised.
    atol, why = sum_tolerance()
    if mp == "bf16" and max(mesh_shape) > 2:
        # Seen: up to 1e-4 on 3 ranks, where a bf16 average of 3 rounds in another order.
        atol, why = 1e-3, f"bf16 averages of {max(mesh_shape)} addends round in another order " \
                          "than gloo's"
    compare(f"{name}: this rank's shard after {STEPS} steps", got[0], want[0], atol=atol,
            reason=why)
    compare(f"{name}: losses", got[2], want[2], atol=atol, reason=why)


def fsdp():
    for mp in ["fp32", "bf16"]:
        for reshard in [True, False]:
            fsdp_case((size,), mp, reshard, [REF])


def hsdp():
    assert size == 4, "hsdp runs on 4 ranks"
    ref_groups = hsdp_ref_groups()
    try:
        fsdp_case((2, 2), "fp32", True, ref_groups)
    except AssertionError:
        # Torch 2.7.1's FSDP2 asserts an all-reduce event, which a CPU stream does not record:
        #   _fsdp_param_group.py, post_backward: assert all_reduce_event is not None
        # on every rank (chorus); with gloo it fails before, in the same all_reduce:
        #   RuntimeError: Cannot use ReduceOp.AVG with Gloo
        # (2.15 runs it on both). The ranks fail alike, at the same step, so they stay in step.
        text = traceback.format_exc()
        if "all_reduce_event is not None" not in text:
            raise
        h.say("skip: HSDP on CPU: this torch cannot: AssertionError in FSDP2's post_backward "
              "(assert all_reduce_event is not None); with gloo: RuntimeError: Cannot use "
              "ReduceOp.AVG with Gloo")
        return
    fsdp_case((2, 2), "bf16", True, ref_groups)
    fsdp_case((2, 2), "fp32", False, ref_groups)


# ----------------------------------------------------------------------------------------------
# DTensor


def dtensor():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    def check():
        mesh = init_device_mesh("cpu", (size,))
        g = torch.Generator().manual_seed(7)
        for rows, cols in [(size * 3, 5), (size * 2 + 1, 7)]:  # even, then uneven shards
            full = torch.randn(rows, cols, generator=g)
            chunks = list(torch.chunk(full, size, dim=0))
            local = chunks[rank] if rank < len(chunks) else full[:0]
            d = DTensor.from_local(local.clone(), mesh, [Shard(0)], run_check=False,
                                   shape=full.shape, stride=full.stride())
            rep = d.redistribute(mesh, [Replicate()])
            h.expect_equal(rep.to_local(), full, f"Shard(0) -> Replicate {tuple(full.shape)}")
            back = rep.redistribute(mesh, [Shard(1)])
            want = list(torch.chunk(full, size, dim=1))
            want = want[rank] if rank < len(want) else full[:, :0]
            h.expect_equal(back.to_local(), want.contiguous(),
                           f"Replicate -> Shard(1) {tuple(full.shape)}")
            s0 = back.redistribute(mesh, [Shard(0)])
            h.expect_equal(s0.to_local(), local.contiguous(),
                           f"Shard(1) -> Shard(0) {tuple(full.shape)}")
            # Partial: every rank holds (rank + 1) * full; the sum is exact in float32.
            part = DTensor.from_local(full * (rank + 1), mesh, [Partial()], run_check=False)
            total = full * sum(range(1, size + 1))
            h.expect_equal(part.redistribute(mesh, [Replicate()]).to_local(), total,
                           f"Partial -> Replicate {tuple(full.shape)}", atol=1e-5, rtol=1e-6)
            sharded = part.redistribute(mesh, [Shard(0)]).to_local()
            want = list(torch.chunk(total, size, dim=0))
            want = want[rank] if rank < len(want) else total[:0]
            h.expect_equal(sharded, want, f"Partial -> Shard(0) {tuple(full.shape)}", atol=1e-5,
                           rtol=1e-6)
        if size == 4:
            mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))
            full = torch.randn(6, 10, generator=g)
            i, j = mesh2.get_coordinate()
            local = torch.chunk(torch.chunk(full, 2, dim=0)[i], 2, dim=1)[j]
            d = DTensor.from_local(local.clone(), mesh2, [Shard(0), Shard(1)], run_check=False)
            h.expect_equal(d.redistribute(mesh2, [Replicate(), Replicate()]).to_local(), full,
                           "2-D [Shard(0), Shard(1)] -> [Replicate, Replicate]")
            r = d.redistribute(mesh2, [Replicate(), Shard(0)]).to_local()
            h.expect_equal(r, torch.chunk(full, 2, dim=0)[j].contiguous(),
                           "2-D [Shard(0), Shard(1)] -> [Replicate, Shard(0)]")
            rep = DTensor.from_local(full.clone(), mesh2, [Replicate(), Replicate()],
                                     run_check=False)
            h.expect_equal(rep.redistribute(mesh2, [Shard(1), Shard(0)]).to_local(),
                           torch.chunk(torch.chunk(full, 2, dim=1)[i], 2, dim=0)[j].contiguous(),
                           "2-D [Replicate, Replicate] -> [Shard(1), Shard(0)]")
    check()


# ----------------------------------------------------------------------------------------------
# torch.distributed.checkpoint


def checkpoint():
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard

    assert size == 3, "checkpoint runs on 3 ranks: saved on 2, loaded on 3 and on 1"
    port = os.environ["MASTER_PORT"]
    where = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"chorus-dcp-{port}")

    def run():
        savers = dist.new_group([0, 1], backend=UNDER_TEST)
        saved = {}
        if rank in (0, 1):
            mesh = DeviceMesh.from_group(savers, "cpu")
            model = mlp(width=40)
            fully_shard(model, mesh=mesh)
            x, _ = batch(0)
            model(x).sum().backward()  # a step, so that the saved values are not the initial ones
            torch.optim.SGD(model.parameters(), lr=0.1).step()
            state = model.state_dict()
            saved = {k: v.full_tensor() for k, v in state.items()}
            dcp.save(state, checkpoint_id=where, process_group=savers)
        dist.barrier()
        # Load on 1 rank: rank 0 alone (no_dist) reads back what it held when saving.
        names = sorted(mlp(width=40).state_dict().keys())
        if rank == 0:
            plain = mlp(seed=2, width=40).state_dict()
            dcp.load(plain, checkpoint_id=where, no_dist=True)
            for k in names:
                h.expect_equal(plain[k], saved[k], f"saved on 2 ranks, loaded on 1: {k}")
        # The saved values reach ranks 1 and 2 from rank 0 (a broadcast, checked elsewhere).
        if rank != 0:
            saved = {k: torch.empty_like(v) for k, v in mlp(width=40).state_dict().items()}
        for k in names:
            dist.broadcast(saved[k], 0)
        h.expect(not torch.equal(saved[names[0]], mlp(seed=1, width=40).state_dict()[names[0]]),
                 "the saved values differ from the model they are loaded into")
        # Load on 3 ranks, sharded 3 ways (uneven: 40 rows): each rank's shard is its chunk.
        mesh3 = init_device_mesh("cpu", (size,))
        target = mlp(seed=1, width=40)
        fully_shard(target, mesh=mesh3)
        state = target.state_dict()
        dcp.load(state, checkpoint_id=where)
        target.load_state_dict(state)
        for k, v in target.state_dict().items():
            chunks = list(torch.chunk(saved[k], size, dim=0))
            want = chunks[rank] if rank < len(chunks) else saved[k][:0]
            h.expect_equal(v.to_local(), want, f"saved on 2 ranks, loaded on 3: {k}, shard")
        dist.barrier()
        if rank == 0:
            shutil.rmtree(where, ignore_errors=True)
    run()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["ddp", "ddp_compiled", "fsdp", "hsdp", "dtensor", "checkpoint"])
    mode = p.parse_args().mode
    # Where a rank hangs: its threads' stacks, printed before launch.py's timeout kills it.
    faulthandler.dump_traceback_later(float(os.environ.get("CHORUS_TEST_STACKS_AFTER", 70)))
    init()
    h.say(f"{mode} on {size} ranks of {UNDER_TEST}, torch {torch.__version__}")
    h.run(globals()[mode])
    h.finish()


if __name__ == "__main__":
    main()

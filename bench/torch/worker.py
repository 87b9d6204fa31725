"""One rank of bench/torch/run.py: the chorus backend against gloo on the current torch, both in
this process, alternating block by block so that both see the same load.

Started by chorus-run (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); rank 0 writes the JSON
result to --out. Cases:

  allreduce  dist.all_reduce (f32 sum, in place, async_op=False) of each size; the time of a
             call is the slowest rank's (MAX over ranks per iteration), the row the median.
             Up to 64 KiB also chorus.Communicator.all_reduce on the same memory ("direct").
  ddp        one training step (zero_grad, forward, backward with DDP's bucketed all-reduce,
             SGD step) of the MLP or CNN of examples/torch/models.py on a fixed random batch of
             64 per rank, four copies of the model: DDP on gloo, DDP on chorus, DDP inside
             no_sync() (no all-reduce: the compute-only step) and the bare model (no DDP at all).
             Time per step: the slowest rank's mean over a block.
  fsdp       one FSDP2 step (fully_shard per layer and at the root, reshard_after_forward) of a
             stack of Linear layers (--fsdp-params parameters), two copies: one on a mesh of the
             gloo group, one on a mesh of the chorus group, parameters made on the meta device
             and materialised per shard. Peak memory: see --memory.
  memory     an FSDP2 run with one backend only (--backend), in a process of its own: the peak
             resident memory of each rank over the steps (VmHWM from /proc/self/status, reset
             through /proc/self/clear_refs after the process group is up, so that only the
             model, its training and the backend's buffers count; torch's allocator statistics
             would miss the backends' own buffers: Chorus's shared-memory rings and Gloo's
             socket buffers are not torch tensors).
"""
import argparse
import datetime
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("case", choices=["allreduce", "ddp", "fsdp", "memory"])
    p.add_argument("--out", required=True)
    p.add_argument("--sizes", default="8,1K,64K,1M,4M,16M,64M")
    p.add_argument("--iters", type=int, default=20, help="timed calls (or steps) per block")
    p.add_argument("--rounds", type=int, default=3, help="blocks per backend")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--fsdp-params", type=float, default=52e6)
    p.add_argument("--fsdp-layers", type=int, default=8)
    p.add_argument("--backend", choices=["gloo", "chorus"], default="chorus")
    p.add_argument("--pin", action="store_true", help="pin rank r to CPU r mod the CPU count")
    return p.parse_args()


def parse_size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def slowest(values):
    """Element-wise MAX over the ranks (on the default group, gloo)."""
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def groups():
    # A gloo group of its own, beside the default group that only carries this script's
    # bookkeeping, so that neither backend's group sees extra calls.
    return {"gloo": dist.new_group(backend="gloo"), "chorus": dist.new_group(backend="chorus")}


def order(rnd):
    return ["gloo", "chorus"] if rnd % 2 == 0 else ["chorus", "gloo"]


def case_allreduce(args, n):
    pgs = groups()
    # The same all-reduce through Chorus's own Python API (chorus.Communicator, one blocking
    # C++ call on the caller's thread, as the C API's), in the same processes at the same
    # moments: what the torch binding adds over it is torch's Python and dispatcher, the Work,
    # and the backend's launch path.
    import chorus

    direct = chorus.Communicator.from_env()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    buf = torch.zeros(max(sizes) // 4 + 1, dtype=torch.float32)
    rows = []
    for nbytes in sizes:
        count = max(nbytes // 4, 1)
        t = buf[:count]
        # Fewer calls for the large sizes: a few seconds per size at most.
        iters = max(3, min(args.iters, int(2e7 // max(nbytes, 1))))
        times = {"gloo": [], "chorus": [], "direct": []}
        arr = t.numpy()  # the same memory

        def call(name):
            if name == "direct":
                direct.all_reduce(arr)
            else:
                dist.all_reduce(t, group=pgs[name])

        for rnd in range(args.rounds):
            for name in order(rnd) + (["direct"] if nbytes <= 64 << 10 else []):
                for _ in range(args.warmup if rnd < 2 else 1):
                    call(name)
                for _ in range(iters):
                    t0 = time.perf_counter()
                    call(name)
                    times[name].append((time.perf_counter() - t0) * 1e6)
        row = {"bytes": count * 4}
        for name in times:
            if not times[name]:
                continue
            us = median(slowest(times[name]))
            row[name + "_us"] = us
            row[name + "_busbw"] = count * 4 / (us * 1e-6) / 1e9 * 2 * (n - 1) / n
        # Correctness of both after the timing.
        for name, pg in pgs.items():
            t.fill_(dist.get_rank() + 1)
            dist.all_reduce(t, group=pg)
            assert bool((t == n * (n + 1) / 2).all()), f"{name}: wrong all_reduce result"
        t.zero_()
        rows.append(row)
    direct.barrier()
    del direct
    return {"rows": rows}


def batch_for(model_name, rank):
    g = torch.Generator().manual_seed(1234 + rank)
    shape = (64, 784) if model_name == "mlp" else (64, 1, 28, 28)
    return torch.randn(shape, generator=g), torch.randint(0, 10, (64,), generator=g)


def case_ddp(args, n):
    import models
    from torch.nn.parallel import DistributedDataParallel as DDP

    pgs = groups()
    torch.manual_seed(0)
    base = models.MODELS[args.model]()
    nets = {"nocomm": models.MODELS[args.model]()}
    nets["nocomm"].load_state_dict(base.state_dict())
    # "nosync": DDP inside no_sync(), no all-reduce: DDP's own work without communication, the
    # compute-only step of bench/compare/torch_ddp.sh; "nocomm": the bare model.
    for name, pg in list(pgs.items()) + [("nosync", pgs["chorus"])]:
        m = models.MODELS[args.model]()
        m.load_state_dict(base.state_dict())
        nets[name] = DDP(m, process_group=pg)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for k, m in nets.items()}
    x, y = batch_for(args.model, dist.get_rank())
    loss_fn = torch.nn.functional.cross_entropy

    def step(name):
        opts[name].zero_grad(set_to_none=True)
        if name == "nosync":
            with nets[name].no_sync():
                loss_fn(nets[name](x), y).backward()
        else:
            loss_fn(nets[name](x), y).backward()
        opts[name].step()

    names = ["gloo", "chorus", "nosync", "nocomm"]
    blocks = {k: [] for k in names}
    for rnd in range(args.rounds):
        for name in names[rnd % 4:] + names[:rnd % 4]:
            for _ in range(args.warmup if rnd < 4 else 1):
                step(name)
            dist.barrier()  # every rank starts the block together
            t0 = time.perf_counter()
            for _ in range(args.iters):
                step(name)
            blocks[name].append((time.perf_counter() - t0) / args.iters * 1e3)
    out = {}
    for name in names:
        out[name + "_ms"] = median(slowest(blocks[name]))
    # The same training on both: the replicas differ only by the summation order (none at N=2).
    diff = max(float((a - b).detach().abs().max()) for a, b in zip(nets["chorus"].parameters(),
                                                          nets["gloo"].parameters()))
    out["max_param_diff_chorus_gloo"] = slowest([diff])[0]
    return out


def fsdp_model(args):
    """--fsdp-layers Linear(d, d) + ReLU with d chosen for --fsdp-params parameters."""
    layers = args.fsdp_layers
    d = int((args.fsdp_params / layers) ** 0.5)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(d, d), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods), d


def sharded(args, mesh):
    from torch.distributed.fsdp import fully_shard

    with torch.device("meta"):
        model, d = fsdp_model(args)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            layer.reset_parameters()
    return model, d


def fsdp_stepper(model, d):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(8, d, generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    return step


def mesh_of(pg):
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh.from_group(pg, device_type="cpu")


def case_fsdp(args, n):
    pgs = groups()
    steps, params = {}, 0
    for name, pg in pgs.items():
        model, d = sharded(args, mesh_of(pg))
        params = sum(p.numel() for p in model.parameters())  # DTensors: the global count
        steps[name] = fsdp_stepper(model, d)
    blocks = {"gloo": [], "chorus": []}
    for rnd in range(args.rounds):
        for name in order(rnd):
            for _ in range(args.warmup if rnd < 2 else 0):
                steps[name]()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                steps[name]()
            blocks[name].append((time.perf_counter() - t0) / args.iters * 1e3)
    out = {"params": params}
    for name in blocks:
        out[name + "_ms"] = median(slowest(blocks[name]))
    return out


def vm_hwm_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def case_memory(args, n):
    pg = dist.new_group(backend=args.backend)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size
        reset = True
    except OSError:
        reset = False
    model, d = sharded(args, mesh_of(pg))
    step = fsdp_stepper(model, d)
    for _ in range(args.warmup + args.iters):
        step()
    dist.barrier()
    peak = slowest([vm_hwm_kib() / 1024.0])[0]
    return {"backend": args.backend, "peak_rss_mib": peak, "hwm_reset": reset}


def main():
    args = parse_args()
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    import chorus.torch  # noqa: F401  registers the backend

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    result = {"case": args.case, "world_size": n, "torch": torch.__version__}
    result.update(globals()["case_" + args.case](args, n))
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

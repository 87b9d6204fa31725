#!/usr/bin/python3
"""torchft's LocalSGD and DiLoCo (torchft.local_sgd) on train_async.py's model, data, batch and
optimizers, for bench/torch/async_bench.py's side-by-side table (settings torchft-...).

    RANK=r WORLD_SIZE=n MASTER_ADDR=host0 MASTER_PORT=p CLUSTER_ADDR=my-address \\
        torchft_async.py --mode diloco --sync-every 32 [--fragments 2 --overlap] [--pg gloo] \\
        --eval-every 20 --target-accuracy 0.85 --results FILE.json

One process per rank, each rank a torchft replica group of one: its own TCPStore and torchft
Manager (use_async_quorum=False, which torchft's DiLoCo requires; init_sync=False: every rank
seeds the same initial model, as in train_async.py), the lighthouse (min_replicas = the world
size) in rank 0's process on MASTER_ADDR, the replicas' collectives on torchft's ProcessGroupGloo
(--pg chorus: chorus.torchft.ProcessGroupChorus). The wrappers are torchft's own:

  --mode localsgd   LocalSGD(manager, model, optimizer, sync_every=H): the parameters averaged
                    through the Manager every H optimizer steps (a quorum and a commit each time)
  --mode diloco     DiLoCo(manager, fragments, inner, outer, sync_every=H): the inner optimizer
                    per rank, every H steps the averaged pseudo-gradient stepped by the outer
                    optimizer, SGD lr --outer-lr, momentum --outer-momentum, Nesterov (one per
                    fragment); --fragments F cuts the model into F contiguous groups of layers of
                    about equal size (streaming DiLoCo: fragment f syncs every H / F steps in
                    turn), --overlap gives each fragment's all-reduce one inner step to finish
                    (torchft's fragment_sync_delay=1)

Data, shards, batch, seeds, optimizers and evaluations are train_async.py's (train_ddp.py's
helpers): the test set every --eval-every steps, each rank its own replica on its share, through
a default gloo group that carries nothing else but the final check. At the end the parameters are
averaged once through the Manager (as train_async.py's synchronize()) and compared bit for bit.
Rank 0 writes train_async.py's --results JSON; bytes_sent counts what the Manager all-reduced, as
a ring algorithm sends it (2 n (N-1) / N per all-reduce of n bytes), as train_async.py does.
"""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))

import fashion_mnist  # noqa: E402
import models  # noqa: E402
import train_ddp  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["localsgd", "diloco"], required=True)
    p.add_argument("--pg", choices=["gloo", "chorus"], default="gloo",
                   help="the process group torchft's Manager gets")
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--sync-every", type=int, default=32, help="H")
    p.add_argument("--fragments", type=int, default=1, help="diloco: streamed in F fragments")
    p.add_argument("--overlap", action="store_true",
                   help="diloco: each fragment's all-reduce overlaps the next inner step")
    p.add_argument("--outer-lr", type=float, default=0.7)
    p.add_argument("--outer-momentum", type=float, default=0.9)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="adam")
    p.add_argument("--lr", type=float, default=None, help="default: 1e-3 adam, 0.05 sgd")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--timeout", type=float, default=300,
                   help="seconds: collectives, the quorum and torchft's RPCs")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=None)
    p.add_argument("--stop-at-target", action="store_true")
    p.add_argument("--results", metavar="JSON")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--addr", default=os.environ.get("CLUSTER_ADDR", "127.0.0.1"),
                   help="this host's address, which the other replicas reach")
    args = p.parse_args()
    if args.sync_every < 1:
        p.error(f"--sync-every must be >= 1, got {args.sync_every}")
    if args.mode == "localsgd" and (args.fragments != 1 or args.overlap):
        p.error("--fragments and --overlap are for --mode diloco")
    if args.target_accuracy is not None and not args.eval_every:
        p.error("--target-accuracy needs --eval-every K")
    args.lr = args.lr or (1e-3 if args.optimizer == "adam" else 0.05)
    args.backend = "gloo"  # the default group: evaluations and the final check only
    return args


def layer_fragments(model, count):
    """count nn.ModuleLists of contiguous parameter-holding layers of about equal size."""
    layers = [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]
    sizes = [sum(p.numel() for p in m.parameters(recurse=False)) for m in layers]
    if count > len(layers):
        raise ValueError(f"--fragments {count}: the model has {len(layers)} layers")
    total, groups, start = sum(sizes), [], 0
    for f in range(1, count):
        target, end = total * f / count, start + 1
        while end < len(layers) - (count - f) and abs(sum(sizes[:end + 1]) - target) <= abs(
                sum(sizes[:end]) - target):
            end += 1
        groups.append(layers[start:end])
        start = end
    groups.append(layers[start:])
    return [torch.nn.ModuleList(g) for g in groups]


def start_lighthouse(rank, world, timeout):
    """Rank 0 runs torchft's lighthouse on MASTER_ADDR; every rank gets its address."""
    from torchft.coordination import LighthouseServer

    store = dist.distributed_c10d._get_default_store()
    server = None
    if rank == 0:
        server = LighthouseServer(bind="[::]:0", min_replicas=world)
        port = server.address().rsplit(":", 1)[1]
        store.set("torchft_async/lighthouse", f"http://{os.environ['MASTER_ADDR']}:{port}")
    store.wait(["torchft_async/lighthouse"], datetime.timedelta(seconds=timeout))
    return server, store.get("torchft_async/lighthouse").decode()


def make_manager(args, model, opt, rank, world, Manager, ProcessGroupGloo):
    """This rank's torchft Manager (a replica group of one) on a gloo or chorus group, and the
    lighthouse (rank 0 runs it; None elsewhere)."""
    from torch.distributed import TCPStore

    timeout = datetime.timedelta(seconds=args.timeout)
    lighthouse, lighthouse_addr = start_lighthouse(rank, world, args.timeout)
    if args.pg == "chorus":
        from chorus.torchft import ProcessGroupChorus

        pg = ProcessGroupChorus(timeout=timeout)
    else:
        pg = ProcessGroupGloo(timeout=timeout)
    store = TCPStore(args.addr, 0, is_master=True, wait_for_workers=False)
    manager = Manager(
        pg=pg,
        min_replica_size=world,
        load_state_dict=lambda sd: (model.load_state_dict(sd["model"]),
                                    opt.load_state_dict(sd["optim"])),
        state_dict=lambda: {"model": model.state_dict(), "optim": opt.state_dict()},
        replica_id=f"torchft_async_{rank}",
        timeout=timeout,
        quorum_timeout=timeout,
        connect_timeout=timeout,
        rank=0,
        world_size=1,
        store_addr=args.addr,
        store_port=store.port,
        lighthouse_addr=lighthouse_addr,
        hostname=args.addr,
        use_async_quorum=False,
        init_sync=False,
    )
    manager.chorus_bench_store = store  # the TCPStore's server lives as long as the Manager
    return lighthouse, manager, pg


def final_sync(manager, model):
    """The parameters averaged once through the Manager; whether that average was committed."""
    manager.start_quorum()
    averaged = [p.detach().clone() for p in model.parameters()]
    for work in [manager.allreduce(a) for a in averaged]:
        work.wait()
    committed = manager.should_commit()
    if committed:
        with torch.no_grad():
            for p, a in zip(model.parameters(), averaged):
                p.copy_(a)
    return committed


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    try:
        from torchft import Manager, ProcessGroupGloo
        from torchft.local_sgd import DiLoCo, LocalSGD
    except ImportError as e:
        sys.exit(f"torchft_async: cannot import torchft ({e}); install it beside this torch: "
                 "scripts/install-torch2 --torchft")
    rank, world, say = train_ddp.join_group(args, "torchft_async")

    torch.manual_seed(args.seed)
    train_set, test_set = train_ddp.load_data(args)
    model = models.MODELS[args.model]()
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    lighthouse, manager, pg = make_manager(args, model, opt, rank, world, Manager,
                                           ProcessGroupGloo)
    payload = [0]  # bytes the Manager all-reduced
    allreduce = manager.allreduce

    def counted_allreduce(tensor, *a, **kw):
        payload[0] += tensor.numel() * tensor.element_size()
        return allreduce(tensor, *a, **kw)

    manager.allreduce = counted_allreduce

    def sent():
        return int(payload[0] * 2 * (world - 1) / world)

    if args.mode == "localsgd":
        wrapper = LocalSGD(manager, model, opt, sync_every=args.sync_every)
    else:
        fragments = layer_fragments(model, args.fragments)
        outer = [torch.optim.SGD(f.parameters(), lr=args.outer_lr, momentum=args.outer_momentum,
                                 nesterov=args.outer_momentum > 0) for f in fragments]
        wrapper = DiLoCo(manager, fragments, opt, outer, sync_every=args.sync_every,
                         fragment_sync_delay=1 if args.overlap else 0)
    say(f"torchft_async: {world} replicas, torchft {args.mode} H={args.sync_every}"
        + (f", {args.fragments} fragments" if args.mode == "diloco" else "")
        + (", overlapped" if args.overlap else "")
        + f", pg {pg.getBackendName()}, {args.model}, {args.optimizer} lr {args.lr}, batch "
        f"{args.batch} per rank, {'synthetic data' if args.synthetic else args.data}")

    steps, start, evals, eval_s, reached = 0, time.perf_counter(), [], 0.0, None
    x_all, y_all = train_set
    done = False
    with wrapper:
        for epoch in range(args.epochs):
            idx = fashion_mnist.shard(len(x_all), rank, world, epoch, args.seed)
            for first in range(0, len(idx) - args.batch + 1, args.batch):
                if args.steps and steps >= args.steps:
                    done = True
                    break
                b = idx[first:first + args.batch]
                opt.zero_grad()
                loss = F.cross_entropy(model(x_all[b]), y_all[b])
                loss.backward()
                opt.step()  # the wrapper's hooks sync every H steps
                steps += 1
                if steps % args.log_every == 0:
                    say(f"epoch {epoch} step {steps} loss {loss.item():.4f}")
                if args.eval_every and steps % args.eval_every == 0:
                    t0 = time.perf_counter()
                    train_s = t0 - start - eval_s
                    accuracy = train_ddp.test_accuracy(model, test_set, rank, world)
                    eval_s += time.perf_counter() - t0
                    evals.append((steps, train_s, accuracy))
                    say(f"step {steps}: test accuracy {accuracy * 100:.2f} % after "
                        f"{train_s:.1f} s of training")
                    if reached is None and args.target_accuracy is not None \
                            and accuracy >= args.target_accuracy:
                        reached = (steps, train_s)
                        say(f"target accuracy {args.target_accuracy * 100:.2f} % reached at "
                            f"step {steps} after {train_s:.1f} s of training")
                        if args.stop_at_target:
                            done = True
                            break
            if done:
                break
        elapsed = time.perf_counter() - start
        train_s = elapsed - eval_s
        train_bytes = sent()
        if args.target_accuracy is not None and reached is None:
            say(f"target accuracy {args.target_accuracy * 100:.2f} % not reached in {steps} steps")
        before = train_ddp.test_accuracy(model, test_set, rank, world)
        if args.mode == "diloco":
            for fragment in wrapper._fragments:  # a fragment's all-reduce still in flight
                if fragment._allreduce_work:
                    fragment.perform_sync()
    committed = final_sync(manager, model)  # the final synchronisation
    say(f"replicas' test accuracy before the final synchronisation: {before * 100:.2f} %"
        + ("" if committed else " (the final average was not committed)"))
    accuracy = train_ddp.test_accuracy(model, test_set, rank, world)
    differing = train_ddp.ranks_with_other_parameters(model, [])
    say(f"{steps} steps in {elapsed:.1f} s ({train_s:.1f} s of training, evaluations left out); "
        f"bytes sent per step (mean, rank 0): {train_bytes / max(steps, 1):.0f}")
    say(f"final test accuracy: {accuracy * 100:.2f} %")
    say(f"parameters: bit-identical on all {world} ranks" if differing == 0 else
        f"parameters: {differing} of {world} ranks differ from rank 0")
    if args.results and rank == 0:
        settings = {k: v for k, v in vars(args).items()
                    if k not in ("results", "data", "log_every")}
        settings["torchft"] = True
        with open(args.results, "w") as f:
            json.dump({"settings": settings, "world": world, "torch": torch.__version__,
                       "steps": steps, "train_s": train_s, "wall_s": elapsed,
                       "bytes_sent": train_bytes, "bytes_per_step": train_bytes / max(steps, 1),
                       "evaluations": [dict(step=s_, train_s=t_, accuracy=a_)
                                       for s_, t_, a_ in evals],
                       "target": None if reached is None else dict(step=reached[0],
                                                                  train_s=reached[1]),
                       "accuracy_before_sync": before, "final_accuracy": accuracy,
                       "bit_identical": differing == 0, "divergence": []}, f, indent=1)
    dist.barrier()  # every replica done with the lighthouse before rank 0 stops it
    manager.shutdown(wait=False)
    if lighthouse is not None:
        lighthouse.shutdown()
    dist.destroy_process_group()
    sys.exit(0 if differing == 0 else 3)


if __name__ == "__main__":
    main()

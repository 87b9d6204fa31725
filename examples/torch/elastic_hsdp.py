"""train_elastic.py --hsdp S: the model sharded with FSDP2 within replica groups of S ranks, the
replicate dimension run by chorus.torch.elastic.HSDPTrainer; the state saved before a failure
(each shard as it is) and loaded by a reference run with the survivors' membership."""

import torch
import torch.distributed as dist

import models
from train_fsdp import full_parameters, shard


def build(args, elastic):
    """(model, optimizer, mesh): every rank builds the same model, then fully_shard keeps its
    replica group's shard of it."""
    mesh = elastic.hsdp_mesh(args.hsdp)
    torch.manual_seed(args.seed)
    model = shard(models.MODELS[args.model](), mesh)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    return model, opt, mesh


def first_layer(model):
    """The module whose output's gradient comes last in backward: the later layers' gradients
    are being reduce-scattered by then."""
    return next(m for m in model if any(p.requires_grad for p in m.parameters(recurse=False)))


def save_shards(path, model, opt, trainer, plan, mesh):
    """The ranks of replica group 0 save their shards (parameters and momentum) to path.<index>:
    a run with the same shard count loads them (load_shards)."""
    if trainer.replica != 0:
        return
    params = [p.to_local().clone() for p in model.parameters()]
    momentum = [opt.state[p]["momentum_buffer"].to_local().clone()
                if "momentum_buffer" in opt.state.get(p, {}) else None
                for p in model.parameters()]
    torch.save({"params": params, "momentum": momentum, "steps": trainer.steps,
                "epoch": plan.epoch, "cursor": plan.cursor, "world": dist.get_world_size(),
                "shards": mesh.size()}, f"{path}.{mesh.get_local_rank()}")


def load_shards(path, model, opt, trainer, plan, mesh):
    """Loads this rank's shard index from save_shards; returns the world size saved."""
    from torch.distributed.tensor import DTensor

    state = torch.load(f"{path}.{mesh.get_local_rank()}", weights_only=False)
    if state["shards"] != mesh.size():
        raise SystemExit(f"train_elastic: {path} holds {state['shards']} shards, this run "
                         f"{mesh.size()}")
    with torch.no_grad():
        for p, saved, m in zip(model.parameters(), state["params"], state["momentum"]):
            p.to_local().copy_(saved)
            if m is not None:
                opt.state[p]["momentum_buffer"] = DTensor.from_local(
                    m.clone(), p.device_mesh, p.placements, shape=p.shape, stride=p.stride())
    trainer.steps, plan.epoch, plan.cursor = state["steps"], state["epoch"], state["cursor"]
    plan._order()
    return state["world"]


def final_state(model):
    """The full state_dict (collective within each replica group)."""
    return {k: v.full_tensor() for k, v in model.state_dict().items()}


def all_parameters(model):
    """The unsharded parameters as one flat tensor (collective within each replica group)."""
    return full_parameters(model)

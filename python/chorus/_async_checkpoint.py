"""Checkpoints of per-rank training state with torch.distributed.checkpoint (DCP), for
chorus.async_training (which re-exports save_checkpoint and load_checkpoint).

Between synchronisations the replicas differ (LocalSGD's and DiLoCo's parameters, every rank's
inner optimizer state, error feedback, deltas in flight), and the wrappers' state has a shape
that changes as training goes (the outer momentum appears at the first outer step, a fragment's
error feedback at its first compressed sync, deltas in flight come and go). DCP loads in place
into a state dict of the saved shape and takes a plain tensor for a replicated one, so each rank
saves its whole state under keys of its own ("rank<r>.t<i>": the tensors) with the rest of the
structure as one bytes object ("rank<r>.skeleton": pickled, the tensors replaced by their keys,
shapes and dtypes; bytes, so that DCP does not flatten it). Loading reads the skeleton first, allocates the tensors it names and loads them: one
checkpoint directory, every rank writing its own file, and back the same bits. The world size
must be the one the checkpoint was written with.
"""

import pickle

import torch
import torch.distributed as dist

_TENSOR = "__chorus_dcp_tensor__"


def _split(obj, prefix, tensors):
    """obj with every tensor replaced by (_TENSOR, key, shape, dtype); tensors[key] = it."""
    if isinstance(obj, torch.Tensor):
        key = f"{prefix}.t{len(tensors)}"
        tensors[key] = obj.detach()
        return (_TENSOR, key, tuple(obj.shape), str(obj.dtype).replace("torch.", ""))
    if isinstance(obj, dict):
        return {k: _split(v, prefix, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_split(v, prefix, tensors) for v in obj)
    return obj


def _is_ref(obj):
    return isinstance(obj, tuple) and len(obj) == 4 and obj[0] == _TENSOR


def _templates(skeleton, out):
    """Empty tensors for every reference in the skeleton."""
    if _is_ref(skeleton):
        _, key, shape, dtype = skeleton
        out[key] = torch.empty(shape, dtype=getattr(torch, dtype))
    elif isinstance(skeleton, dict):
        for v in skeleton.values():
            _templates(v, out)
    elif isinstance(skeleton, (list, tuple)):
        for v in skeleton:
            _templates(v, out)
    return out


def _join(skeleton, tensors):
    if _is_ref(skeleton):
        return tensors[skeleton[1]]
    if isinstance(skeleton, dict):
        return {k: _join(v, tensors) for k, v in skeleton.items()}
    if isinstance(skeleton, (list, tuple)):
        return type(skeleton)(_join(v, tensors) for v in skeleton)
    return skeleton


def _prefix(group):
    return f"rank{dist.get_rank(group)}"


def save_checkpoint(path, state, group=None):
    """Collective: writes every rank's `state` (any nesting of dicts, lists and tuples of
    tensors and picklable values, e.g. {"model": model.state_dict(), "optimizer":
    opt.state_dict(), "trainer": trainer.state_dict()}) to the DCP checkpoint directory `path`
    (shared by the ranks)."""
    import torch.distributed.checkpoint as dcp

    prefix = _prefix(group)
    tensors = {}
    skeleton = _split(state, prefix, tensors)
    dcp.save({f"{prefix}.skeleton": pickle.dumps(skeleton), **tensors}, checkpoint_id=path,
             process_group=group)


def load_checkpoint(path, group=None):
    """Collective: this rank's state as save_checkpoint wrote it (the same ranks)."""
    import torch.distributed.checkpoint as dcp

    prefix = _prefix(group)
    key = f"{prefix}.skeleton"
    try:
        head = {key: None}
        dcp.load(head, checkpoint_id=path, process_group=group)
    except Exception as e:  # a missing key names only torch's planner
        raise RuntimeError(f"chorus load_checkpoint: {path}: no state of {prefix} (written by "
                           f"another number of ranks, or not a chorus checkpoint): {e}") from e
    skeleton = pickle.loads(head[key])
    tensors = _templates(skeleton, {})
    dcp.load(tensors, checkpoint_id=path, process_group=group)  # collective: every rank calls
    return _join(skeleton, tensors)

"""Gradient compression for DistributedDataParallel: comm hooks with error feedback.

Each hook sends less than the float32 gradient bucket and keeps, per rank and per bucket, what
compression lost this step (the error), adding it to the next step's gradient::

    from chorus import hooks
    state = hooks.CompressionState(kind="powersgd:2")   # bf16, fp16, int8, powersgd:R
    ddp.register_comm_hook(state, hooks.compress_hook)

They work on a process group of any backend (gloo, chorus, ...) and need no other import than
torch; ``import chorus.hooks`` does not load the chorus backend. Every rank ends a step with the
same averaged gradient bit for bit, so the replicas stay identical.

* ``bf16`` / ``fp16``: the bucket, divided by the world size and with the error added, is rounded
  to 16 bits and summed by the group's all-reduce in that type. Where the backend refuses the
  type (gloo has no bfloat16 all-reduce in torch 1.13) the 16-bit values are all-gathered
  instead and summed in float32 in rank order on every rank.
* ``int8``: blocks of ``block`` values (256) with a float32 scale each (max |x| / 127); the int8
  values and the scales are all-gathered (an int8 sum would overflow) and summed in float32 in
  rank order. 1/4 of the bytes plus 1/64 for the scales, per rank sent (N-1) times.
* ``powersgd:R``: every gradient of two or more dimensions and at least ``min_elements`` values,
  viewed as a matrix M (rows x the rest), is sent as rank-R factors: P = M Q summed and
  orthonormalised, then Q = M^T P averaged; the bucket gets P Q^T. Q is warm-started from the
  previous step (a fixed seed the first time, the same on every rank). Two all-reduces per
  bucket (P with the uncompressed tensors, then Q). Each rank's error is M - P (M^T P)^T, its own
  share of what the low rank lost.

``state.bytes_sent`` counts the payload this rank handed to collectives (after compression), and
``state.steps`` the buckets of the last bucket index seen, so bytes per step can be read; both are
payload, not wire bytes (an all-reduce of n bytes over a ring sends 2 n (N-1)/N per rank).
"""

import torch
import torch.distributed as dist

KINDS = ("none", "bf16", "fp16", "int8", "powersgd")


def parse_kind(text):
    """("bf16", 0), ("powersgd", R) ... from "bf16", "powersgd:R"; ValueError otherwise."""
    name, _, arg = text.partition(":")
    if name == "powersgd":
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError(f"compression {text!r}: powersgd needs a rank, e.g. powersgd:2")
        return name, int(arg)
    if name not in KINDS or arg:
        raise ValueError(f"compression {text!r}: expected none, bf16, fp16, int8 or powersgd:R")
    return name, 0


class CompressionState:
    """Per-rank state of compress_hook: the kind, the error of each bucket, PowerSGD's factors.

    kind: "none", "bf16", "fp16", "int8" or "powersgd:R". error_feedback: keep and re-add the
    compression error (default on). min_elements: PowerSGD leaves smaller tensors uncompressed.
    block: values per int8 scale. group: the process group (None: the default group). seed: of
    PowerSGD's first Q, the same on every rank.
    """

    def __init__(self, kind="bf16", group=None, error_feedback=True, min_elements=4096,
                 block=256, seed=0):
        self.kind, self.rank = parse_kind(kind)
        self.group = group
        self.error_feedback = error_feedback
        self.min_elements = min_elements
        self.block = block
        self.seed = seed
        self.errors = {}  # bucket index -> float32 tensor like the bucket
        self.q = {}  # (bucket index, tensor index) -> warm-started Q factor
        self.gather_16bit = None  # the backend has no 16-bit all-reduce (None: not asked)
        self.bytes_sent = 0
        self.calls = 0

    def world(self):
        return dist.get_world_size(self.group)

    def error_for(self, index, like):
        """The error buffer of bucket `index`; zero when new or when the bucket changed (DDP
        rebuilds its buckets after the first step)."""
        e = self.errors.get(index)
        if e is None or e.numel() != like.numel():
            e = torch.zeros_like(like)
            self.errors[index] = e
        return e


def compress_hook(state, bucket):
    """DDP comm hook: the bucket compressed as ``state.kind`` says (see the module's help)."""
    state.calls += 1
    if state.kind == "none":
        return _allreduce_mean(state, bucket.buffer())
    if state.kind == "powersgd":
        return _completed(_powersgd(state, bucket))
    buf = bucket.buffer().div_(state.world())
    if state.error_feedback:
        buf.add_(state.error_for(bucket.index(), buf))
    if state.kind == "int8":
        return _int8(state, bucket.index(), buf)
    return _cast(state, bucket.index(), buf, torch.bfloat16 if state.kind == "bf16" else torch.float16)


def _completed(tensor):
    fut = torch.futures.Future()
    fut.set_result(tensor)
    return fut


def _allreduce_mean(state, buf):
    state.bytes_sent += buf.numel() * buf.element_size()
    buf.div_(state.world())
    fut = dist.all_reduce(buf, group=state.group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def _allreduce_supports(group, dtype):
    """Whether the group's backend all-reduces `dtype`; a collective (the error of an
    unsupported type comes from the wait, not from the call)."""
    try:
        dist.all_reduce(torch.zeros(1, dtype=dtype), group=group, async_op=True).wait()
        return True
    except RuntimeError:
        return False


def _keep_error(state, index, buf, sent):
    """buf: what this rank meant to send; sent: what it sent (float32)."""
    if state.error_feedback:
        torch.sub(buf, sent, out=state.errors[index])


def _cast(state, index, buf, dtype):
    wire = buf.to(dtype)
    _keep_error(state, index, buf, wire.float())
    state.bytes_sent += wire.numel() * wire.element_size()
    if state.gather_16bit is None:  # first call: every rank asks the backend the same way
        state.gather_16bit = not _allreduce_supports(state.group, dtype)
    if not state.gather_16bit:
        work = dist.all_reduce(wire, group=state.group, async_op=True)
        return work.get_future().then(lambda f: buf.copy_(f.value()[0]))
    # All-gather the 16 bits as bytes (every backend moves those) and sum in float32.
    raw = wire.view(torch.uint8)
    parts = [torch.empty_like(raw) for _ in range(state.world())]
    work = dist.all_gather(parts, raw, group=state.group, async_op=True)

    def reduce(fut):
        fut.value()  # raises the collective's error, if any
        buf.zero_()
        for p in parts:  # rank order: the same sum on every rank
            buf.add_(p.view(dtype).float())
        return buf

    return work.get_future().then(reduce)


def int8_encode(buf, block=256):
    """(payload, decoded): the float32 tensor buf as int8 in blocks of `block` values with a
    float32 scale each (max |x| / 127), as bytes (the values, then the scales), and what the
    payload decodes to."""
    n = buf.numel()
    blocks = -(-n // block)
    padded = torch.zeros(blocks * block, dtype=torch.float32)
    padded[:n] = buf
    padded = padded.view(blocks, block)
    scale = padded.abs().amax(dim=1, keepdim=True) / 127.0
    scale[scale == 0] = 1.0  # an all-zero block: any scale sends zeros
    q = torch.round(padded / scale).clamp_(-127, 127).to(torch.int8)
    decoded = (q.float() * scale).view(-1)[:n]
    payload = torch.cat([q.view(-1).view(torch.uint8), scale.view(-1).view(torch.uint8)])
    return payload, decoded


def int8_decode(payload, n, block=256):
    """The n float32 values of an int8_encode payload."""
    blocks = -(-n // block)
    values = blocks * block
    q = payload[:values].view(torch.int8).view(blocks, block).float()
    scale = payload[values:].view(torch.float32).view(blocks, 1)
    return (q * scale).view(-1)[:n]


def _int8(state, index, buf):
    n = buf.numel()
    payload, decoded = int8_encode(buf, state.block)
    _keep_error(state, index, buf, decoded)
    state.bytes_sent += payload.numel()
    parts = [torch.empty_like(payload) for _ in range(state.world())]
    work = dist.all_gather(parts, payload, group=state.group, async_op=True)

    def reduce(fut):
        fut.value()  # raises the collective's error, if any
        total = torch.zeros(n, dtype=torch.float32)
        for p in parts:  # rank order
            total.add_(int8_decode(p, n, state.block))
        buf.copy_(total)
        return buf

    return work.get_future().then(reduce)


def _orthonormalise(p):
    """Gram-Schmidt on the columns of p, in place (deterministic: the same p gives the same
    result on every rank)."""
    for c in range(p.shape[1]):
        col = p[:, c]
        for k in range(c):
            col.sub_(torch.dot(col, p[:, k]) * p[:, k])
        col.div_(col.norm() + 1e-8)
    return p


def _powersgd(state, bucket):
    buf = bucket.buffer()
    world = state.world()
    index = bucket.index()
    err = state.error_for(index, buf) if state.error_feedback else None
    if err is not None:
        # M = gradient + error, per rank, on the sum (DDP's buffer holds this rank's gradient).
        buf.add_(err)
    rank = state.rank
    matrices, rest = [], []
    offset = 0
    for i, p in enumerate(bucket.parameters()):
        n = p.numel()
        view = buf[offset:offset + n]
        shape = p.shape
        rows, cols = (shape[0], n // shape[0]) if len(shape) >= 2 else (n, 1)
        if len(shape) >= 2 and n >= state.min_elements and rank < min(rows, cols):
            matrices.append((i, view.view(rows, cols)))
        else:
            rest.append(view)
        offset += n
    # First all-reduce: every P = M Q, then the uncompressed tensors, summed.
    ps, qs = [], []
    for i, m in matrices:
        q = state.q.get((index, i))
        if q is None or q.shape != (m.shape[1], rank):
            g = torch.Generator().manual_seed(state.seed * 1000003 + index * 1009 + i)
            q = _orthonormalise(torch.randn(m.shape[1], rank, generator=g))
        qs.append(q)
        ps.append(m @ q)
    flat = torch.cat([p.reshape(-1) for p in ps] + rest) if (ps or rest) else buf.new_empty(0)
    state.bytes_sent += flat.numel() * 4
    dist.all_reduce(flat, group=state.group)
    off = 0
    for k, p in enumerate(ps):
        p.copy_(flat[off:off + p.numel()].view_as(p))
        off += p.numel()
        _orthonormalise(p)
    for view in rest:
        view.copy_(flat[off:off + view.numel()]).div_(world)
        if err is not None:
            err[offset_of(buf, view):offset_of(buf, view) + view.numel()].zero_()
        off += view.numel()
    if not matrices:
        return buf
    # Second all-reduce: Q = M^T P, averaged; this rank's own Q gives its error.
    local_q = [m.t() @ p for (_, m), p in zip(matrices, ps)]
    flat_q = torch.cat([q.reshape(-1) for q in local_q])
    state.bytes_sent += flat_q.numel() * 4
    dist.all_reduce(flat_q, group=state.group)
    flat_q.div_(world)
    off = 0
    for ((i, m), p, mine) in zip(matrices, ps, local_q):
        q = flat_q[off:off + mine.numel()].view_as(mine).clone()
        off += mine.numel()
        state.q[(index, i)] = q
        if err is not None:
            e = err[offset_of(buf, m):offset_of(buf, m) + m.numel()].view_as(m)
            torch.sub(m, p @ mine.t(), out=e)
        m.copy_(p @ q.t())
    return buf


def offset_of(base, view):
    """Element offset of `view` inside the contiguous 1-D tensor `base`."""
    return (view.data_ptr() - base.data_ptr()) // base.element_size()

"""Tensor packing for chorus.async_training: flat views of parameter lists, their hashes, the
buckets and fragments they are cut into, and the compressed payloads (bf16, int8) of a flat
float32 tensor."""

import hashlib

import torch

COMPRESSIONS = ("none", "bf16", "int8")


def _flat(tensors):
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


def _unflat(flat, tensors):
    off = 0
    for t in tensors:
        n = t.numel()
        t.detach().copy_(flat[off:off + n].view_as(t))
        off += n


def state_hash(tensors):
    """64-bit hash of the tensors' bytes (the same bits give the same hash on every rank)."""
    h = hashlib.blake2b(digest_size=8)
    for t in tensors:
        h.update(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return int.from_bytes(h.digest(), "little", signed=True)


def state_hash_text(text):
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _buckets(params, bucket_bytes):
    """Contiguous groups of whole parameters of at most bucket_bytes (a larger one alone)."""
    groups, cur, size = [], [], 0
    for p in params:
        b = p.numel() * 4
        if cur and size + b > bucket_bytes:
            groups.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += b
    if cur:
        groups.append(cur)
    return groups


def _fragments(sizes, count):
    """Indices of count contiguous groups of whole tensors (of `sizes` values) of about equal
    size, each boundary at the tensor nearest its share."""
    total = sum(sizes)
    bounds, i = [0], 0
    for f in range(1, count):
        target = total * f / count
        i = max(i, bounds[-1] + 1)
        while i < len(sizes) - (count - f) and abs(sum(sizes[:i + 1]) - target) <= abs(
                sum(sizes[:i]) - target):
            i += 1
        bounds.append(i)
    bounds.append(len(sizes))
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


# Compression of a flat float32 tensor: (payload bytes as uint8, decoded float32).
def encode(kind, x, block=256):
    if kind == "bf16":
        wire = x.to(torch.bfloat16)
        return wire.view(torch.uint8), wire.float()
    if kind == "int8":
        from chorus.hooks import int8_encode

        return int8_encode(x, block)
    raise ValueError(f"compression {kind!r}: expected one of {COMPRESSIONS}")


def decode(kind, payload, n, block=256):
    if kind == "bf16":
        return payload.view(torch.bfloat16).float()
    from chorus.hooks import int8_decode

    return int8_decode(payload, n, block)

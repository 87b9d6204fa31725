"""Test inputs: what rank r holds for a given dtype and size, and the results expected from them,
computed here in int64 / float64 from the same formulas, never through the backend."""

import torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
DTYPES = FLOATS + INTS + [torch.bool]
SIZES = [0, 1, 7, 131]  # empty, one element, primes


def ints(rank, count, salt=0, dtype=torch.int64):
    """Small integers (exact in every dtype, sums of 4 fit in int8): [-20, 20], [0, 40] unsigned."""
    i = torch.arange(count, dtype=torch.int64)
    v = (i * 7 + rank * 13 + salt * 5) % 41
    if dtype == torch.bool:
        return (v % 3 == 0)
    if dtype != torch.uint8:
        v = v - 20
    return v.to(dtype)


def filled(rank, count, dtype, salt=0):
    """A tensor of `count` elements holding ints(rank, count, salt) in `dtype`."""
    return ints(rank, count, salt, dtype).clone()


def product_factors(rank, count, dtype):
    """Factors in {1, 2, -1} ({1, 2} unsigned, {True, False} bool): products of 4 stay exact."""
    i = torch.arange(count, dtype=torch.int64)
    k = (i + rank) % 3
    if dtype == torch.bool:
        return (k != 2)
    choices = torch.tensor([1, 2, 1 if dtype == torch.uint8 else -1])
    return choices[k].to(dtype)


def avg_inputs(rank, size, count, dtype):
    """v + d_r with d summing to 0 over the ranks: the exact average is v, in every dtype."""
    i = torch.arange(count, dtype=torch.int64)
    v = i % 13 + 8  # 8..20, and v + d stays within int8 / uint8 for 4 ranks
    offsets = [r + 1 for r in range(size - 1)]
    offsets.append(-sum(offsets))
    return (v + offsets[rank]).to(dtype), v.to(dtype)


def strided(like):
    """A non-contiguous tensor with the values of `like` (every other element of a larger one)."""
    big = torch.zeros(like.numel(), 2, dtype=like.dtype)
    view = big[:, 1]
    view.copy_(like)
    assert like.numel() <= 1 or not view.is_contiguous()
    return view

"""Fashion-MNIST for the DDP example: the IDX files Debian's dataset-fashion-mnist installs, or a
synthetic stand-in of the same shape for tests and machines without the data."""

import gzip
import os
import struct

import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # pixel mean and standard deviation of the training set


def _read_idx(path, magic, item_shape):
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: not found (install it with scripts/install-deps --train, or pass --data DIR "
            "or --synthetic)"
        ) from None
    dims = len(item_shape) + 1
    header = struct.unpack(f">{dims + 1}I", data[: 4 * (dims + 1)])
    if header[0] != magic or list(header[2:]) != list(item_shape):
        raise ValueError(f"{path}: not an IDX file of the expected type and shape")
    count = header[1]
    body = torch.frombuffer(bytearray(data[4 * (dims + 1) :]), dtype=torch.uint8)
    return body[: count * _prod(item_shape)].reshape(count, *item_shape)


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def load(split, data_dir=DEFAULT_DIR):
    """(images [N,1,28,28] float normalised, labels [N] int64) of split "train" or "t10k"."""
    images = _read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), 0x803, (28, 28))
    labels = _read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), 0x801, ())
    if len(images) != len(labels):
        raise ValueError(f"{data_dir}: {split} has {len(images)} images but {len(labels)} labels")
    x = (images.float().div_(255.0) - MEAN) / STD
    return x.unsqueeze(1), labels.long()


def synthetic(split, count, seed=0):
    """A learnable stand-in: labels from a fixed random linear map of the images, so that the
    accuracy rises above chance within a few steps. Same data on every rank for a given seed."""
    teacher = torch.Generator().manual_seed(seed)
    weights = torch.randn(28 * 28, 10, generator=teacher)
    g = torch.Generator().manual_seed(seed * 2 + (1 if split == "train" else 2))
    x = torch.randn(count, 1, 28, 28, generator=g)
    return x, (x.flatten(1) @ weights).argmax(dim=1)


def shard(count, rank, world, epoch, seed):
    """This rank's sample indices for an epoch: one shuffle shared by every rank, dealt out
    round-robin and cut to a length every rank has, so that all ranks take the same steps."""
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed * 1000 + epoch))
    per_rank = count // world
    return order[rank : per_rank * world : world]

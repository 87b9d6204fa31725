"""Fashion-MNIST for the DDP example: the IDX files Debian's dataset-fashion-mnist installs, or a
synthetic stand-in of the same shape for tests and machines without the data."""

import gzip
import os
import struct
import sys

import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # pixel mean and standard deviation of the training set


def _read_idx(path, magic, item_shape):
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise _missing(path) from None
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


def load(split, data_dir=DEFAULT_DIR, cache_dir=None):
    """(images [N,1,28,28] float normalised, labels [N] int64) of split "train" or "t10k".

    cache_dir: keeps the decoded tensors there, one file per split and version of the source
    files, and maps that file on later loads: a process started again (a replacement) spends no
    CPU decoding, and the pages are shared among the processes of the machine."""
    paths = [os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"),
             os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz")]
    cache = _cache_path(split, paths, cache_dir) if cache_dir else None
    if cache and os.path.exists(cache):
        try:
            try:
                saved = torch.load(cache, mmap=True, weights_only=True)
            except TypeError:  # a torch without mmap loading
                saved = torch.load(cache)
            return saved["x"], saved["y"]
        except Exception as e:  # noqa: BLE001  a damaged cache is rebuilt, not trusted
            print(f"fashion_mnist: {cache}: unreadable ({e}); decoding the data again",
                  file=sys.stderr)
    images = _read_idx(paths[0], 0x803, (28, 28))
    labels = _read_idx(paths[1], 0x801, ())
    if len(images) != len(labels):
        raise ValueError(f"{data_dir}: {split} has {len(images)} images but {len(labels)} labels")
    x = (images.float().div_(255.0) - MEAN) / STD
    x, y = x.unsqueeze(1), labels.long()
    if cache:
        os.makedirs(cache_dir, exist_ok=True)
        partial = f"{cache}.{os.getpid()}.tmp"  # processes loading at once each write their own
        torch.save({"x": x, "y": y}, partial)
        os.replace(partial, cache)
    return x, y


def _cache_path(split, paths, cache_dir):
    """The cache file's name carries the size and modification time of both source files."""
    stamp = "-".join(f"{st.st_size}-{st.st_mtime_ns}" for st in map(_stat, paths))
    return os.path.join(cache_dir, f"fashion-mnist-{split}-{stamp}.pt")


def _stat(path):
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise _missing(path) from None


def _missing(path):
    return FileNotFoundError(f"{path}: not found (install it with scripts/install-deps --train, "
                             "or pass --data DIR or --synthetic)")


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

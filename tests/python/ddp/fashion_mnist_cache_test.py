"""examples/torch/fashion_mnist.py's cache (load(..., cache_dir)): the tensors it maps are the
ones decoding gives; a damaged cache file is said and rebuilt; a changed source file gets a cache
file of its own. On small IDX files written here, so that it runs without the dataset."""

import gzip
import io
import os
import struct
import sys
import tempfile
from contextlib import redirect_stderr

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "torch"))
import fashion_mnist  # noqa: E402


def write_idx(path, magic, dims, data):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(f">{len(dims) + 1}I", magic, *dims) + bytes(data))


def write_split(folder, split, count, seed):
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (count * 28 * 28,), generator=g, dtype=torch.uint8)
    labels = torch.randint(0, 10, (count,), generator=g, dtype=torch.uint8)
    write_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz"), 0x803, (count, 28, 28),
              pixels.tolist())
    write_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz"), 0x801, (count,),
              labels.tolist())


def same(a, b):
    return all(torch.equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        data, cache = os.path.join(tmp, "data"), os.path.join(tmp, "cache")
        os.makedirs(data)
        write_split(data, "train", 37, 1)  # a prime count
        plain = fashion_mnist.load("train", data)
        assert plain[0].shape == (37, 1, 28, 28) and plain[1].dtype == torch.int64
        first = fashion_mnist.load("train", data, cache)  # decodes, writes the cache
        files = os.listdir(cache)
        assert len(files) == 1 and files[0].endswith(".pt"), files
        again = fashion_mnist.load("train", data, cache)  # maps the cache
        assert same(plain, first) and same(plain, again), "cached tensors differ from decoding"

        with open(os.path.join(cache, files[0]), "wb") as f:
            f.write(b"not a tensor file")
        said = io.StringIO()
        with redirect_stderr(said):
            rebuilt = fashion_mnist.load("train", data, cache)
        assert "unreadable" in said.getvalue() and "decoding the data again" in said.getvalue(), \
            said.getvalue()
        assert same(plain, rebuilt)
        assert same(plain, fashion_mnist.load("train", data, cache)), "rebuilt cache differs"

        write_split(data, "train", 41, 2)  # new source files: the old cache must not be used
        changed = fashion_mnist.load("train", data, cache)
        assert changed[0].shape == (41, 1, 28, 28), changed[0].shape
        assert same(fashion_mnist.load("train", data), changed)
        assert len(os.listdir(cache)) == 2, os.listdir(cache)

        try:
            fashion_mnist.load("t10k", data, cache)
        except FileNotFoundError as e:
            assert "t10k-images-idx3-ubyte.gz: not found" in str(e), e
        else:
            raise AssertionError("a missing split loaded")
    print("fashion_mnist cache: ok")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""ddp_train: chorus-train's Fashion-MNIST training with PyTorch DistributedDataParallel (gloo).

The PyTorch side of bench/compare/train_compare.sh. Same models as trainer/main.cc (MLP
784-512-256-10; CNN conv5x5 1->16 pad 2, ReLU, maxpool 2, conv5x5 16->32 pad 2, ReLU, maxpool 2,
1568-128-10), same normalisation (mean 0.2860, std 0.3530), same per-rank batch, optimizer
(adam, or sgd with --momentum), lr, epochs, --limit (first N training samples), the same test
evaluation (rank r evaluates test images r, r+N, ..., counts summed). Initialisation and the
shuffle differ (PyTorch's default init with torch.manual_seed(seed); a numpy permutation seeded by
seed and epoch, padded and strided over the ranks like DistributedSampler / chorus-train's
shardIndices), so the accuracies agree statistically, not bit for bit.

Run with Debian's /usr/bin/python3 (python3-torch 1.13; torchvision is not needed):

  chorus-run -n 2 -- env DDP_STORE_DIR=/tmp/d /usr/bin/python3 ddp_train.py --limit 16384
  scripts/cluster run-each 2 -- env DDP_STORE_DIR=/tmp/d /usr/bin/python3 ddp_train.py --model cnn

Ranks: --rank/--size, else CHORUS_RANK/CHORUS_WORLD_SIZE (chorus-run), else
CLUSTER_RANK/CLUSTER_SIZE (scripts/cluster run-each). Rendezvous: init_method file://DIR/store with
DIR = --store-dir or $DDP_STORE_DIR (a fresh directory on a filesystem all ranks share). Network:
$GLOO_SOCKET_IFNAME, set here to $CLUSTER_IFNAME (run-each) or "lo" when unset.

Compression (bench/compress/): --hook none | fp16 | bf16 | powersgd:R (torch's own DDP comm
hooks: default_hooks.fp16/bf16_compress_hook, powerSGD_hook with error feedback and warm start
from step 2) | chorus:KIND (chorus.hooks.compress_hook, KIND = bf16, fp16, int8 or powersgd:R;
needs the chorus package on PYTHONPATH). --eval-every K evaluates the test set every K steps and
--metrics writes chorus-train's CSV columns (step, epoch, loss, test_accuracy, bytes_sent, wall_s,
train_s; train_s leaves the evaluations out), so bench/compress reads both the same way.
bytes_sent per step is the interface's transmitted bytes (/sys/class/net/IF/statistics/tx_bytes,
headers included) over the steps, when $CLUSTER_IFNAME names the interface; else empty.

Timing (what train_compare.sh compares with chorus-train's metrics CSV):
  * step_ms: per optimizer step, forward + backward of the DDP model, which in DDP includes
    waiting for the gradient all-reduces (the reducer waits for its buckets at the end of
    backward). Batch preparation and optimizer.step() are outside, as in chorus-train's
    compute_s + exposed_comm_s (beginStep .. waitGradients returned). Mean over the steps after
    the first --skip (default 5) steps, rank 0.
  * exposed_comm_ms: step_ms minus local_step_ms, where local_step_ms is the same forward +
    backward measured on a plain copy of the module (no DDP, no communication) on the same
    shard's batches, run by all ranks at the same time after training (--local-steps steps, 0:
    as many as training had), so the CPU load of the other ranks is the same. This is "time DDP
    adds to a step", which can include compute slowed by Gloo's threads, not only waiting.
  * epoch_ms_per_step: wall time of the training epochs / steps (everything, first steps too,
    data and optimizer included; the test evaluation after each epoch is not counted, as in
    chorus-train's "epoch N: ... s").
"""
import argparse
import datetime
import gzip
import json
import os
import socket
import sys
import time

import numpy as np

from torch_bench import env_int  # same launch variables as the collective benchmark

MEAN, STD = 0.2860, 0.3530


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="batch size per rank")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="adam")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    p.add_argument("--limit", type=int, default=0, help="first N training samples (0: all)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: cores / local ranks)")
    p.add_argument("--skip", type=int, default=5, help="first steps left out of the means")
    p.add_argument("--local-steps", type=int, default=0,
                   help="steps of the no-DDP baseline (0: as many as training)")
    p.add_argument("--json", default="")
    p.add_argument("--hook", default="none",
                   help="none, fp16, bf16, powersgd:R (torch's hooks) or chorus:KIND")
    p.add_argument("--eval-every", type=int, default=0, help="test accuracy every K steps")
    p.add_argument("--target-accuracy", type=float, default=0.0,
                   help="stop once the test accuracy reaches this (needs --eval-every)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps")
    p.add_argument("--metrics", default="", help="per-step CSV (rank 0)")
    p.add_argument("--store-dir", default="")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--size", type=int, default=-1)
    a = p.parse_args()
    if a.rank < 0:
        a.rank = env_int("CHORUS_RANK", "CLUSTER_RANK")
    if a.size < 0:
        a.size = env_int("CHORUS_WORLD_SIZE", "CLUSTER_SIZE")
    if a.rank < 0 or a.size < 1 or a.rank >= a.size:
        p.error("no rank/size: pass --rank/--size or run under chorus-run or scripts/cluster run-each")
    a.store_dir = a.store_dir or os.environ.get("DDP_STORE_DIR", "")
    if not a.store_dir:
        p.error("no --store-dir or DDP_STORE_DIR")
    return a


def read_idx(path, magic, item_dims, limit=0):
    with gzip.open(path, "rb") as f:
        data = f.read()
    hdr = np.frombuffer(data, dtype=">u4", count=2 + len(item_dims))
    if hdr[0] != magic or list(hdr[2:]) != list(item_dims):
        raise SystemExit(f"{path}: not an IDX file of the expected type/shape")
    n = int(hdr[1])
    if limit:
        n = min(n, limit)
    item = int(np.prod(item_dims)) if item_dims else 1
    off = 4 * (2 + len(item_dims))
    return np.frombuffer(data, dtype=np.uint8, count=n * item, offset=off).reshape((n,) + tuple(item_dims))


def load(d, prefix, limit=0):
    x = read_idx(f"{d}/{prefix}-images-idx3-ubyte.gz", 0x803, (28, 28), limit)
    y = read_idx(f"{d}/{prefix}-labels-idx1-ubyte.gz", 0x801, (), limit)
    if len(x) != len(y):
        raise SystemExit(f"{d}: {prefix}: {len(x)} images but {len(y)} labels")
    x = ((x.astype(np.float32) / 255.0 - MEAN) / STD).reshape(-1, 1, 28, 28)
    return x, y.astype(np.int64)


def shard(n, rank, ranks, seed, epoch):
    """DistributedSampler-like: shuffled from (seed, epoch), padded to a multiple of ranks."""
    order = np.random.default_rng(seed * 1000003 + epoch).permutation(n)
    total = (n + ranks - 1) // ranks * ranks
    return order[np.arange(rank, total, ranks) % n]


def tx_bytes():
    """Bytes this host's cluster interface sent so far (None outside scripts/cluster)."""
    ifname = os.environ.get("CLUSTER_IFNAME")
    try:
        with open(f"/sys/class/net/{ifname}/statistics/tx_bytes") as f:
            return int(f.read())
    except (OSError, ValueError, TypeError):
        return None


def register_hook(ddp, spec):
    """Registers the --hook on the DDP model; returns the hook's state (None: no hook)."""
    if spec == "none":
        return None
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    if spec.startswith("chorus:"):
        from chorus import hooks
        state = hooks.CompressionState(spec.split(":", 1)[1])
        ddp.register_comm_hook(state, hooks.compress_hook)
        return state
    if spec in ("fp16", "bf16"):
        ddp.register_comm_hook(None, getattr(default_hooks, f"{spec}_compress_hook"))
        return None
    if spec.startswith("powersgd:"):
        state = powersgd.PowerSGDState(process_group=None,
                                       matrix_approximation_rank=int(spec.split(":")[1]),
                                       start_powerSGD_iter=2, use_error_feedback=True,
                                       warm_start=True)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
        return state
    raise SystemExit(f"--hook {spec}: expected none, fp16, bf16, powersgd:R or chorus:KIND")


def make_model(nn, name):
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                         nn.ReLU(), nn.Linear(256, 10))


def make_optimizer(torch, cfg, params):
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    return torch.optim.Adam(params, lr=cfg.lr)


def start(cfg, torch, dist):
    """Torch's threads, seed and denormals, then the gloo process group; returns the threads."""
    threads = cfg.threads
    if threads == 0:
        local = max(1, env_int("CHORUS_LOCAL_SIZE", "CLUSTER_LOCAL_SIZE"))
        threads = max(1, (os.cpu_count() or 1) // local)
    torch.set_num_threads(threads)
    torch.manual_seed(cfg.seed)
    torch.set_flush_denormal(True)  # as chorus-train (Adam's second moments)

    os.makedirs(cfg.store_dir, exist_ok=True)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(cfg.store_dir, "store"),
                            rank=cfg.rank, world_size=cfg.size,
                            timeout=datetime.timedelta(seconds=600))
    return threads


class Data:
    """This rank's shard of the training set in batches, and the test accuracy of all ranks."""

    def __init__(self, cfg, torch):
        self.cfg, self.torch = cfg, torch
        self.xtr, self.ytr = load(cfg.data, "train", cfg.limit)
        self.xte, self.yte = load(cfg.data, "t10k")
        self.xtr_t, self.ytr_t = torch.from_numpy(self.xtr), torch.from_numpy(self.ytr)

    def batches(self, epoch):
        cfg, torch = self.cfg, self.torch
        idx = torch.from_numpy(shard(len(self.xtr), cfg.rank, cfg.size, cfg.seed, epoch))
        for b in range(0, len(idx), cfg.batch):
            i = idx[b:b + cfg.batch]
            yield self.xtr_t.index_select(0, i), self.ytr_t.index_select(0, i)

    def evaluate(self, m):
        """Rank r evaluates test images r, r+N, ...; the counts summed over the ranks."""
        torch, xte, yte = self.torch, self.xte, self.yte
        m.eval()
        correct = seen = 0
        with torch.no_grad():
            ids = np.arange(self.cfg.rank, len(xte), self.cfg.size)
            for b in range(0, len(ids), 500):
                i = ids[b:b + 500]
                pred = m(torch.from_numpy(xte[i])).argmax(1)
                correct += int((pred == torch.from_numpy(yte[i])).sum())
                seen += len(i)
        m.train()
        c = torch.tensor([correct, seen], dtype=torch.int64)
        torch.distributed.all_reduce(c)
        return int(c[0]) / max(int(c[1]), 1)


class Training:
    """The DDP training loop: the epochs and steps, the evaluations, what they measure, and
    when to stop (--target-accuracy, --max-steps). Rank 0 prints the progress."""

    def __init__(self, cfg, torch, data, ddp, model, opt):
        self.cfg, self.torch, self.data = cfg, torch, data
        self.ddp, self.model, self.opt = ddp, model, opt
        self.step_times, self.opt_times, self.losses = [], [], []
        self.acc = 0.0
        self.train_s = 0.0
        self.rows = []  # (step, epoch, loss, test_accuracy or None, wall_s, train_s)
        self.eval_s = 0.0
        self.reached = None
        self.stop = False
        self.t_start = None

    def run(self):
        self.t_start = time.perf_counter()
        for epoch in range(1, self.cfg.epochs + 1):
            self.epoch(epoch)
            if self.stop:
                break

    def epoch(self, epoch):
        cfg = self.cfg
        t_ep = time.perf_counter()
        ep_eval = 0.0
        for x, y in self.data.batches(epoch):
            ep_eval += self.step(x, y, epoch)
            if self.stop:
                break
        ep_s = time.perf_counter() - t_ep - ep_eval  # as chorus-train: evaluations not counted
        self.train_s += ep_s
        rows = self.rows
        if rows and rows[-1][3] is not None:
            self.acc = rows[-1][3]
        else:
            self.acc = self.data.evaluate(self.model)
            if rows:
                rows[-1][3] = self.acc
        if cfg.rank == 0:
            print(f"epoch {epoch}: train loss "
                  f"{np.mean(self.losses[-len(self.step_times):]):.4f} (rank 0), "
                  f"{ep_s:.1f} s, test accuracy {100 * self.acc:.2f}%", flush=True)

    def step(self, x, y, epoch):
        """One optimizer step (and the evaluation that falls on it); returns the seconds spent
        evaluating."""
        cfg, F = self.cfg, self.torch.nn.functional
        t0 = time.perf_counter()
        loss = F.cross_entropy(self.ddp(x), y)
        loss.backward()  # returns after DDP's all-reduces are done
        self.step_times.append(time.perf_counter() - t0)
        self.losses.append(loss.item())
        t1 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        self.opt_times.append(time.perf_counter() - t1)
        step = len(self.step_times)
        wall = time.perf_counter() - self.t_start
        self.rows.append([step, epoch, self.losses[-1], None, wall, wall - self.eval_s])
        took = 0.0
        if cfg.eval_every and step % cfg.eval_every == 0:
            took = self.evaluate_at(step)
        if cfg.max_steps and step >= cfg.max_steps:
            self.stop = True
        return took

    def evaluate_at(self, step):
        """The test accuracy after this step, checked against --target-accuracy; returns the
        seconds it took."""
        cfg, row = self.cfg, self.rows[-1]
        t_e = time.perf_counter()
        self.acc = self.data.evaluate(self.model)
        took = time.perf_counter() - t_e
        self.eval_s += took
        row[3] = self.acc
        if cfg.rank == 0:
            print(f"step {step}: test accuracy {100 * self.acc:.2f}% after {row[5]:.1f} s "
                  "of training", flush=True)
        if cfg.target_accuracy and self.acc >= cfg.target_accuracy and self.reached is None:
            self.reached = row[5]
            if cfg.rank == 0:
                print(f"target accuracy {100 * cfg.target_accuracy:.2f}% reached at step "
                      f"{step} after {self.reached:.2f} s of training", flush=True)
            self.stop = True
        return took


def write_metrics(path, rows, sent_per_step):
    with open(path, "w") as f:
        f.write("step,epoch,loss,test_accuracy,bytes_sent,wall_s,train_s\n")
        for st, ep, lo, ac, wall, tr in rows:
            sent = "" if sent_per_step is None else f"{sent_per_step:.0f}"
            f.write(f"{st},{ep},{lo},{'' if ac is None else ac},{sent},{wall},{tr}\n")


def local_baseline(cfg, torch, data, model, steps):
    """Step times without DDP: a plain copy of the module on the same shard's batches, all ranks
    at once (same CPU load). Its parameters are updated too, so the work per step is the same."""
    F, dist = torch.nn.functional, torch.distributed
    local = make_model(torch.nn, cfg.model)
    local.load_state_dict(model.state_dict())
    lopt = make_optimizer(torch, cfg, local.parameters())
    want = cfg.local_steps or steps
    local_times = []
    dist.barrier()
    while len(local_times) < want:
        for x, y in data.batches(cfg.epochs + 1 + len(local_times)):
            t0 = time.perf_counter()
            F.cross_entropy(local(x), y).backward()
            local_times.append(time.perf_counter() - t0)
            lopt.step()
            lopt.zero_grad(set_to_none=False)
            if len(local_times) >= want:
                break
    dist.barrier()
    return local_times


def parameters_identical(torch, model):
    """Whether every rank holds the same parameters, bit for bit."""
    dist = torch.distributed
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    return bool(torch.equal(lo, hi))


def results(cfg, torch, threads, tr, local_times, sent_per_step, hook_state, identical):
    """The --json record (and what rank 0 prints at the end)."""
    steps = len(tr.step_times)
    skip = min(cfg.skip, max(steps - 1, 0))
    step_ms = 1e3 * float(np.mean(tr.step_times[skip:]))
    local_ms = 1e3 * float(np.mean(local_times[min(cfg.skip, len(local_times) - 1):]))
    return {"system": "pytorch-ddp-gloo", "world_size": cfg.size, "model": cfg.model,
            "optimizer": cfg.optimizer, "lr": cfg.lr, "batch": cfg.batch, "epochs": cfg.epochs,
            "limit": cfg.limit, "threads": threads, "steps": steps, "skip": skip,
            "step_ms": step_ms, "local_step_ms": local_ms,
            "exposed_comm_ms": step_ms - local_ms,
            "epoch_ms_per_step": 1e3 * tr.train_s / max(steps, 1),
            "test_accuracy": tr.acc, "hook": cfg.hook,
            "bytes_sent_per_step": sent_per_step, "target_reached_s": tr.reached,
            "hook_bytes_per_step": (hook_state.bytes_sent / max(steps, 1)
                                    if hasattr(hook_state, "bytes_sent") else None),
            "opt_ms": 1e3 * float(np.mean(tr.opt_times[skip:])),
            "step_times_ms": [round(1e3 * t, 3) for t in tr.step_times],
            "local_times_ms": [round(1e3 * t, 3) for t in local_times], "identical": identical,
            "host": socket.gethostname(),
            "torch": torch.__version__, "ifname": os.environ["GLOO_SOCKET_IFNAME"],
            "definition": "step = forward+backward incl. DDP's all-reduce wait (no batch prep, "
                          "no optimizer step), mean after `skip` steps, rank 0; exposed = step - "
                          "same step without DDP on a local copy"}


def print_summary(cfg, tr, res):
    step_ms, local_ms = res["step_ms"], res["local_step_ms"]
    sent_per_step = res["bytes_sent_per_step"]
    print(f"final test accuracy {100 * tr.acc:.2f}%, {tr.train_s:.1f} s training, hook {cfg.hook}")
    if sent_per_step is not None:
        print(f"bytes sent per rank per step: {sent_per_step:.0f} (interface "
              f"{os.environ.get('CLUSTER_IFNAME')}, rank 0)")
    print(f"step {step_ms:.2f} ms (fwd+bwd+allreduce, mean of steps {res['skip'] + 1}.."
          f"{res['steps']}), without DDP {local_ms:.2f} ms, exposed comm "
          f"{step_ms - local_ms:.2f} ms/step")
    print("parameters identical on all %d ranks" % cfg.size if res["identical"] else
          "parameters DIFFER between ranks")


def main():
    cfg = parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("CLUSTER_IFNAME") or "lo")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    threads = start(cfg, torch, dist)
    data = Data(cfg, torch)
    model = make_model(torch.nn, cfg.model)
    ddp = DDP(model, bucket_cap_mb=cfg.bucket_mb)  # broadcasts rank 0's parameters
    hook_state = register_hook(ddp, cfg.hook)
    opt = make_optimizer(torch, cfg, ddp.parameters())
    nparams = sum(p.numel() for p in model.parameters())
    if cfg.rank == 0:
        print(f"ddp_train: {cfg.size} ranks, {cfg.model} ({nparams} parameters), {cfg.optimizer} "
              f"lr {cfg.lr}, batch {cfg.batch} per rank, {len(data.xtr)} training samples, "
              f"{threads} thread(s) per rank, torch {torch.__version__} gloo "
              f"({os.environ['GLOO_SOCKET_IFNAME']})", flush=True)

    tx0 = tx_bytes()
    tr = Training(cfg, torch, data, ddp, model, opt)
    tr.run()
    steps = len(tr.step_times)
    tx1 = tx_bytes()
    sent_per_step = (tx1 - tx0) / max(steps, 1) if tx0 is not None and tx1 is not None else None
    if cfg.rank == 0 and cfg.metrics:
        write_metrics(cfg.metrics, tr.rows, sent_per_step)

    local_times = local_baseline(cfg, torch, data, model, steps)
    identical = parameters_identical(torch, model)
    res = results(cfg, torch, threads, tr, local_times, sent_per_step, hook_state, identical)
    if cfg.rank == 0:
        print_summary(cfg, tr, res)
        if cfg.json:
            with open(cfg.json, "w") as f:
                json.dump(res, f, indent=2)
                f.write("\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if identical else 3


if __name__ == "__main__":
    sys.exit(main())

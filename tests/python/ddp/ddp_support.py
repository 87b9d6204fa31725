"""What the DDP cases share: the process groups, a tiny model, per-rank data, and the
reference that the cases compare DDP against, computed in one process without any backend."""

import datetime

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import chorus.torch  # noqa: F401  registers the backend "chorus"

IN, HIDDEN, OUT = 12, 16, 4
GROUP_TIMEOUT = datetime.timedelta(seconds=30)


class Net(nn.Module):
    """Two layers, plus heads that only some ranks or steps use (find_unused_parameters)."""

    def __init__(self, activation=nn.ReLU):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(IN, HIDDEN), activation())
        self.head = nn.Linear(HIDDEN, OUT)
        self.alt_head = nn.Linear(HIDDEN, OUT)
        self.never_used = nn.Linear(HIDDEN, OUT)

    def forward(self, x, use_alt=False):
        h = self.body(x)
        return self.alt_head(h) if use_alt else self.head(h)


def new_net(extra_heads=False, **kwargs):
    """Without extra_heads, the heads no rank uses are frozen, as DDP requires then."""
    torch.manual_seed(1234)  # the same start on every rank and in the reference
    net = Net(**kwargs)
    if not extra_heads:
        net.alt_head.requires_grad_(False)
        net.never_used.requires_grad_(False)
    return net


def batch(rank, step, size=8):
    """Rank `rank`'s batch of step `step`; any rank can compute any other rank's."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(size, IN, generator=g), torch.randint(0, OUT, (size,), generator=g)


def loss_of(model, rank, step, use_alt=False, size=8):
    x, y = batch(rank, step, size)
    return F.cross_entropy(model(x, use_alt=use_alt), y)


def init():
    """The default group is chorus; a gloo group on the same ranks checks it independently."""
    dist.init_process_group("chorus", timeout=GROUP_TIMEOUT)
    assert dist.get_backend() == "chorus", dist.get_backend()
    gloo = dist.new_group(backend="gloo", timeout=GROUP_TIMEOUT)
    return dist.get_rank(), dist.get_world_size(), gloo


def reference_step(model, opt, losses):
    """One step of the model on the mean of the ranks' losses: the gradient DDP averages."""
    opt.zero_grad(set_to_none=True)
    (sum(losses) / len(losses)).backward()
    opt.step()


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def assert_identical_on_all_ranks(model, gloo, what):
    """Every rank's parameters equal rank 0's bit for bit (checked over gloo, not chorus)."""
    mine = flat_parameters(model)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine, group=gloo)
    for r, theirs in enumerate(gathered):
        assert torch.equal(theirs, gathered[0]), f"{what}: rank {r}'s parameters differ from rank 0"


def assert_close(model, reference, what, rtol=1e-5, atol=1e-6):
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if not torch.allclose(p, q, rtol=rtol, atol=atol):
            diff = (p - q).abs().max().item()
            raise AssertionError(f"{what}: {name} differs from the reference by up to {diff:g}")


def report(case):
    print(f"rank {dist.get_rank()}: {case} ok", flush=True)

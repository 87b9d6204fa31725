"""chorus.async_training's wrappers against a one-process reference of the same arithmetic.

    launch.py -n N -- check_async.py modes|compress|misuse|checkpoint [--backend chorus|gloo]

Every rank trains a small MLP on its own data (drawn from a seed of (step, rank)) through a
wrapper, and also computes, in this one process, what every rank would do: N replicas (one when
they stay identical), each rank's gradients, and the averages, deltas, compression, outer steps
and divergence figures written out with plain tensor operations (the outer step with the same
torch.optim.SGD(nesterov=True), itself checked against the formula within 1e-6, since its kernel
may fuse multiply-adds). Its own parameters must equal its replica in the reference.

Tolerances: on 2 ranks a sum of two addends is the same in any order, so every mode must be
bit-identical to the reference (compressed deltas are summed by the wrapper in rank order, as in
the reference). On more ranks the backend's all-reduce may add the addends in another order (a
few float32 ulps per sum, 2^-23 relative), carried over at most a dozen steps of lr <= 0.1 (outer
lr 0.7) on values of size 1: atol 1e-5. The divergence figures are computed in float64 from
float32 parameters whose mean may differ in the last bit: rtol 1e-4.

* modes: DelayedUpdates, LocalSGD (H = 3) and DiLoCo (H = 4, plain, in 2 fragments, overlapped),
  each with the divergence measured every 2 steps, then synchronize() and every rank's hash
  compared; LocalSGD past a divergence bound syncs at once and says so; a check on a step that
  synchronises sends no more than two scalar all-reduces.
* compress: DiLoCo with bf16 and int8 deltas and error feedback (bf16 in 4 overlapped fragments).
* misuse: H = 0 everywhere, H = 0 on the last rank only, H different on one rank: the same
  ValueError on every rank; state_dict round trips (torch.save) of DiLoCo (int8; also with a
  fragment in flight) and DelayedUpdates against an uninterrupted run; on 4 ranks, a group
  without global rank 0.
* checkpoint: the same round trips through torch.distributed.checkpoint
  (at.save_checkpoint / at.load_checkpoint: one directory, every rank's own state), for DiLoCo
  (int8, 2 fragments, overlapped, H = 3: saved at step 4, after an outer step, with error
  feedback and fragment 1's delta in flight), LocalSGD between averages (the replicas differ) and DelayedUpdates: the parameters,
  the anchor and the outer momentum bit for bit those of the uninterrupted run.
"""

import argparse
import datetime
import io
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import chorus.torch  # noqa: F401  registers "chorus"
import rank_harness as h
from chorus import async_training as at
from chorus.hooks import int8_encode

rank, size = h.rank_and_size()
STEPS = 12
LR = 0.1


def make_model():
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def batch(step, r):
    g = torch.Generator().manual_seed(1000 * step + r)
    return torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)


def grads(model, step, r):
    model.zero_grad()
    x, y = batch(step, r)
    F.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def tol():
    return {} if size == 2 else {"atol": 1e-5}


def train(wrapper, model, opt, steps, first=1):
    for t in range(first, first + steps):
        opt.zero_grad()
        x, y = batch(t, rank)
        F.cross_entropy(model(x), y).backward()
        wrapper.step()


# --- the reference's pieces -------------------------------------------------------------------
def mean_of(tensors):
    total = tensors[0].clone()
    for t in tensors[1:]:
        total += t
    return total / len(tensors)


def divergence(replicas):
    ps = [flat(m).double() for m in replicas]
    mean = mean_of([flat(m) for m in replicas]).double()
    dists = [float((p - mean).norm()) for p in ps]
    norm = float(mean.norm())
    return (max(dists) / norm, (sum(d * d for d in dists) / len(ps)) ** 0.5 / norm,
            2 * max(float((p - mean).abs().max()) for p in ps))


def check_history(history, want, what):
    h.expect([d.step for d in history] == [s for s, _ in want],
             f"{what}: divergence steps {[d.step for d in history]}, want {[s for s, _ in want]}")
    for d, (s, (mx, rms, elem)) in zip(history, want):
        got = torch.tensor([d.max, d.rms, d.elementwise], dtype=torch.float64)
        h.expect_equal(got, torch.tensor([mx, rms, elem], dtype=torch.float64),
                       f"{what}: divergence at step {s}", atol=1e-9, rtol=1e-4)


def end_identical(wrapper, what):
    digest = wrapper.synchronize()
    hashes = [None] * size
    dist.all_gather_object(hashes, digest)
    h.expect(len(set(hashes)) == 1, f"{what}: hashes after synchronize() differ: {hashes}")
    h.expect(digest == at.state_hash(list(wrapper.model.parameters())), f"{what}: hash")


# --- modes ----------------------------------------------------------------------------------
def delayed():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    w = at.DelayedUpdates(model, opt, check_every=2)
    train(w, model, opt, STEPS)
    ref = make_model()
    ropt = torch.optim.SGD(ref.parameters(), lr=LR, momentum=0.9)
    previous = None
    for t in range(1, STEPS + 1):
        now = [mean_of(gs) for gs in zip(*[grads(ref, t, r) for r in range(size)])]
        if previous is not None:
            for p, g in zip(ref.parameters(), previous):
                p.grad = g
            ropt.step()
        previous = now
    h.expect_equal(flat(model), flat(ref), "delayed: parameters after 12 steps", **tol())
    h.expect(all(d.max == 0 and d.elementwise == 0 for d in w.history),
             f"delayed: the replicas drifted: {w.history}")
    end_identical(w, "delayed")


def local_sgd():
    H = 3
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    w = at.LocalSGD(model, opt, sync_every=H, check_every=2)
    train(w, model, opt, STEPS)
    reps = [make_model() for _ in range(size)]
    opts = [torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9) for m in reps]
    want = []
    for t in range(1, STEPS + 1):
        for r in range(size):
            for p, g in zip(reps[r].parameters(), grads(reps[r], t, r)):
                p.grad = g
            opts[r].step()
        if t % 2 == 0:
            want.append((t, divergence(reps)))
        if t % H == 0:
            with torch.no_grad():
                for ps in zip(*[m.parameters() for m in reps]):
                    avg = mean_of([p.detach() for p in ps])
                    for p in ps:
                        p.copy_(avg)
    h.expect_equal(flat(model), flat(reps[rank]), "localsgd: parameters after 12 steps", **tol())
    check_history(w.history, want, "localsgd")
    h.expect(w.history[0].max > 0, "localsgd: no divergence measured between averagings")
    end_identical(w, "localsgd")


def local_sgd_bound():
    """Past the bound the wrapper averages at once and says so."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    lines = []
    w = at.LocalSGD(model, opt, sync_every=100, check_every=2, divergence_limit=1e-9,
                    log=lines.append)
    train(w, model, opt, 4)
    reps = [make_model() for _ in range(size)]
    opts = [torch.optim.SGD(m.parameters(), lr=LR) for m in reps]
    for t in range(1, 5):
        for r in range(size):
            for p, g in zip(reps[r].parameters(), grads(reps[r], t, r)):
                p.grad = g
            opts[r].step()
        with torch.no_grad():
            if t % 2 == 0:
                for ps in zip(*[m.parameters() for m in reps]):
                    avg = mean_of([p.detach() for p in ps])
                    for p in ps:
                        p.copy_(avg)
    h.expect_equal(flat(model), flat(reps[rank]), "bound: parameters", **tol())
    h.expect([d.forced_sync for d in w.history] == [True, True], f"bound: {w.history}")
    said = [line for line in lines if "above the bound" in line and "synchronising now" in line]
    h.expect(len(said) == 2, f"bound: the forced syncs were not logged: {lines}")


def check_bytes():
    """A divergence check on a step that synchronises costs two scalar all-reduces, not a
    model-sized one: 2 syncs of 6 (LocalSGD H = 3) or 8 (DiLoCo H = 4) steps, checked at each."""
    def ring(n):
        return 2 * n * (size - 1) // size

    model_bytes = 4 * sum(p.numel() for p in make_model().parameters())
    want = 2 * (ring(model_bytes) + ring(16) + ring(8))
    for make, steps in ((lambda m, o: at.LocalSGD(m, o, sync_every=3, check_every=3), 6),
                        (lambda m, o: at.DiLoCo(m, o, sync_every=4, check_every=4), 8)):
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        w = make(model, opt)
        train(w, model, opt, steps)
        h.expect(w.bytes_sent == want and len(w.history) == 2,
                 f"{w.mode}: {w.bytes_sent} bytes sent and {len(w.history)} checks, want {want} "
                 "and 2")


def diloco_reference(H, fragments, compress, steps=STEPS, check_every=0, overlap=False):
    """What DiLoCo does on every rank: replicas with Adam, an anchor, Nesterov outer steps;
    with overlap, each fragment's mean delta applied one inner step after its launch."""
    reps = [make_model() for _ in range(size)]
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in reps]
    anchor = [p.detach().clone() for p in reps[0].parameters()]
    outer = torch.optim.SGD(anchor, lr=0.7, momentum=0.9, nesterov=True)
    sizes = [a.numel() for a in anchor]
    frags = at._fragments(sizes, fragments)
    errors = {}
    want = []
    in_flight = []  # (fragment, each rank's parameters at the launch, mean delta)

    def apply(f, launched, delta):
        idx = frags[f]
        off = 0
        for a in anchor:
            a.grad = None
        for i in idx:
            n = sizes[i]
            anchor[i].grad = delta[off:off + n].view_as(anchor[i]).clone()
            off += n
        outer.step()
        for r, m in enumerate(reps):
            ps = list(m.parameters())
            for k, i in enumerate(idx):
                if overlap:  # the new anchor plus this rank's inner step since the launch
                    ps[i].copy_(anchor[i] + (ps[i].detach() - launched[r][k]))
                else:
                    ps[i].copy_(anchor[i])

    for t in range(1, steps + 1):
        for r in range(size):
            for p, g in zip(reps[r].parameters(), grads(reps[r], t, r)):
                p.grad = g
            opts[r].step()
        with torch.no_grad():
            for pending in in_flight:
                apply(*pending)
            in_flight = []
        if check_every and t % check_every == 0:
            want.append((t, divergence(reps)))
        with torch.no_grad():
            for f, idx in enumerate(frags):
                if t % H != (f * H) // len(frags):
                    continue
                deltas = []
                for r in range(size):
                    ps = list(reps[r].parameters())
                    d = torch.cat([(anchor[i] - ps[i].detach()).reshape(-1) for i in idx])
                    if compress != "none":
                        x = d + errors.get((f, r), torch.zeros_like(d))
                        sent = x.to(torch.bfloat16).float() if compress == "bf16" \
                            else int8_encode(x, 256)[1]
                        errors[(f, r)] = x - sent
                        d = sent
                    deltas.append(d)
                delta = deltas[0].clone()
                for d in deltas[1:]:  # rank order
                    delta += d
                delta /= size
                launched = [[list(m.parameters())[i].detach().clone() for i in idx]
                            for m in reps]
                if overlap:
                    in_flight.append((f, launched, delta))
                else:
                    apply(f, launched, delta)
    return reps, want


def outer_formula():
    """torch.optim.SGD(nesterov=True), the outer optimizer, is the C++ layer's outer step:
    m = mu m + delta; anchor -= lr (delta + mu m). Within 1e-6: the kernel may fuse the
    multiply-adds that the formula rounds one by one."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(64, generator=g)
    want, m = a.clone(), torch.zeros(64)
    opt = torch.optim.SGD([a], lr=0.7, momentum=0.9, nesterov=True)
    for _ in range(5):
        delta = torch.randn(64, generator=g)
        a.grad = delta.clone()
        opt.step()
        m = 0.9 * m + delta
        want -= 0.7 * (delta + 0.9 * m)
    h.expect_equal(a.detach(), want, "outer step: torch's Nesterov SGD against the formula",
                   atol=1e-6)


def diloco_case(H, fragments, compress, check_every=0, overlap=False):
    what = f"diloco H={H} fragments={fragments} compress={compress} overlap={overlap}"
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    w = at.DiLoCo(model, opt, sync_every=H, fragments=fragments, compress=compress,
                  check_every=check_every, overlap=overlap)
    train(w, model, opt, STEPS)
    reps, want = diloco_reference(H, fragments, compress, check_every=check_every,
                                  overlap=overlap)
    t = {} if size == 2 else {"atol": 1e-5}
    h.expect_equal(flat(model), flat(reps[rank]), f"{what}: parameters", **t)
    if check_every:
        check_history(w.history, want, what)
    end_identical(w, what)


def modes():
    h.run(delayed, local_sgd, local_sgd_bound, outer_formula, check_bytes,
          lambda: diloco_case(4, 1, "none", check_every=2),
          lambda: diloco_case(4, 2, "none", check_every=3),
          lambda: diloco_case(4, 2, "none", check_every=2, overlap=True))


def compress():
    h.run(lambda: diloco_case(4, 1, "bf16", check_every=4),
          lambda: diloco_case(3, 2, "int8"),
          lambda: diloco_case(4, 4, "bf16", check_every=3, overlap=True))


# --- misuse, checkpoints ---------------------------------------------------------------------
def misuse_config():
    # Each check agrees on the configuration with the other ranks (a collective): the bound is
    # "an error, not a hang", with room for ranks that reach it seconds apart on a busy machine.
    bound = 20.0

    def make(h_value):
        model = make_model()
        return at.LocalSGD(model, torch.optim.SGD(model.parameters(), lr=LR),
                           sync_every=h_value)

    h.expect_raises(ValueError, lambda: make(0), "H = 0", must_name="sync_every (H) must be",
                    within_s=bound)
    h.expect_raises(ValueError, lambda: make(0 if rank == size - 1 else 4),
                    "H = 0 on the last rank",
                    must_name=f"invalid configuration on rank(s) {size - 1}", within_s=bound)
    h.expect_raises(ValueError, lambda: make(8 if rank == 1 else 4), "H differs on rank 1",
                    must_name="rank(s) [1] differs from rank 0's: sync_every 4 on rank 0, 8 on "
                              "rank 1", within_s=bound)
    model = make_model()
    h.expect_raises(ValueError, lambda: at.DiLoCo(model, torch.optim.SGD(model.parameters(), lr=1),
                                                  sync_every=2, fragments=9),
                    "fragments above the tensors", must_name="fragments (9) above",
                    within_s=bound)


def subgroup():
    """On a group without global rank 0 (4 ranks: 1, 2, 3), the wrapper starts from the group's
    rank 0 (global rank 1) and averages within the group."""
    if size < 3:
        return
    members = list(range(1, size))
    group = dist.new_group(members)
    if rank not in members:
        return
    torch.manual_seed(100 + rank)  # different parameters on every rank
    model = nn.Linear(3, 2)
    start = [p.detach().clone() for p in model.parameters()]
    everyone = [None] * len(members)
    dist.all_gather_object(everyone, start, group=group)
    w = at.LocalSGD(model, torch.optim.SGD(model.parameters(), lr=LR), sync_every=1, group=group)
    h.expect_equal(flat(model), torch.cat([p.reshape(-1) for p in everyone[0]]),
                   "subgroup: the parameters of the group's rank 0 (global rank 1)")
    h.expect(w.rank == rank - 1 and w.world == len(members), f"subgroup: {w.rank}/{w.world}")
    w.synchronize()
    h.expect(w.ranks_differing() == [], "subgroup: replicas differ after synchronize()")


def torch_save_load(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def round_trip(make_wrapper, what, save_load=torch_save_load, saved_check=None, split=5):
    """Train 10 steps at once, and `split` + save + load in fresh objects + the rest: the same
    bits. saved_check(state) checks what the wrapper's state held when saved."""
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    w = make_wrapper(model, opt)
    train(w, model, opt, 10)
    m2 = make_model()
    o2 = torch.optim.Adam(m2.parameters(), lr=0.01)
    w2 = make_wrapper(m2, o2)
    train(w2, m2, o2, split)
    state = {"model": m2.state_dict(), "opt": o2.state_dict(), "wrapper": w2.state_dict()}
    if saved_check:
        saved_check(state["wrapper"])
    saved = save_load(state)
    del m2, o2, w2, state
    m3 = make_model()
    o3 = torch.optim.Adam(m3.parameters(), lr=0.01)
    w3 = make_wrapper(m3, o3)
    m3.load_state_dict(saved["model"])
    o3.load_state_dict(saved["opt"])
    w3.load_state_dict(saved["wrapper"])
    train(w3, m3, o3, 10 - split, first=split + 1)
    h.expect_equal(flat(m3), flat(model), f"{what}: resumed from a state_dict")
    h.expect(w3.step_count == 10, f"{what}: step count {w3.step_count}")
    if isinstance(w, at.DiLoCo):
        h.expect_equal(torch.cat([a.reshape(-1) for a in w3.anchor]),
                       torch.cat([a.reshape(-1) for a in w.anchor]), f"{what}: the anchor")
        momentum = [w.outer_optimizer.state[a]["momentum_buffer"].reshape(-1) for a in w.anchor]
        h.expect_equal(torch.cat([w3.outer_optimizer.state[a]["momentum_buffer"].reshape(-1)
                                  for a in w3.anchor]), torch.cat(momentum),
                       f"{what}: the outer momentum")


def state():
    round_trip(lambda m, o: at.DiLoCo(m, o, sync_every=3, compress="int8", fragments=2), "diloco")
    # Saved at step 4 with fragment 1's delta of that step in flight.
    round_trip(lambda m, o: at.DiLoCo(m, o, sync_every=3, compress="int8", fragments=2,
                                      overlap=True), "diloco overlapped",
               saved_check=lambda s: h.expect(len(s["in_flight"]) == 1, "no delta in flight"),
               split=4)
    round_trip(lambda m, o: at.DelayedUpdates(m, o), "delayed")


def misuse():
    h.run(misuse_config, state, subgroup)


def checkpoint():
    """The round trips through torch.distributed.checkpoint, in a directory of rank 0's."""
    where = [tempfile.mkdtemp(prefix="chorus-dcp-") if rank == 0 else None]
    dist.broadcast_object_list(where, src=0)
    count = [0]

    def dcp_save_load(state):
        count[0] += 1
        path = f"{where[0]}/{count[0]}"
        at.save_checkpoint(path, state)
        return at.load_checkpoint(path)

    def in_flight(state):
        h.expect(len(state["in_flight"]) == 1 and state["outer_optimizer"]["state"]
                 and any(e is not None for e in state["errors"]),
                 "diloco: saved without a delta in flight, outer momentum or error feedback")

    try:
        round_trip(lambda m, o: at.DiLoCo(m, o, sync_every=3, compress="int8", fragments=2,
                                          overlap=True), "dcp diloco overlapped",
                   dcp_save_load, in_flight, split=4)
        round_trip(lambda m, o: at.LocalSGD(m, o, sync_every=3), "dcp localsgd", dcp_save_load,
                   lambda s: h.expect(s["step"] % 3 != 0, "localsgd: saved on an average"))
        round_trip(lambda m, o: at.DelayedUpdates(m, o), "dcp delayed", dcp_save_load,
                   lambda s: h.expect(s["pending"] is not None, "delayed: nothing pending"))
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(where[0], ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["modes", "compress", "misuse", "checkpoint"])
    p.add_argument("--backend", default="chorus")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=30))
    {"modes": modes, "compress": compress, "misuse": misuse, "checkpoint": checkpoint}[args.case]()
    h.finish()


if __name__ == "__main__":
    sys.exit(main())

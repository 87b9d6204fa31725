"""train_async.py --elastic: delayed updates, local SGD or DiLoCo under
chorus.torch.elastic.AsyncTrainer, which survives a lost rank and admits replacements
(chorus-run --elastic).

Rank --fail-rank dies (SIGKILL, or SIGSTOP with --fail-signal stop) inside the first
synchronisation of step --fail-step or later, first life only: it starts the synchronisation's
collective (a fragment's launch, an average, a divergence check; --fail-collective K: the K-th
of that step) and dies while its peers are in it. The survivors put back the state from before
that synchronisation, shrink the group and redo it among themselves; with restarts left,
chorus-run starts a replacement, which joins at the next admission (--admit-every steps, at a
synchronising step) and takes the model, inner and outer optimizer state and the wrapper's state
from a peer. The policy for the new size is train_elastic.py's: batch per rank unchanged, inner
learning rate scaled by the number of ranks, the rest of the epoch dealt among the ranks there
are.

For the tests: --save-at-failure DIR (each rank saves its state as the synchronisation that the
failure is in begins, as DIR/rank<R>.pt) and --check-reference (after the elastic run, on the
survivors' group in the same job: a run from the survivors' saved states, which does that
synchronisation among them and goes on, without failure) give a run that saw the same membership
sequence; the parameters of the two are compared bit for bit ("reference: ..."). --save PATH
keeps rank 0's final parameters.
"""

import copy

import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import train_ddp
from train_elastic import FAIL_PID_KEY, FAIL_TIME_KEY, Plan, await_replacements, report, set_lr


def add_args(p):
    g = p.add_argument_group("elastic (--elastic: chorus.torch.elastic.AsyncTrainer)")
    g.add_argument("--elastic", action="store_true",
                   help="survive lost ranks; replacements from chorus-run --elastic join")
    g.add_argument("--fail-rank", type=lambda t: [int(r) for r in t.split(",")], default=[],
                   metavar="R[,R...]", help="these ranks fail (first life)")
    g.add_argument("--fail-step", type=int, default=-1,
                   help="... in the first synchronisation at this step or later")
    g.add_argument("--fail-signal", choices=["kill", "stop"], default="kill")
    g.add_argument("--fail-collective", type=int, default=0, metavar="K",
                   help="... at the K-th collective (from 0) the wrapper starts in that step")
    g.add_argument("--admit-every", type=int, default=10,
                   help="look for replacements waiting every this many steps")
    g.add_argument("--await-at", type=int, default=-1, metavar="STEP",
                   help="wait for --await-replacements before this step (default: at the end)")
    g.add_argument("--await-replacements", type=int, default=0,
                   help="wait (up to --timeout) until this many have joined")
    g.add_argument("--save-at-failure", metavar="DIR", help=argparse_suppress())
    g.add_argument("--check-reference", action="store_true", help=argparse_suppress())
    g.add_argument("--save", metavar="PATH", help="rank 0 saves the final state_dict here")


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def check_args(p, args):
    if not args.elastic:
        if args.fail_rank or args.save_at_failure or args.await_replacements:
            p.error("--fail-rank, --save-at-failure, --await-replacements: with --elastic only")
        return
    if args.backend != "chorus" or args.mode == "sync":
        p.error("--elastic: with --backend chorus and --mode delayed, localsgd or diloco")
    if args.eval_every or args.metrics or args.results:
        p.error("--elastic: without --eval-every, --metrics and --results")
    if args.check_reference and not args.save_at_failure:
        p.error("--check-reference needs --save-at-failure DIR")
    args.resume = None  # check_reference's run: the saved states' files
    args.admit_delay = 0  # train_elastic.await_replacements reads it


def main(args, build, train_set, test_set):
    """The elastic run (build(say) gives a model, its optimizer and the wrapper's maker); exits
    with finish()'s status."""
    def say(text):  # rank 0 may change
        if dist.get_rank() == 0:
            print(text, flush=True)

    model, opt, make_wrapper = build(say)
    say(f"train_async: {dist.get_world_size()} ranks, elastic, {args.model}, mode {args.mode} "
        f"H={args.sync_every}, compress {args.compress}, fragments {args.fragments}"
        f"{' overlapped' if args.overlap else ''}, {args.optimizer} lr {args.lr}, batch "
        f"{args.batch} per rank, {'synthetic data' if args.synthetic else args.data}")
    trainer, elapsed = train(args, model, opt, make_wrapper, train_set, say)
    if args.check_reference:
        check_reference(args, build, train_set, model, trainer, say)
    finish(args, model, trainer, elapsed, test_set, say)


def check_reference(args, build, train_set, model, trainer, say):
    """The run from the survivors' saved states, on their group: its parameters must be those
    of the elastic run, bit for bit (exit status 5 if not)."""
    if len(trainer.changes) != 1 or not trainer.changes[0].lost_ranks:
        say(f"reference: expected one membership change, a loss; got {trainer.changes}")
        sys.exit(5)
    ref = copy.copy(args)  # the survivors' saved states, each rank its own
    ref.resume = [os.path.join(args.save_at_failure, f"rank{r}.pt")
                  for r in trainer.changes[0].former_ranks]
    ref.save_at_failure, ref.fail_rank, ref.await_replacements, ref.await_at = None, [], 0, -1
    ref_model, ref_opt, make_wrapper = build(lambda text: None)
    train(ref, ref_model, ref_opt, make_wrapper, train_set, lambda text: None)
    before = torch.load(ref.resume[dist.get_rank()], weights_only=False)["trainer"]["model"]
    got, want = model.state_dict(), ref_model.state_dict()
    bad = torch.tensor([sum(not torch.equal(got[k], want[k]) for k in got),
                        all(torch.equal(got[k], before[k]) for k in got)], dtype=torch.int64)
    dist.all_reduce(bad)
    if bad[0] or bad[1]:
        say(f"reference: the parameters differ from the run from the saved states in "
            f"{int(bad[0])} tensor(s) over the ranks; {int(bad[1])} rank(s) did not train after "
            "the failure")
        sys.exit(5)
    say(f"reference: parameters bit-identical to a {dist.get_world_size()}-rank run from the "
        "survivors' states before the failed synchronisation")


def arm_failure(args, trainer, store):
    """In the first life, on the ranks of --fail-rank: the first collective that the wrapper
    starts at step --fail-step or later is started (asynchronously), then this rank dies."""
    first_life = os.environ.get("CHORUS_RESTART", "0") == "0"
    if not first_life or dist.get_rank() not in args.fail_rank or args.fail_step < 0:
        return
    sig = signal.SIGKILL if args.fail_signal == "kill" else signal.SIGSTOP
    seen = {}  # step: the wrapper's collectives started in it

    def failing(collective):
        def call(*a, **kw):
            if trainer.steps < args.fail_step or "done" in seen:
                return collective(*a, **kw)
            seen[trainer.steps] = seen.get(trainer.steps, -1) + 1
            if seen[trainer.steps] != args.fail_collective:
                return collective(*a, **kw)
            seen["done"] = True
            store.set(FAIL_PID_KEY, str(os.getpid()))
            store.set(FAIL_TIME_KEY, repr(time.time()))
            work = collective(*a, **dict(kw, async_op=True))
            print(f"train_async: rank {dist.get_rank()} fails in a synchronisation of step "
                  f"{trainer.steps}", flush=True)
            os.kill(os.getpid(), sig)
            return work if kw.get("async_op") else work.wait()

        return call

    # The wrapper calls them through the module; the trainer's vote has its own reference.
    dist.all_reduce = failing(dist.all_reduce)
    dist.all_gather = failing(dist.all_gather)


def save_at_failure(args, trainer):
    """--save-at-failure: each rank saves its state as the first synchronisation at step
    --fail-step or later begins (the one the failure is in), before anything of it is done."""
    if not args.save_at_failure or os.environ.get("CHORUS_RESTART", "0") != "0":
        return
    transaction = trainer._transaction

    def saving(sync):
        if trainer.steps >= args.fail_step and not trainer.changes:
            path = os.path.join(args.save_at_failure, f"rank{dist.get_rank()}.pt")
            if not os.path.exists(path):
                torch.save({"trainer": trainer._state(), "world": dist.get_world_size()}, path)
        return transaction(sync)

    trainer._transaction = saving


def resume(args, trainer, opt):
    """The run from --save-at-failure's states (args.resume: one file per rank now, in rank
    order): the policy's learning rate for the new size, then the failed synchronisation
    again."""
    saved = torch.load(args.resume[dist.get_rank()], weights_only=False)
    trainer._load(saved["trainer"], args.resume[dist.get_rank()])
    set_lr(opt, opt.param_groups[0]["lr"] * dist.get_world_size() / saved["world"])
    trainer._transaction(trainer._sync)


def state_digests(trainer):
    """(hash of what every rank shares: step, committed synchronisations, data position and,
    for DiLoCo, the anchor and outer momentum; hash of this rank's whole state: that and the
    parameters, the inner optimizer's state, the error feedback, the fragments in flight)."""
    from chorus.async_training import state_hash

    w = trainer.wrapper
    state = trainer._state()
    shared = [torch.tensor([trainer.steps, trainer.commits, *state["state"].values()])]
    if hasattr(w, "anchor"):
        shared += list(w.anchor) + tensors_of(state["wrapper"]["outer"])
    own = list(w.params) + tensors_of(state["optimizer"]) + tensors_of(state["wrapper"])
    return state_hash(shared), state_hash(shared + own)


def tensors_of(value):
    """The tensors in a nested state, in a fixed order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for k in sorted(value, key=str) for t in tensors_of(value[k])]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    return []


def check_admission(trainer, change, say):
    """Collective, right after replacements were admitted: every rank shares the same step,
    data position, anchor and outer momentum, and each replacement's whole state is its
    source's (the first rank, which every replacement takes its state from)."""
    mine = torch.tensor(state_digests(trainer), dtype=torch.int64)
    every = torch.zeros(dist.get_world_size(), 2, dtype=torch.int64)
    dist.all_gather_into_tensor(every, mine)
    joined = [r for r, f in enumerate(change.former_ranks) if f < 0]
    if any(every[:, 0] != every[0, 0]) or any(every[r, 1] != every[0, 1] for r in joined):
        say(f"replacement: its state differs from rank 0's (digests {every.tolist()})")
        sys.exit(6)
    say(f"replacement(s) {joined}: whole state identical to rank 0's (model, inner and outer "
        "optimizer, wrapper, step, data position)")


def train(args, model, opt, make_wrapper, train_set, say):
    """The training loop under AsyncTrainer; returns (trainer, seconds)."""
    import chorus.torch
    from chorus.torch import elastic

    store = chorus.torch.job_store() or dist.distributed_c10d._get_default_store()
    x_all, y_all = train_set
    plan = Plan(len(x_all), args)
    changes = []

    held = []  # the trainer, once made

    def on_change(change):
        set_lr(opt, opt.param_groups[0]["lr"] * change.size / change.previous_size)
        changes.append(change)
        if held and -1 in change.former_ranks:
            check_admission(held[0], change, say)

    # In a replacement (chorus-run --elastic restarted a lost rank) the wrapper makes no
    # collective; the trainer joins the job and takes the state from a peer.
    trainer = elastic.AsyncTrainer(make_wrapper(), on_change=on_change, state=plan,
                                   admit_every=args.admit_every)
    held.append(trainer)
    if trainer.changes:  # a replacement, just admitted (the others check in on_change)
        check_admission(trainer, trainer.changes[-1], say)
    if args.resume:
        resume(args, trainer, opt)
        plan.commit(dist.get_world_size())
    arm_failure(args, trainer, store)
    save_at_failure(args, trainer)
    start = time.perf_counter()
    try:
        while not args.steps or trainer.steps < args.steps:
            batch = plan.batch(dist.get_rank(), dist.get_world_size())
            if batch is None:
                break
            if trainer.steps == args.await_at:
                await_replacements(args, trainer, say)
            loss = trainer.step(lambda: F.cross_entropy(model(x_all[batch]), y_all[batch]))
            if loss is None:
                continue  # replacements admitted: the batch is dealt again
            plan.commit(dist.get_world_size())
            report(args, store, changes, say)
            if trainer.steps % args.log_every == 0:
                say(f"epoch {plan.epoch} step {trainer.steps} loss {loss.item():.4f}")
        await_replacements(args, trainer, say)
        trainer.synchronize()
    except elastic.Removed as e:
        print(f"train_async: {e}", flush=True)
        os._exit(4)  # the group is unusable here: no orderly shutdown to wait for
    report(args, store, changes, say)
    return trainer, time.perf_counter() - start


def finish(args, model, trainer, elapsed, test_set, say):
    """The summary lines and the exit status (3: the ranks' parameters differ)."""
    world = dist.get_world_size()
    accuracy = train_ddp.test_accuracy(model, test_set, dist.get_rank(), world)
    keep = []
    differing = train_ddp.ranks_with_other_parameters(model, keep)
    w = trainer.wrapper
    say(f"{trainer.steps} steps, {trainer.commits} synchronisations committed, "
        f"{len(trainer.changes)} membership change(s), {elapsed:.1f} s; bytes sent per step "
        f"(mean, rank 0): {w.bytes_sent / max(trainer.steps, 1):.0f}")
    say(f"final test accuracy: {accuracy * 100:.2f} %")
    if differing == 0:
        say(f"parameters: bit-identical on all {world} ranks")
    else:
        say(f"parameters: {differing} of {world} ranks differ from rank 0")
    if args.save and dist.get_rank() == 0:
        torch.save(model.state_dict(), args.save)
    del trainer, w
    dist.destroy_process_group()
    del keep
    sys.exit(0 if differing == 0 else 3)

"""train_async.py --elastic: local SGD or DiLoCo under chorus.torch.elastic.AsyncTrainer, which
survives a lost rank and admits replacements (chorus-run --elastic).

Rank --fail-rank dies (SIGKILL, or SIGSTOP with --fail-signal stop) inside the first
synchronisation of step --fail-step or later, first life only: it starts the synchronisation's
collective (a fragment's launch, an average, a divergence check) and dies while its peers are
in it. The survivors put back the state from before that synchronisation, shrink the group and
redo it among themselves; with restarts left, chorus-run starts a replacement, which joins at
the next admission (--admit-every steps, at a synchronising step) and takes the model, inner and
outer optimizer state and the wrapper's state from a peer. The policy for the new size is
train_elastic.py's: batch per rank unchanged, inner learning rate scaled by the number of
ranks, the rest of the epoch dealt among the ranks there are.

For the tests: --save-at-failure DIR (each survivor saves its state, put back to before the
failed synchronisation, as DIR/rank<R>.pt) and --resume DIR (a run on the survivors' number of
ranks, from those files: it redoes that synchronisation and goes on) give a run that saw the
same membership sequence; --save PATH keeps rank 0's final parameters.
"""

import glob
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
    g.add_argument("--admit-every", type=int, default=10,
                   help="look for replacements waiting every this many steps")
    g.add_argument("--await-at", type=int, default=-1, metavar="STEP",
                   help="wait for --await-replacements before this step (default: at the end)")
    g.add_argument("--await-replacements", type=int, default=0,
                   help="wait (up to --timeout) until this many have joined")
    g.add_argument("--save-at-failure", metavar="DIR", help=argparse_suppress())
    g.add_argument("--resume", metavar="DIR", help=argparse_suppress())
    g.add_argument("--save", metavar="PATH", help="rank 0 saves the final state_dict here")


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def check_args(p, args):
    if not args.elastic:
        if args.fail_rank or args.resume or args.save_at_failure or args.await_replacements:
            p.error("--fail-rank, --resume, --save-at-failure, --await-replacements: with "
                    "--elastic only")
        return
    if args.backend != "chorus" or args.mode not in ("localsgd", "diloco"):
        p.error("--elastic: with --backend chorus and --mode localsgd or diloco")
    if args.eval_every or args.metrics or args.results:
        p.error("--elastic: without --eval-every, --metrics and --results")
    args.admit_delay = 0  # train_elastic.await_replacements reads it


def arm_failure(args, trainer, store):
    """In the first life, on the ranks of --fail-rank: the first collective that the wrapper
    starts at step --fail-step or later is started (asynchronously), then this rank dies."""
    first_life = os.environ.get("CHORUS_RESTART", "0") == "0"
    if not first_life or dist.get_rank() not in args.fail_rank or args.fail_step < 0:
        return
    sig = signal.SIGKILL if args.fail_signal == "kill" else signal.SIGSTOP
    done = []

    def failing(collective):
        def call(*a, **kw):
            if done or trainer.steps < args.fail_step:
                return collective(*a, **kw)
            done.append(True)
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
    """--save-at-failure: each survivor saves its state (put back to before the failed
    synchronisation) when the first membership change after a failure begins."""
    if not args.save_at_failure or os.environ.get("CHORUS_RESTART", "0") != "0":
        return
    change = trainer._change

    def saving(cause, error):
        if cause is not None and not trainer.changes:
            torch.save({"trainer": trainer._state(), "world": dist.get_world_size()},
                       os.path.join(args.save_at_failure, f"rank{dist.get_rank()}.pt"))
        return change(cause, error)

    trainer._change = saving


def resume(args, trainer, opt):
    """--resume: this rank takes the state of the survivor of its rank (in their order), the
    policy's learning rate for the new size, and redoes the failed synchronisation."""
    files = sorted(glob.glob(os.path.join(args.resume, "rank*.pt")),
                   key=lambda f: int(os.path.basename(f)[4:-3]))
    if len(files) != dist.get_world_size():
        sys.exit(f"train_async: --resume {args.resume}: {len(files)} saved states for "
                 f"{dist.get_world_size()} ranks")
    saved = torch.load(files[dist.get_rank()], weights_only=False)
    trainer._load(saved["trainer"], files[dist.get_rank()])
    set_lr(opt, opt.param_groups[0]["lr"] * dist.get_world_size() / saved["world"])
    w = trainer.wrapper
    trainer._transaction(lambda: w._sync(trainer._check_due()))


def train(args, model, opt, make_wrapper, train_set, say):
    """The training loop under AsyncTrainer; returns (trainer, seconds)."""
    import chorus.torch
    from chorus.torch import elastic

    store = chorus.torch.job_store() or dist.distributed_c10d._get_default_store()
    x_all, y_all = train_set
    plan = Plan(len(x_all), args)
    changes = []

    def on_change(change):
        set_lr(opt, opt.param_groups[0]["lr"] * change.size / change.previous_size)
        changes.append(change)

    # In a replacement (chorus-run --elastic restarted a lost rank) the wrapper makes no
    # collective; the trainer joins the job and takes the state from a peer.
    trainer = elastic.AsyncTrainer(make_wrapper(), on_change=on_change, state=plan,
                                   admit_every=args.admit_every)
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

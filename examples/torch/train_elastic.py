#!/usr/bin/python3
"""DDP training of Fashion-MNIST that survives a lost rank, without a restart.

    chorus-run -n 4 --elastic --max-restarts 0 --min-ranks 2 -- \\
        python3 train_elastic.py --backend chorus --fail-rank 2 --fail-step 50

train_ddp.py's training, each step run by chorus.torch.elastic.Trainer: when rank R dies at step
S (--fail-rank/--fail-step, first life only), the survivors discard that step, shrink the group
and go on; with restarts left, chorus-run starts a replacement, which joins at the next admission
check (--admit-every steps) and takes model, optimizer, step and data position from a peer.
--fail-signal stop: the stopped rank is left out once its heartbeat has been silent for the
heartbeat timeout (CHORUS_HEARTBEAT_SECONDS, 5 s by default), well before the group's timeout
(--timeout); rank 0 then wakes it (SIGCONT), and it learns that it was removed and exits with
status 4. --fail-signal stall: the rank stays alive but stuck before the step (--stall-for
seconds, a hung data loader): the others, waiting in the step, leave it out after the Trainer's
stall timeout (the heartbeat's by default); when it comes back it learns so and exits 4. The policy for the new size (the on_change hook):
batch per rank unchanged, learning rate scaled by the number of ranks, the rest of the epoch
dealt among the ranks there are. --hsdp S: HSDP instead of DDP, the model sharded with FSDP2
(fully_shard) within replica groups of S ranks and averaged across them by
chorus.torch.elastic.HSDPTrainer; a lost rank takes its replica group out (its replica-mates
exit with status 4, saying they left) and the other replica groups go on; replacements join as
whole replica groups (chorus-run restarts the lost rank and its replica-mates). Rank 0 prints
"recovered in X s" per membership change (from the failure to the next committed step), the test
accuracy and whether every rank ends with bit-identical parameters (exit status 3 if not).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import fashion_mnist
import models
from train_ddp import (join_group, load_data, ranks_with_other_parameters, ranks_with_other_values,
                       test_accuracy)

FAIL_TIME_KEY = "train_elastic/fail_time"
FAIL_PID_KEY = "train_elastic/fail_pid"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["chorus"], default="chorus")
    p.add_argument("--model", choices=sorted(models.MODELS), default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05, help="for the ranks of the first life")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="compute threads per rank")
    p.add_argument("--data", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--data-cache", metavar="DIR",
                   help="keep the decoded data here and map it on later starts (replacements)")
    p.add_argument("--synthetic", action="store_true", help="random learnable data, no files")
    p.add_argument("--timeout", type=float, default=60, help="seconds, for every collective")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--fail-rank", type=lambda t: [int(r) for r in t.split(",")], default=[],
                   metavar="R[,R...]", help="these ranks fail at once (first life)")
    p.add_argument("--fail-step", type=int, default=-1, help="... during this step's backward")
    p.add_argument("--fail-signal", choices=["kill", "stop", "stall"], default="kill",
                   help="stall: the rank stays alive but stuck before the step (a data loader "
                        "that hangs) for --stall-for seconds")
    p.add_argument("--stall-for", type=float, default=30, metavar="SECONDS")
    p.add_argument("--stall-seconds", type=float, default=None, metavar="SECONDS",
                   help="the Trainer's stall timeout (default: the heartbeat's; 0: off)")
    p.add_argument("--hsdp", type=int, default=0, metavar="S",
                   help="HSDP: FSDP2 within replica groups of S ranks (0: DDP)")
    # For the tests of failures in awkward places (first life only).
    p.add_argument("--fail-in-recovery", type=int, default=-1, metavar="R",
                   help="rank R is killed during the recovery from the first failure, once its "
                        "shrink returned (while the others catch up)")
    p.add_argument("--replacement-dies-after", type=float, default=-1, metavar="SECONDS",
                   help="a replacement is killed this long after it began to join (waiting "
                        "to be admitted)")
    p.add_argument("--admit-delay", type=float, default=0, metavar="SECONDS",
                   help="at --await-at, admit only this long after a replacement is seen "
                        "waiting")
    p.add_argument("--admit-every", type=int, default=10,
                   help="look for replacements waiting to join every this many steps")
    p.add_argument("--await-at", type=int, default=-1, metavar="STEP",
                   help="wait for --await-replacements before this step (default: at the end)")
    p.add_argument("--await-replacements", type=int, default=0,
                   help="at the end, wait (up to --timeout) until this many have joined")
    p.add_argument("--await-spares", type=int, default=0, metavar="N",
                   help="before --fail-step, wait (up to --timeout) until N spares stand by, "
                        "so that the failure's membership change takes them in")
    # For the tests: the state before the failing step, and the final state, to compare with a
    # run that starts from that state with the survivors' membership.
    p.add_argument("--save-before-failure", metavar="PATH")
    p.add_argument("--resume", metavar="PATH", help="start from a --save-before-failure state")
    p.add_argument("--resume-buckets", choices=["ready", "joined"], default="ready",
                   help="with --resume: DDP's buckets as in a running job (gradient-ready "
                        "order), or as after a change that admitted newcomers (the reference "
                        "of a run where a spare or replacement joined)")
    p.add_argument("--save", metavar="PATH", help="rank 0 saves the final state_dict here")
    # For bench/elastic/torch_goodput.py: a driver outside the job kills ranks and ends the run.
    p.add_argument("--step-log", metavar="PATH",
                   help="every rank appends JSON lines here: its start, each committed step")
    p.add_argument("--stop-file", metavar="PATH",
                   help="once this file holds a step number, stop after that step")
    return p.parse_args()


class Plan:
    """Which samples each rank takes: one shuffle per epoch; each committed step consumes
    world x batch samples from a cursor shared by all ranks, so after a membership change the
    rest of the epoch is dealt among the ranks there are."""

    def __init__(self, count, args):
        self.count, self.args = count, args
        self.epoch, self.cursor = 0, 0
        self._order()

    def _order(self):
        g = torch.Generator().manual_seed(self.args.seed * 1000 + self.epoch)
        self.order = torch.randperm(self.count, generator=g)

    def batch(self, rank, world):
        """This rank's samples for the next step, or None at the end of training."""
        if self.epoch >= self.args.epochs:
            return None  # also in a replacement that took the state of the end
        if self.cursor + world * self.args.batch > self.count:
            self.epoch, self.cursor = self.epoch + 1, 0
            if self.epoch >= self.args.epochs:
                return None
            self._order()
        start = self.cursor + rank * self.args.batch
        return self.order[start : start + self.args.batch]

    def commit(self, world):
        self.cursor += world * self.args.batch

    # What a replacement takes from a peer (elastic.Trainer's state).
    def state_dict(self):
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state):
        self.epoch, self.cursor = state["epoch"], state["cursor"]
        self._order()


def set_lr(opt, lr):
    for group in opt.param_groups:
        group["lr"] = lr


def first_life():
    """Not a process chorus-run restarted, nor a spare."""
    return (os.environ.get("CHORUS_RESTART", "0") == "0"
            and os.environ.get("CHORUS_JOIN") != "1")


def arm_failure(args, model, store, elastic_hsdp, step_log):
    """In the first life, rank --fail-rank kills (or stops) itself in step --fail-step's
    backward, once the first layer's gradient is computed: other gradient buckets are already
    being all-reduced. The time goes to the store first, for the survivors' recovery time."""
    if not first_life() or dist.get_rank() not in args.fail_rank or args.fail_step < 0:
        return lambda step: None
    if args.fail_signal == "stall":
        def stall(step):
            if step == args.fail_step and not armed:
                armed.append(True)
                store.set(FAIL_PID_KEY, str(os.getpid()))
                store.set(FAIL_TIME_KEY, repr(time.time()))
                time.sleep(args.stall_for)  # alive (heartbeats go on), in no collective

        armed = []
        return stall
    sig = signal.SIGKILL if args.fail_signal == "kill" else signal.SIGSTOP
    armed = []

    def fail(grad):
        if armed:
            store.set(FAIL_PID_KEY, str(os.getpid()))
            store.set(FAIL_TIME_KEY, repr(time.time()))
            step_log.log("kill", step=armed[0])
            os.kill(os.getpid(), sig)
        return grad

    if args.hsdp:
        # FSDP2 sets the sharded parameters' gradients itself: the hook goes on the first
        # layer's output instead.
        def on_output(module, inputs, output):
            if armed:
                output.register_hook(fail)

        elastic_hsdp.first_layer(model).register_forward_hook(on_output)
    else:
        next(model.module.parameters()).register_hook(fail)
    return lambda step: armed.append(step) if step == args.fail_step else None


def arm_awkward_failures(args, chorus_torch):
    """--fail-in-recovery and --replacement-dies-after: SIGKILL at those moments."""
    restart = os.environ.get("CHORUS_RESTART", "0")
    if restart == "0" and dist.get_rank() == args.fail_in_recovery:
        shrink = chorus_torch.shrink

        def shrink_then_die(*a, **kw):
            m = shrink(*a, **kw)
            print(f"train_elastic: rank {args.fail_in_recovery} dies in the recovery", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
            return m

        chorus_torch.shrink = shrink_then_die  # elastic.Trainer calls it through the module
    if restart != "0" and args.replacement_dies_after >= 0:
        def die():
            print("train_elastic: this replacement dies before it is admitted", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Timer(args.replacement_dies_after, die).start()


def await_replacements(args, trainer, say):
    """Admits replacements until --await-replacements have joined (up to --timeout), or until
    an admission found the replacements that were waiting gone (died before they were in)."""
    deadline = time.monotonic() + args.timeout
    if args.admit_delay > 0 and args.await_replacements > 0:
        # Each rank looks for itself (a store read, not collective), so no collective waits
        # through a replacement's start-up.
        import chorus.torch

        while chorus.torch.joiners_waiting() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(args.admit_delay)
    while sum(c.former_ranks.count(-1) for c in trainer.changes) < args.await_replacements:
        if time.monotonic() > deadline:
            sys.exit(f"train_elastic: no {args.await_replacements} replacement(s) joined within "
                     f"{args.timeout} s")
        changes = len(trainer.changes)
        started = time.monotonic()
        if trainer.admit() == 0:
            if len(trainer.changes) > changes:
                say(f"admission at step {trainer.steps}: the replacement(s) waiting were gone "
                    f"(found so in {time.monotonic() - started:.3f} s); going on with "
                    f"{dist.get_world_size()} ranks")
                args.await_replacements = 0  # none to wait for at the end either
                return
            time.sleep(0.05)


def await_spares(args):
    """Each rank waits until it sees --await-spares spares standing by (a store read, not
    collective; a spare stays counted until it is admitted, so every rank gets to see it)."""
    import chorus.torch

    deadline = time.monotonic() + args.timeout
    while chorus.torch.spares_waiting() < args.await_spares:
        if time.monotonic() > deadline:
            sys.exit(f"train_elastic: no {args.await_spares} spare(s) stood by within "
                     f"{args.timeout} s")
        time.sleep(0.05)


def report(args, store, changes, say):
    """One line per membership change, on rank 0; run after a committed step."""
    for change in changes:
        # The failing rank wrote the time of its failure; 0 when none was asked for.
        since = float(store.get(FAIL_TIME_KEY).decode()) if store.check([FAIL_TIME_KEY]) else 0
        if change.lost_ranks:
            what = f"lost {','.join(map(str, change.lost_ranks))}"
            if -1 in change.former_ranks:  # a spare (chorus-run --spares) took the place
                what += f", {change.former_ranks.count(-1)} spare(s) joined"
            how = (f"recovered in {time.time() - since:.3f} s (failure noticed after "
                   f"{change.noticed - since:.3f} s, shrink and catch-up {change.seconds:.3f} s)")
            if not since:  # killed from outside (bench/elastic/torch_goodput.py): no time
                how = f"shrink and catch-up {change.seconds:.3f} s"
        else:
            what = f"{change.former_ranks.count(-1)} replacement(s) joined"
            how = (f"{time.time() - since:.3f} s after the failure (admission and state "
                   f"transfer {change.seconds:.3f} s)")
            if not since:
                how = f"admission and state transfer {change.seconds:.3f} s"
        say(f"membership: generation {change.generation}, {change.previous_size} -> "
            f"{change.size} ranks ({what}) at step {change.step}; {how}")
        if change.lost_ranks and args.fail_signal == "stop" and dist.get_rank() == 0:
            # The stopped rank was left out: woken, it learns so (elastic.Removed) and exits.
            try:
                os.kill(int(store.get(FAIL_PID_KEY).decode()), signal.SIGCONT)
            except ProcessLookupError:
                pass  # chorus-run killed it already (it reads the membership change too)
    changes.clear()


def bucket_sizes(model):
    """DDP's gradient buckets, elements in each, in the order they are all-reduced."""
    return [b.buffer().numel() for b in model.reducer._get_zeros_like_grad_buckets()]


def buckets_check(model, before, world):
    """Collective: every rank's bucket layout against rank 0's, and rank 0's against the one it
    had before any change (`before`, from the first life's step 2, after DDP's own rebuild in
    gradient-ready order; None when there is none). A line for the end of the run."""
    mine = torch.tensor(bucket_sizes(model), dtype=torch.int64)
    count = torch.tensor([mine.numel()], dtype=torch.int64)
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, count)
    width = int(max(c.item() for c in counts))
    padded = torch.full((width,), -1, dtype=torch.int64)
    padded[: mine.numel()] = mine
    rows = [torch.zeros(width, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(rows, padded)
    layouts = [[int(v) for v in r if v >= 0] for r in rows]
    others = [r for r in range(world) if layouts[r] != layouts[0]]
    if others:
        return (f"DDP buckets: ranks {others} differ from rank 0 ({layouts[others[0]]} against "
                f"{layouts[0]} elements)")
    if before is not None and layouts[0] != before:
        return (f"DDP buckets: {layouts[0]} elements on all {world} ranks, differ from rank 0's "
                f"before the changes ({before}, gradient-ready order)")
    said = ", as before the changes" if before is not None else ""
    return f"DDP buckets: {layouts[0]} elements on all {world} ranks{said}"


def process_start_time():
    """Wall-clock time this process was started (exec), from /proc (10 ms ticks): a
    replacement's start-up is timed from there, imports included."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


class StepLog:
    """--step-log: one JSON object per line, wall-clock seconds; appends of one short line each
    from every rank (O_APPEND keeps them whole)."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None
        self.log("start", env_rank=int(os.environ.get("RANK", "0")),
                 restart=int(os.environ.get("CHORUS_RESTART", "0")),
                 spare=os.environ.get("CHORUS_SPARE") == "1",
                 process_start=process_start_time() if path else None)

    def log(self, kind, **fields):
        if self.file:
            self.file.write(json.dumps(dict(t=time.time(), kind=kind, pid=os.getpid(), **fields))
                            + "\n")


def stop_step(args, cache):
    """The step given in --stop-file, once it is there (read once)."""
    if not cache and args.stop_file and os.path.exists(args.stop_file):
        with open(args.stop_file) as f:
            text = f.read().strip()
        if text:
            cache.append(int(text))
    return cache[0] if cache else None


def main():
    args = parse_args()
    step_log = StepLog(args.step_log)  # before the join: a replacement's start-up is timed
    torch.set_num_threads(args.threads)
    rank, world, _ = join_group(args, "train_elastic")
    step_log.log("group")
    import chorus.torch
    from chorus.torch import elastic

    # The failure's time and pid go to a store that outlives the failing rank: chorus-run's
    # (torch's env:// store lives in rank 0).
    store = chorus.torch.job_store()
    if store is None:
        if 0 in args.fail_rank:
            sys.exit("train_elastic: --fail-rank 0 needs chorus-run (CHORUS_STORE): torch's "
                     "env:// store lives in rank 0 and would go with it")
        store = dist.distributed_c10d._get_default_store()

    def say(text):  # rank 0 of the group now: after a change it may be another process
        if dist.get_rank() == 0:
            print(text, flush=True)

    torch.manual_seed(args.seed)
    train_set, test_set = load_data(args)
    x_all, y_all = train_set
    step_log.log("data")
    # A replacement (chorus-run --elastic restarted a lost rank) joined the job inside
    # init_process_group; elastic.ddp leaves out DDP's initial collectives there.
    elastic_hsdp = None
    if args.hsdp:
        import elastic_hsdp

        try:  # in a replacement, joins the job (hsdp_mesh)
            model, opt, mesh = elastic_hsdp.build(args, elastic)
        except elastic.Removed as e:
            print(f"train_elastic: {e}", flush=True)
            os._exit(4)
    else:
        model = elastic.ddp(models.MODELS[args.model]())
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    plan = Plan(len(x_all), args)
    recovering = []

    def on_change(change):
        # Policy: batch per rank unchanged, learning rate in proportion to the ranks.
        set_lr(opt, opt.param_groups[0]["lr"] * change.size / change.previous_size)
        recovering.append(change)

    arm_awkward_failures(args, chorus.torch)
    step_log.log("model")
    if args.hsdp:
        trainer = elastic.HSDPTrainer(model, opt, mesh, on_change=on_change, state=plan,
                                      admit_every=args.admit_every)
    else:
        trainer = elastic.Trainer(model, opt, on_change=on_change, state=plan,
                                  admit_every=args.admit_every, stall_seconds=args.stall_seconds)
    if args.resume and args.hsdp:
        saved_world = elastic_hsdp.load_shards(args.resume, model, opt, trainer, plan, mesh)
        set_lr(opt, opt.param_groups[0]["lr"] * world / saved_world)
    elif args.resume and not trainer.changes:
        if args.resume_buckets == "joined":
            # As after a change that admitted newcomers: DDP's buckets laid out in parameter
            # order on every rank (elastic's _same_buckets).
            elastic._same_buckets(model)
        else:
            # One discarded backward first: DDP's first iteration averages the gradients with
            # other roundings than the later ones, and the run being matched was past it.
            F.cross_entropy(model(x_all[:1]), y_all[:1]).backward()
        opt.zero_grad(set_to_none=True)
        state = torch.load(args.resume, weights_only=False)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        trainer.steps, plan.epoch, plan.cursor = state["steps"], state["epoch"], state["cursor"]
        plan._order()
        set_lr(opt, opt.param_groups[0]["lr"] * world / state["world"])

    step_log.log("ready", step=trainer.steps)
    failing = arm_failure(args, model, store, elastic_hsdp, step_log)
    n_params = sum(p.numel() for p in model.parameters())
    layout = f"HSDP {world // args.hsdp} x {args.hsdp}" if args.hsdp else "DDP"
    say(f"train_elastic: {world} ranks ({layout}), backend {args.backend}, {args.model} "
        f"({n_params} parameters), batch {args.batch} per rank, SGD lr {args.lr} momentum "
        f"{args.momentum}, {'synthetic data' if args.synthetic else args.data}")
    start = time.perf_counter()
    stop_at = []
    layout_before = None
    while not args.steps or trainer.steps < args.steps:
        if stop_step(args, stop_at) is not None and trainer.steps >= stop_at[0]:
            break
        batch = plan.batch(dist.get_rank(), dist.get_world_size())
        if batch is None:
            break
        if trainer.steps == args.fail_step and args.save_before_failure and not trainer.changes:
            if args.hsdp:
                elastic_hsdp.save_shards(args.save_before_failure, model, opt, trainer, plan,
                                         mesh)
            elif dist.get_rank() == 0:
                torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                            "steps": trainer.steps, "epoch": plan.epoch, "cursor": plan.cursor,
                            "world": dist.get_world_size()}, args.save_before_failure)
            dist.barrier()
        if (trainer.steps == args.fail_step and args.await_spares and first_life()
                and not trainer.changes):  # not again when the failed step is dealt again
            await_spares(args)
        if trainer.steps == args.await_at:
            await_replacements(args, trainer, say)
        failing(trainer.steps)
        try:
            loss = trainer.step(lambda: F.cross_entropy(model(x_all[batch]), y_all[batch]))
        except elastic.Removed as e:
            print(f"train_elastic: {e}", flush=True)
            os._exit(4)  # the group is unusable here: no orderly shutdown to wait for
        if loss is None:
            continue  # discarded: the group shrank; the batch is dealt again
        plan.commit(dist.get_world_size())
        if (trainer.steps == 2 and not trainer.changes and not args.hsdp and not args.resume
                and first_life()):
            layout_before = bucket_sizes(model)  # DDP rebuilt them in step 1's forward
        step_log.log("commit", step=trainer.steps, world=dist.get_world_size(),
                     rank=dist.get_rank())
        report(args, store, recovering, say)
        if trainer.steps % args.log_every == 0:
            say(f"epoch {plan.epoch} step {trainer.steps} loss {loss.item():.4f}")
    await_replacements(args, trainer, say)
    report(args, store, recovering, say)
    elapsed = time.perf_counter() - start

    world = dist.get_world_size()
    accuracy = test_accuracy(model, test_set, dist.get_rank(), world)
    last_tensors = []
    if args.hsdp:
        differing = ranks_with_other_values(elastic_hsdp.all_parameters(model), last_tensors)
    else:
        differing = ranks_with_other_parameters(model, last_tensors)
    say(f"{trainer.steps} steps committed, {len(trainer.changes)} membership change(s), "
        f"{elapsed:.1f} s in all")
    say(f"test accuracy: {accuracy * 100:.2f} %")
    if dist.get_rank() == 0:
        step_log.log("accuracy", accuracy=accuracy, step=trainer.steps)
    if not args.hsdp:
        say(buckets_check(model, layout_before, world))
    if differing == 0:
        say(f"parameters: bit-identical on all {world} ranks")
    else:
        say(f"parameters: {differing} of {world} ranks differ from rank 0")
    if args.save:
        state = elastic_hsdp.final_state(model) if args.hsdp else model.module.state_dict()
        if dist.get_rank() == 0:
            torch.save(state, args.save)
    del model, trainer
    dist.destroy_process_group()
    del last_tensors
    sys.exit(0 if differing == 0 else 3)


if __name__ == "__main__":
    main()

"""chorus.async_training on the emulated cluster: time to a test accuracy, final accuracy and bytes
per step of examples/torch/train_async.py for DDP and every asynchronous setting, one after the
other, at each link rate and host count, and a table (Markdown and JSON).

    python bench/torch/async_bench.py --build BUILD [--hosts 2,4] [--rates 100mbit,1gbit] \\
        [--models mlp,cnn] [--settings sync,diloco-32,...] [--out DIR]        # root

Run it with the torch's Python the build was configured with (BUILD/python holds the package).
The method is bench/compress/run.sh's (docs/performance-log.md, "Less bandwidth: compression and
DiLoCo"): one epoch of Fashion-MNIST, batch 64 per rank, Adam at lr 1e-3 (DiLoCo's inner
optimizer too; outer Nesterov SGD lr 0.7, momentum 0.9), one rank per emulated host
(scripts/cluster run-each: every host link shaped to the rate, both ways), the test set
evaluated every --eval-every steps (each rank its own replica on its share of the test set),
times being training time with the evaluations left out. Time to the target is the first
evaluation at or above it. Settings:

  sync                  DistributedDataParallel on the chorus backend
  sync-gloo             the same on gloo
  delayed               DelayedUpdates
  localsgd-H            LocalSGD(sync_every=H)
  diloco-H              DiLoCo(sync_every=H)
  diloco-H-stream       DiLoCo(sync_every=H, fragments=2, overlap=True)
  diloco-H-int8         DiLoCo(sync_every=H, compress="int8") (also -bf16; -stream-int8 both)
  ...-limitX            with divergence_limit=X (needs --check-every)
  torchft-localsgd-H    torchft's LocalSGD (torchft.local_sgd; bench/torch/torchft_async.py:
                        the same model, data, batch, optimizers and evaluations, each rank a
                        replica group of one under torchft's Manager, the lighthouse in rank 0's
                        process, torchft's ProcessGroupGloo between them)
  torchft-diloco-H      torchft's DiLoCo (outer Nesterov SGD lr 0.7, momentum 0.9);
                        -stream: 2 fragments, fragment_sync_delay=1 (torchft's streaming DiLoCo)
  torchft-...-chorus    the same on chorus.torchft.ProcessGroupChorus instead of gloo
                        (torchft-...: torchft beside the torch, scripts/install-torch2 --torchft)

--local runs the ranks on this host under chorus-run instead (no shaping; folders
<model>-n<N>-local): for divergence curves (--check-every K), which do not depend on the link.

Columns: bytes/step is what the wrappers count (rank 0, as a ring algorithm sends it; DDP: the
gradients' all-reduce), wire/step what rank 0's host interface sent during the run
(bench/compress/tx_wrap.sh: headers, the start-up broadcast, evaluations and the final
synchronisation included) over the steps. Every run leaves OUT/<model>-n<N>-<rate>/<setting>.
{log,json} (the JSON is the example's --results: evaluations and divergence history); the tables
go to OUT/table.md and OUT/table.json.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(REPO, "examples", "torch", "train_async.py")
TORCHFT_TRAINER = os.path.join(HERE, "torchft_async.py")
TX_WRAP = os.path.join(REPO, "bench", "compress", "tx_wrap.sh")
CLUSTER = os.path.join(REPO, "scripts", "cluster")
DEFAULT_SETTINGS = ("sync,delayed,localsgd-8,localsgd-32,diloco-32,diloco-128,diloco-32-stream,"
                    "diloco-128-stream")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True, help="build folder (BUILD/python: the package)")
    p.add_argument("--hosts", default="2")
    p.add_argument("--rates", default="100mbit")
    p.add_argument("--models", default="mlp")
    p.add_argument("--settings", default=DEFAULT_SETTINGS)
    p.add_argument("--out", default=os.path.join(
        REPO, "bench", "results", "async-" + time.strftime("%Y%m%d-%H%M", time.gmtime())))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: epochs)")
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--target", type=float, default=0.85)
    p.add_argument("--check-every", type=int, default=0,
                   help="divergence every K steps in the asynchronous settings (0: never)")
    p.add_argument("--timeout", type=int, default=1200, help="seconds per run")
    p.add_argument("--prefix", default="asyncb", help="CHORUS_CLUSTER_PREFIX of the cluster")
    p.add_argument("--local", action="store_true",
                   help="chorus-run on this host, no cluster (divergence curves)")
    p.add_argument("--table-only", action="store_true", help="tables from OUT's results only")
    return p.parse_args()


def torchft_setting_args(setting):
    """torchft_async.py's arguments for a torchft-... setting name (see the help)."""
    parts = setting.split("-")[1:]
    args = []
    if parts and parts[-1] == "chorus":
        args += ["--pg", "chorus"]
        parts = parts[:-1]
    if len(parts) >= 2 and parts[0] in ("localsgd", "diloco") and parts[1].isdigit():
        args += ["--mode", parts[0], "--sync-every", parts[1]]
        if parts[2:] == ["stream"] and parts[0] == "diloco":
            return args + ["--fragments", "2", "--overlap"]
        if not parts[2:]:
            return args
    raise ValueError(f"setting {setting!r}: torchft-localsgd-H or torchft-diloco-H[-stream], "
                     "optionally -chorus")


def setting_program(setting):
    """(the program, its arguments) for a setting name."""
    if setting.startswith("torchft-"):
        return TORCHFT_TRAINER, torchft_setting_args(setting)
    return EXAMPLE, setting_args(setting)


def setting_args(setting):
    """The example's arguments for a setting name (see the help)."""
    parts = setting.split("-")
    mode, rest = parts[0], parts[1:]
    args = ["--backend", "chorus"]
    if mode == "sync":
        if rest not in ([], ["gloo"]):
            raise ValueError(f"setting {setting!r}: sync or sync-gloo")
        return ["--backend", rest[0] if rest else "chorus", "--mode", "sync"]
    limits = [x for x in rest if x.startswith("limit")]
    rest = [x for x in rest if not x.startswith("limit")]
    for x in limits:
        args += ["--divergence-limit", str(float(x[len("limit"):]))]
    if mode == "delayed" and not rest:
        return args + ["--mode", "delayed"]
    if mode in ("localsgd", "diloco") and rest and rest[0].isdigit():
        args += ["--mode", mode, "--sync-every", rest[0]]
        for extra in rest[1:]:
            if mode == "diloco" and extra == "stream":
                args += ["--fragments", "2", "--overlap"]
            elif mode == "diloco" and extra in ("bf16", "int8"):
                args += ["--compress", extra]
            else:
                raise ValueError(f"setting {setting!r}: unknown part {extra!r}")
        return args
    raise ValueError(f"setting {setting!r}: see --help for the settings")


def run_cell(args, n, rate, model, setting, folder):
    log = os.path.join(folder, setting + ".log")
    results = os.path.join(folder, setting + ".json")
    if os.path.exists(results):
        os.remove(results)
    program, program_args = setting_program(setting)
    example = [sys.executable, program, "--model", model, "--epochs", str(args.epochs),
               "--steps", str(args.steps), "--batch", "64", "--optimizer", "adam", "--lr",
               "1e-3", "--eval-every", str(args.eval_every), "--target-accuracy",
               str(args.target), "--results", results, "--log-every", "1000",
               "--timeout", "300"] + program_args
    if args.check_every and not setting.startswith(("sync", "torchft")):
        example += ["--check-every", str(args.check_every)]
    port = 29500 + (os.getpid() + len(os.listdir(folder))) % 2000
    # One rank per emulated host; rank 0's host serves torch's store.
    rank_env = ('RANK=$CLUSTER_RANK WORLD_SIZE=$CLUSTER_SIZE LOCAL_RANK=0 '
                'MASTER_ADDR=$CLUSTER_HOST0 MASTER_PORT=' + str(port) + ' '
                'GLOO_SOCKET_IFNAME=$CLUSTER_IFNAME CHORUS_IFNAME=$CLUSTER_IFNAME exec "$0" "$@"')
    cmd = [CLUSTER, "run-each", str(n), "--rate", rate, "--timeout", str(args.timeout), "--",
           TX_WRAP, "sh", "-c", rank_env] + example
    if args.local:
        cmd = ["timeout", str(args.timeout), os.path.join(os.path.abspath(args.build), "tools",
                                                          "chorus-run", "chorus-run"),
               "-n", str(n), "--"] + example
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               CHORUS_CLUSTER_PREFIX=args.prefix, RUST_LOG="warn",  # torchft's own logging
               PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    with open(log, "w") as f:
        f.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} load {load:.2f}\n"
                f"# {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
        f.write(f"# exit {rc}, load {os.getloadavg()[0]:.2f}\n")
    took = time.monotonic() - t0
    row = {"model": model, "hosts": n, "rate": rate, "setting": setting, "exit": rc,
           "load": load, "run_s": took}
    text = open(log).read()
    wire = re.search(r"^tx_bytes rank 0: (\d+)", text, re.M)
    row["wire_bytes"] = int(wire.group(1)) if wire else None
    if rc == 0 and os.path.exists(results):
        with open(results) as f:
            r = json.load(f)
        row.update(steps=r["steps"], train_s=r["train_s"], bytes_per_step=r["bytes_per_step"],
                   final_accuracy=r["final_accuracy"], target=r["target"],
                   accuracy_before_sync=r["accuracy_before_sync"],
                   bit_identical=r["bit_identical"], torch=r["torch"])
        if row["wire_bytes"] is not None:
            row["wire_per_step"] = row["wire_bytes"] / max(r["steps"], 1)
    tgt = row.get("target")
    print(f"{model} n={n} {rate} {setting}: exit {rc} in {took:.0f} s, "
          + (f"target at step {tgt['step']} after {tgt['train_s']:.1f} s, " if tgt else
             "target not reached, " if rc == 0 else f"see {log}, ")
          + (f"final {row['final_accuracy'] * 100:.2f} %" if "final_accuracy" in row else ""),
          flush=True)
    return row


def fmt_bytes(x):
    if x is None:
        return ""
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if x >= size:
            return f"{x / size:.3g} {unit}" if x < 100 * size else f"{x / size:.0f} {unit}"
    return f"{x:.0f} B"


def tables(rows, target):
    """Markdown: one table per (model, hosts, rate), ratios against that group's sync."""
    out = []
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["hosts"], r["rate"]), []).append(r)
    for (model, n, rate), group in groups.items():
        sync = next((r for r in group if r["setting"] == "sync" and r.get("target")), None)
        sync_bytes = next((r.get("wire_per_step") for r in group if r["setting"] == "sync"), None)
        out += [f"**{model.upper()}, {n} hosts, {rate}**", "",
                f"| setting | time to {target * 100:.0f}% (s) | vs sync | training (s) | "
                "bytes/step | wire/step | wire vs sync | final acc (%) | load at start |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in group:
            if "final_accuracy" not in r:
                out.append(f"| {r['setting']} | failed (exit {r['exit']}) | | | | | | | "
                           f"{r['load']:.1f} |")
                continue
            t = r.get("target")
            reach = f"{t['train_s']:.1f} (step {t['step']})" if t else "not reached"
            ratio = f"{sync['target']['train_s'] / t['train_s']:.1f}x" if t and sync else ""
            wire = r.get("wire_per_step")
            wire_ratio = f"{sync_bytes / wire:.1f}x" if wire and sync_bytes else ""
            out.append(f"| {r['setting']} | {reach} | {ratio} | {r['train_s']:.1f} | "
                       f"{fmt_bytes(r['bytes_per_step'])} | {fmt_bytes(wire)} | {wire_ratio} | "
                       f"{r['final_accuracy'] * 100:.2f} | {r['load']:.1f} |")
        out.append("")
    return "\n".join(out)


def main():
    args = parse_args()
    args.out = os.path.abspath(args.out)
    if args.local:
        args.rates = "local"
    if any("limit" in s for s in args.settings.split(",")) and not args.check_every:
        sys.exit("async_bench.py: a setting with a divergence limit needs --check-every K")
    os.makedirs(args.out, exist_ok=True)
    rows_path = os.path.join(args.out, "table.json")
    rows = []
    if os.path.exists(rows_path):
        with open(rows_path) as f:
            rows = json.load(f)["rows"]
    settings = [s for s in args.settings.split(",") if s]
    for s in settings:
        setting_program(s)  # a bad name fails before anything runs
    if not args.table_only:
        if os.geteuid() != 0 and not args.local:
            sys.exit("async_bench.py: scripts/cluster needs root (network namespaces)")
        print(f"async_bench.py: results in {args.out}", flush=True)
        try:
            for model in args.models.split(","):
                for n in (int(x) for x in args.hosts.split(",")):
                    for rate in args.rates.split(","):
                        folder = os.path.join(args.out, f"{model}-n{n}-{rate}")
                        os.makedirs(folder, exist_ok=True)
                        for s in settings:
                            row = run_cell(args, n, rate, model, s, folder)
                            rows = [r for r in rows if (r["model"], r["hosts"], r["rate"],
                                                        r["setting"]) !=
                                    (model, n, rate, s)] + [row]
                            with open(rows_path, "w") as f:
                                json.dump({"command": sys.argv, "target": args.target,
                                           "rows": rows}, f, indent=1)
        finally:
            if not args.local:
                subprocess.run([CLUSTER, "down"], env=dict(os.environ,
                                                           CHORUS_CLUSTER_PREFIX=args.prefix),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    md = tables(rows, args.target)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(md)
    print("\n" + md)


if __name__ == "__main__":
    main()

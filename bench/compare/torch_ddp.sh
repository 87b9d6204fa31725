#!/usr/bin/env bash
# The DDP example (examples/torch/train_ddp.py), one epoch of Fashion-MNIST, batch 64 per rank,
# backends gloo and chorus alternating in one run: time per step (the slowest rank's mean after
# the warm-up) and test accuracy, per model and world size, on one host (chorus-run) and on the
# emulated cluster (scripts/cluster run-each, one rank per host, RATE per host link; needs root).
#   bench/compare/torch_ddp.sh build                     # SETTINGS="host cluster" NS="2 4"
# SYSTEMS="gloo chorus nocomm": nocomm is the chorus run inside DDP's no_sync() (no gradient
# all-reduce), the compute-only floor of a step.
# Results: $RESULTS_DIR/ddp-<setting>-n<N>-<model>-r<round>-<backend>.log and a table on stdout.
set -euo pipefail
build=${1:?usage: torch_ddp.sh BUILD_DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$build" && pwd)
SETTINGS=${SETTINGS:-"host cluster"}
NS=${NS:-"2 4"}
MODELS=${MODELS:-"mlp cnn"}
ROUNDS=${ROUNDS:-1}
RATE=${RATE:-1gbit}
EPOCHS=${EPOCHS:-1}
EXTRA=${EXTRA:-}
SYSTEMS=${SYSTEMS:-"gloo chorus"}
RESULTS_DIR=${RESULTS_DIR:-bench/results/torch-ddp}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$RESULTS_DIR"
example=$repo/examples/torch/train_ddp.py
export PYTHONPATH=$build/python OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

for setting in $SETTINGS; do
  for n in $NS; do
    if [[ $setting == cluster ]]; then "$repo/scripts/cluster" up "$n" --rate "$RATE" > /dev/null; fi
    for model in $MODELS; do
      for round in $(seq 1 "$ROUNDS"); do
        for backend in $SYSTEMS; do
          log=$RESULTS_DIR/ddp-$setting-n$n-$model-r$round-$backend.log
          echo "== $setting n=$n $model round $round: $backend (load $(cut -d' ' -f1 /proc/loadavg))"
          args=(--backend "$backend" --model "$model" --epochs "$EPOCHS" $EXTRA)
          if [[ $backend == nocomm ]]; then
            args=(--backend chorus --no-communication --model "$model" --epochs "$EPOCHS" $EXTRA)
          fi
          if [[ $setting == host ]]; then
            timeout "$RUN_TIMEOUT" "$build/tools/chorus-run/chorus-run" -n "$n" -- \
              "$PYTHON" "$example" "${args[@]}" > "$log" 2>&1 || echo "   failed: $log"
          else
            # One rank per emulated host; rank 0's host serves torch's store.
            port=$((29600 + RANDOM % 1000))
            timeout "$RUN_TIMEOUT" "$repo/scripts/cluster" run-each "$n" --timeout "$RUN_TIMEOUT" -- \
              env PYTHONPATH="$PYTHONPATH" sh -c 'RANK=$CLUSTER_RANK WORLD_SIZE=$CLUSTER_SIZE \
                LOCAL_RANK=0 MASTER_ADDR=$CLUSTER_HOST0 MASTER_PORT='"$port"' \
                GLOO_SOCKET_IFNAME=$CLUSTER_IFNAME CHORUS_IFNAME=$CLUSTER_IFNAME exec "$0" "$@"' \
              "$PYTHON" "$example" "${args[@]}" > "$log" 2>&1 || echo "   failed: $log"
          fi
          grep -E "time per step|test accuracy|parameters:" "$log" | sed 's/^/   /' || true
        done
      done
    done
  done
  if [[ $setting == cluster ]]; then "$repo/scripts/cluster" down > /dev/null; fi
done

# Table: best round per cell (lowest slowest-rank step time).
"$PYTHON" - "$RESULTS_DIR" <<'PY'
import glob, os, re, sys
best = {}
for path in glob.glob(os.path.join(sys.argv[1], "ddp-*.log")):
    m = re.match(r"ddp-(\w+)-n(\d+)-(\w+)-r\d+-(\w+)\.log", os.path.basename(path))
    text = open(path).read()
    t = re.search(r"([\d.]+) ms \(slowest rank\)", text)
    a = re.search(r"test accuracy: ([\d.]+) %", text)
    same = "bit-identical" in text
    if not t:
        continue
    key = (m.group(1), int(m.group(2)), m.group(3))
    cur = best.setdefault(key, {})
    ms = float(t.group(1))
    if m.group(4) not in cur or ms < cur[m.group(4)][0]:
        cur[m.group(4)] = (ms, float(a.group(1)) if a else float("nan"), same)
print("| setting | N | model | gloo ms/step | chorus ms/step | gloo / chorus | no-comm ms/step | gloo acc % | chorus acc % | identical (chorus) |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
for key in sorted(best):
    g, c, z = best[key].get("gloo"), best[key].get("chorus"), best[key].get("nocomm")
    if not g or not c:
        continue
    floor = f"{z[0]:.2f}" if z else ""
    print(f"| {key[0]} | {key[1]} | {key[2]} | {g[0]:.2f} | {c[0]:.2f} | {g[0] / c[0]:.2f}x | {floor} | "
          f"{g[1]:.2f} | {c[1]:.2f} | {'yes' if c[2] else 'NO'} |")
PY

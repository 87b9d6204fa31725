#!/usr/bin/env bash
# Less bandwidth, measured: one epoch of Fashion-MNIST on the emulated cluster for every
# compression setting of chorus-train and for PyTorch DDP on gloo (with and without torch's
# hooks), one setting after the other, the test accuracy every EVAL_EVERY steps. See README.md.
#
#   bench/compress/run.sh [BUILD_DIR]            (root: scripts/cluster)
#
# Environment (defaults in brackets):
#   OUT        results folder [bench/results/compress-<UTC date>]
#   HOSTS      emulated hosts, one rank each ["2"]      RATES   link rates ["100mbit"]
#   MODELS     mlp cnn ["mlp"]                          EPOCHS  [1]
#   SETTINGS   ["none bf16 int8 powersgd:1 powersgd:2 powersgd:4 diloco:8 diloco:32 diloco:128
#               ddp ddp:powersgd:1 ddp:fp16"]; chorus-train: none, bf16, fp16, int8, powersgd:R,
#               diloco:H; DDP on gloo: ddp (no hook), ddp:HOOK (ddp_train.py --hook HOOK:
#               fp16, bf16, powersgd:R, chorus:KIND)
#   EVAL_EVERY [20]   TARGET  stop at this test accuracy (0: run the epochs) [0]
#   MAX_STEPS  [0: the epochs]   LIMIT  training samples (0: all) [0]   BATCH  per rank [64]
#   THREADS    compute threads per rank [1]   TIMEOUT  seconds per run [1200]
#   OUTER_LR, OUTER_MOMENTUM   DiLoCo's outer SGD [0.7, 0.9]
# Every run leaves <OUT>/<model>-n<N>-<rate>/<setting>.{csv,log}; the log starts with `uptime`.
# bench/compress/table.py <OUT> makes the tables and the plots.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
out=${OUT:-$repo/bench/results/compress-$(date -u +%Y%m%d-%H%M)}
hosts=${HOSTS:-2} rates=${RATES:-100mbit} models=${MODELS:-mlp} epochs=${EPOCHS:-1}
settings=${SETTINGS:-none bf16 int8 powersgd:1 powersgd:2 powersgd:4 diloco:8 diloco:32 diloco:128 ddp ddp:powersgd:1 ddp:fp16}
eval_every=${EVAL_EVERY:-20} target=${TARGET:-0} max_steps=${MAX_STEPS:-0} limit=${LIMIT:-0}
batch=${BATCH:-64} threads=${THREADS:-1} timeout=${TIMEOUT:-1200}
outer_lr=${OUTER_LR:-0.7} outer_momentum=${OUTER_MOMENTUM:-0.9}
export CHORUS_CLUSTER_PREFIX=${CHORUS_CLUSTER_PREFIX:-compress}
train=$build/trainer/chorus-train
[[ -x $train ]] || { echo "run.sh: $train not built" >&2; exit 2; }
mkdir -p "$out"
echo "results: $out"

common=(--model MODEL --epochs "$epochs" --batch "$batch" --threads "$threads" --limit "$limit"
        --eval-every "$eval_every" --max-steps "$max_steps")
[[ $target == 0 ]] || common+=(--target-accuracy "$target")

run_one() {  # N RATE MODEL SETTING DIR
  local n=$1 rate=$2 model=$3 setting=$4 dir=$5 name args=() cmd
  name=${setting//:/-}
  args=("${common[@]/MODEL/$model}")
  {
    echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
    echo "# setting $setting, $n hosts at $rate, $model"
  } >"$dir/$name.log"
  case $setting in
    ddp | ddp:*)
      local hook=none store
      [[ $setting == ddp:* ]] && hook=${setting#ddp:}
      store=$(mktemp -d)
      cmd=(env DDP_STORE_DIR="$store" PYTHONPATH="$build/python" OMP_NUM_THREADS="$threads"
           /usr/bin/python3 "$repo/bench/compare/ddp_train.py" "${args[@]}" --local-steps 2
           --hook "$hook" --metrics "$dir/$name.csv")
      "$repo/scripts/cluster" run-each "$n" --rate "$rate" --timeout "$timeout" -- \
        "$here/tx_wrap.sh" "${cmd[@]}" >>"$dir/$name.log" 2>&1
      local rc=$?
      rm -rf "$store"
      ;;
    *)
      if [[ $setting == diloco:* ]]; then
        args+=(--mode diloco --sync-every "${setting#diloco:}" --outer-lr "$outer_lr"
               --outer-momentum "$outer_momentum")
      else
        args+=(--compress "$setting")
      fi
      "$repo/scripts/cluster" run "$n" --rate "$rate" --timeout "$timeout" -- \
        "$here/tx_wrap.sh" "$train" "${args[@]}" --no-progress --metrics "$dir/$name.csv" \
        >>"$dir/$name.log" 2>&1
      local rc=$?
      ;;
  esac
  echo "# exit $rc, $(date -u +%FT%TZ) uptime: $(uptime)" >>"$dir/$name.log"
  printf '%-8s %-4s %-8s %-14s exit %d  %s\n' "$model" "$n" "$rate" "$setting" "$rc" \
    "$(grep -m1 -E '^(final test accuracy|target accuracy)' "$dir/$name.log" || true)"
}

for model in $models; do
  for n in $hosts; do
    for rate in $rates; do
      dir=$out/$model-n$n-$rate
      mkdir -p "$dir"
      for setting in $settings; do
        run_one "$n" "$rate" "$model" "$setting" "$dir"
      done
    done
  done
done
"$repo/scripts/cluster" down >/dev/null 2>&1 || true
/usr/bin/python3 "$here/table.py" "$out" || true

#!/usr/bin/env bash
# chorus-train vs PyTorch DDP (gloo) with the same settings, interleaved, and a table.
#
#   bench/compare/train_compare.sh [BUILD]            one host, N = 2 4, MLP (BUILD: a build dir
#                                                     with trainer/chorus-train; default build-train)
#   SETTING=cluster bench/compare/train_compare.sh    emulated cluster (scripts/cluster, prefix
#                                                     "ddp"), one rank per host, RATE 1gbit, CNN,
#                                                     N = 2; needs root; the cluster is taken down
#
# Environment: NS (ranks; default "2 4", cluster "2"), MODEL (mlp; cluster cnn), LIMIT (first N
# training samples; default 16384, cluster 4096; 0 = all), EPOCHS (1), BATCH (64 per rank),
# OPTIMIZER (adam, chorus-train's default), LR (1e-3), BUCKET_MB (25, both systems' default),
# THREADS (intra-op threads per rank, both systems; default cores / N, as all ranks share this
# machine's cores, also on the emulated cluster), ROUNDS (1), RATE (1gbit), OUT (result dir).
#
# Definitions (the same for both systems; rank 0; steps 1..SKIP left out, SKIP=5):
#   step ms    forward + backward + waiting for the gradient all-reduces, i.e. without batch
#              preparation and optimizer step. chorus-train: compute_s + exposed_comm_s from its
#              --metrics CSV. DDP: perf_counter around forward + loss.backward() (DDP's reducer
#              waits for its buckets at the end of backward).
#   exposed ms chorus-train: exposed_comm_s (time blocked in Work::wait in waitGradients).
#              DDP: step ms minus the same forward+backward on a plain copy of the module without
#              DDP, same shard, run by all ranks at once after training (ddp_train.py).
#   epoch ms   wall time of the epoch / steps (all steps, data and optimizer included).
#   acc        final test accuracy (10,000 test images).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$repo/build-train}" && pwd)
setting=${SETTING:-local}
case "$setting" in
  local)
    ns=${NS:-2 4}
    model=${MODEL:-mlp}
    limit=${LIMIT:-16384}
    ;;
  cluster)
    ns=${NS:-2}
    model=${MODEL:-cnn}
    limit=${LIMIT:-4096}
    ;;
  *) echo "train_compare: SETTING must be local or cluster" >&2 && exit 2 ;;
esac
epochs=${EPOCHS:-1} batch=${BATCH:-64} optimizer=${OPTIMIZER:-adam} lr=${LR:-1e-3}
bucket=${BUCKET_MB:-25} rounds=${ROUNDS:-1} rate=${RATE:-1gbit}
out=${OUT:-$repo/build-compare/train-$setting-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
train=$build/trainer/chorus-train
run=$build/tools/chorus-run/chorus-run
[[ -x $train ]] || { echo "train_compare: $train not found" >&2; exit 1; }
py=/usr/bin/python3
cores=$(nproc)

export CHORUS_CLUSTER_PREFIX=ddp CHORUS_BUILD_DIR=$build
if [[ $setting == cluster ]]; then
  trap '"$repo/scripts/cluster" down >/dev/null 2>&1 || true' EXIT
fi

common=(--model "$model" --epochs "$epochs" --batch "$batch" --optimizer "$optimizer" --lr "$lr"
  --bucket-mb "$bucket" --limit "$limit")
echo "# train_compare: setting $setting, N = $ns, ${common[*]}, rounds $rounds$(
  [[ $setting == cluster ]] && echo ", rate $rate, one rank per host"); results in $out"

for n in $ns; do
  threads=${THREADS:-$((cores / n > 0 ? cores / n : 1))}
  for ((r = 1; r <= rounds; r++)); do
    tag=n$n-r$r
    echo "## N=$n round $r: chorus-train"
    if [[ $setting == local ]]; then
      OPENBLAS_NUM_THREADS=1 "$run" -n "$n" -- "$train" "${common[@]}" --threads "$threads" \
        --no-progress --metrics "$out/chorus-$tag.csv" >"$out/chorus-$tag.log" 2>&1
    else
      "$repo/scripts/cluster" run "$n" --rate "$rate" --timeout 900 -- env OPENBLAS_NUM_THREADS=1 \
        "$train" "${common[@]}" --threads "$threads" --no-progress \
        --metrics "$out/chorus-$tag.csv" >"$out/chorus-$tag.log" 2>&1
    fi
    grep -E "^(epoch|final|param)" "$out/chorus-$tag.log" | sed 's/^/   /'
    echo "## N=$n round $r: pytorch ddp (gloo)"
    store=$(mktemp -d /tmp/ddp-train-store.XXXXXX)
    if [[ $setting == local ]]; then
      OPENBLAS_NUM_THREADS=1 "$run" -n "$n" -- env DDP_STORE_DIR="$store" GLOO_SOCKET_IFNAME=lo \
        "$py" "$here/ddp_train.py" "${common[@]}" --threads "$threads" \
        --json "$out/ddp-$tag.json" >"$out/ddp-$tag.log" 2>&1
    else
      "$repo/scripts/cluster" run-each "$n" --rate "$rate" --timeout 900 -- env \
        OPENBLAS_NUM_THREADS=1 DDP_STORE_DIR="$store" "$py" "$here/ddp_train.py" "${common[@]}" \
        --threads "$threads" --json "$out/ddp-$tag.json" >"$out/ddp-$tag.log" 2>&1
    fi
    rm -rf "$store"
    grep -E "^(epoch|final|step|param)" "$out/ddp-$tag.log" | sed 's/^/   /'
  done
done

"$py" - "$out" "$setting" "$model" "$limit" <<'EOF'
import csv, glob, json, os, re, statistics, sys
out, setting, model, limit = sys.argv[1:5]
SKIP = 5
rows = []
for log in sorted(glob.glob(os.path.join(out, "chorus-n*-r*.log"))):
    tag = os.path.basename(log)[len("chorus-"):-len(".log")]
    n = int(tag[1:].split("-")[0])
    text = open(log).read()
    c = {}
    try:
        m = list(csv.DictReader(open(os.path.join(out, f"chorus-{tag}.csv"))))
        s = m[min(SKIP, len(m) - 1):]
        c["step"] = 1e3 * statistics.mean(float(x["compute_s"]) + float(x["exposed_comm_s"]) for x in s)
        c["exposed"] = 1e3 * statistics.mean(float(x["exposed_comm_s"]) for x in s)
        # epoch seconds from samples/s (the printed seconds have 0.1 s resolution)
        total = int(limit) or 60000
        samples = -(-total // n) * n
        ep = sum(samples / float(v) for v in re.findall(r"^epoch \d+: .* ([\d.]+) samples/s", text, re.M))
        c["epoch"] = 1e3 * ep / len(m)
        c["acc"] = float(re.search(r"final test accuracy ([\d.]+)%", text).group(1))
    except Exception as e:  # a failed run shows as FAIL
        c = {}
    d = {}
    try:
        j = json.load(open(os.path.join(out, f"ddp-{tag}.json")))
        d = {"step": j["step_ms"], "exposed": j["exposed_comm_ms"],
             "epoch": j["epoch_ms_per_step"], "acc": 100 * j["test_accuracy"]}
    except Exception:
        pass
    rows.append((n, tag, c, d))

def f(v, fmt="%.2f"):
    return fmt % v if v is not None else "FAIL"

print(f"\n# {setting}, model {model}, --limit {limit}; ms per step on rank 0, steps 1..{SKIP} left out")
print("| N | round | system | step (ms) | exposed comm (ms) | epoch wall / step (ms) | test acc (%) | Chorus/DDP step | Chorus/DDP epoch |")
print("|---|---|---|---|---|---|---|---|---|")
for n, tag, c, d in rows:
    ratio = f(c["step"] / d["step"]) if c and d else "-"
    eratio = f(c["epoch"] / d["epoch"]) if c and d else "-"
    for name, x in (("chorus-train", c), ("pytorch-ddp-gloo", d)):
        print(f"| {n} | {tag.split('-r')[1]} | {name} | {f(x.get('step'))} | {f(x.get('exposed'))} | "
              f"{f(x.get('epoch'))} | {f(x.get('acc'))} | {ratio if name == 'chorus-train' else ''} | {eratio if name == 'chorus-train' else ''} |")
EOF

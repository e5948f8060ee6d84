#!/usr/bin/env bash
# Paired engine-path runs: swerl serve with bf16-rounded weights samples,
# swerl run's float32 learner trains, once with each --rollout-correction,
# same seed. Usage: paired.sh SWERL REPO OUTDIR "CORRECTION…" [run flags…]
# Writes OUTDIR/<correction>/ (the run's output) and prints one line per
# step: version, mean reward, rollout_kl, is_weight_max, is_truncated_frac,
# grad_norm, entropy.
set -euo pipefail
swerl=$1 repo=$2 outdir=$3 corrections=$4
shift 4
mkdir -p "$outdir"
for corr in $corrections; do
  out="$outdir/$corr"
  rm -rf "$out"
  mkdir -p "$out"
  "$swerl" model init --out "$out/base" >/dev/null
  "$swerl" serve --model "$out/base" --addr 127.0.0.1:0 --bf16-weights --poll 0 --metrics-addr "" 2>"$out/serve.log" &
  spid=$!
  for _ in $(seq 300); do grep -q " on http://" "$out/serve.log" && break; sleep 0.1; done
  url=$(grep -o 'on http://[^ ]*/v1' "$out/serve.log" | head -1 | cut -c4-)
  start=$(date +%s)
  "$swerl" run --repo "$repo" --model "$out/base" --policy "$url?engine=sglang" --out "$out/run" \
    --rollout-correction "$corr" --metrics-addr "" "$@" >"$out/run.log" 2>&1 || echo "run $corr failed: see $out/run.log"
  echo "== $corr ($(( $(date +%s) - start )) s)"
  kill $spid; wait $spid 2>/dev/null || true
  python3 - "$out/run" <<'PY'
import json, glob, sys, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "trained", "v*.json"))):
    r = json.load(open(f))
    if not r.get("objective"):
        continue
    print("v%-4d rollout_kl %.3g is_weight_max %.4f is_truncated_frac %.4f grad_norm %.4f entropy %.3f tokens %d" % (
        r["version"], r["rollout_kl"], r["is_weight_max"], r["is_truncated_frac"], r["grad_norm"], r["entropy"], r["rollout_tokens"]))
PY
  grep -E "^(rl step|step|eval)|mean reward|reward" "$out/run.log" | tail -40 || true
done

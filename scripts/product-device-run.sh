#!/usr/bin/env bash
# product-device-run.sh runs the product's commands on a card, end to end at
# real shapes (issue #34), each under its own time limit, with their logs in
# OUTDIR. Build here first:
#
#	eval "$(scripts/cuda-env.sh)"; mkdir -p .dev
#	go build -tags cuda -o .dev/swerl ./cmd/swerl
#	go run ./cmd/swerl mine --repo . --out .dev/mined && cp .dev/mined/instances/*.parquet .dev/instances.parquet
#	cp scripts/product-device-run.sh .dev/
#
# then on the card machine (carry .dev):
#
#	bash .dev/product-device-run.sh .dev $OUT
#
# What it runs, each timed (the step logs end with swerl run's time split):
#   model-small.log  swerl model init --config $CFG_SMALL (qwen2.5-0.5b)
#   run-full.log     swerl run --device $DEVICE --model that --hunks=false
#                    --compact-prompt=false: a warm start of $SFT steps, then
#                    $STEPS RL steps of $BATCH instances x $GROUP completions
#   run-lora.log     the same with --lora-rank 16
#   serve.log,       swerl serve --device $DEVICE under $CONC concurrent
#   train-http.log   requests from swerl train --policy http://…
#   model-big.log,   swerl model init --config $CFG_BIG (qwen2.5-7b; about
#   learn-big.log    31 GB of host memory), then swerl learn --lora-rank 16
#                    --checkpoint-activations for $BIG_STEPS steps on the
#                    samples run-full wrote
# A dry run on a CPU: DEVICE=cpu CFG_SMALL=tiny CFG_BIG=small SFT=1 STEPS=2
# BATCH=2 GROUP=2 CONC=4 MAX_SEQ=4096 MAX_TOKENS=16 (the script needs
# only bash and coreutils).
set -uo pipefail
dir=${1:-.}
out=${2:-.}
swerl="$dir/swerl"
inst="$dir/instances.parquet"
DEVICE=${DEVICE:-cuda}
CFG_SMALL=${CFG_SMALL:-qwen2.5-0.5b}
CFG_BIG=${CFG_BIG:-qwen2.5-7b}
SFT=${SFT:-2}
STEPS=${STEPS:-5}
BATCH=${BATCH:-8}
GROUP=${GROUP:-8}
CONC=${CONC:-64}
BIG_STEPS=${BIG_STEPS:-3}
MAX_SEQ=${MAX_SEQ:-4096}
MAX_TOKENS=${MAX_TOKENS:-256}
if [ "$DEVICE" = cuda ] && [ -z "${SWERL_CUBLAS_DIR:-}" ]; then
	f=$(ls /usr/local/cuda/lib64/libcublas.so.* 2>/dev/null | head -1)
	[ -n "$f" ] || f=$(find / -xdev -name 'libcublas.so.*' 2>/dev/null | head -1)
	export LD_LIBRARY_PATH=$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
mkdir -p "$out"
rc=0
step() { # step NAME LIMIT CMD…: run CMD under a limit, log and time it
	local name=$1 limit=$2
	shift 2
	local t0=$(date +%s%N)
	timeout "$limit" "$@" >"$out/$name.log" 2>&1
	local r=$?
	local ms=$((($(date +%s%N) - t0) / 1000000))
	printf '%-12s rc=%d %d.%03ds\n' "$name" "$r" $((ms / 1000)) $((ms % 1000)) | tee -a "$out/steps.txt"
	[ $r = 0 ] || rc=$r
	return $r
}
common=(--device "$DEVICE" --instances "$inst" --hunks=false --compact-prompt=false --sft-steps "$SFT" --sft-until 0
	--steps "$STEPS" --batch "$BATCH" --group-size "$GROUP" --max-seq "$MAX_SEQ" --max-tokens "$MAX_TOKENS" --eval 0 --metrics-addr "")
step model-small 120 "$swerl" model init --config "$CFG_SMALL" --out "$out/m-small"
step run-full 240 "$swerl" run --model "$out/m-small" --out "$out/run-full" "${common[@]}"
tail -12 "$out/run-full.log"
step run-lora 240 "$swerl" run --model "$out/m-small" --out "$out/run-lora" --lora-rank 16 "${common[@]}"
tail -12 "$out/run-lora.log"
# swerl serve under CONC concurrent requests from swerl train.
"$swerl" serve --device "$DEVICE" --model "$out/m-small" --addr 127.0.0.1:0 --max-seq "$MAX_SEQ" \
	--max-concurrent "$CONC" --metrics-addr "" >"$out/serve.log" 2>&1 &
spid=$!
url=""
for _ in $(seq 600); do
	url=$(grep -o 'on http://[^ ]*/v1' "$out/serve.log" | head -1 | cut -c4-)
	[ -n "$url" ] && break
	kill -0 $spid 2>/dev/null || break
	sleep 0.1
done
if [ -n "$url" ]; then
	step train-http 240 "$swerl" train --policy "$url?concurrency=$CONC&token_ids=true" --instances "$inst" \
		--group-size "$GROUP" --max-tokens "$MAX_TOKENS" --out "$out/train-http" --metrics-addr ""
	tail -5 "$out/train-http.log"
else
	echo "serve did not start: see serve.log" | tee -a "$out/steps.txt"
	rc=1
fi
kill $spid 2>/dev/null
wait $spid 2>/dev/null
if [ "${BIG:-1}" = 1 ]; then
	step model-big 300 "$swerl" model init --config "$CFG_BIG" --out "$out/m-big" &&
		step learn-big 300 "$swerl" learn --device "$DEVICE" --model "$out/m-big" --lora-rank 16 --checkpoint-activations \
			--samples "$out/run-full/samples" --max-staleness -1 --steps "$BIG_STEPS" --max-seq "$MAX_SEQ" \
			--out "$out/learn-big" --metrics-addr ""
	tail -5 "$out/learn-big.log"
	rm -rf "$out/m-big" "$out/learn-big/checkpoints"
fi
# Keep the logs and records, not the weights.
rm -rf "$out/m-small" "$out"/run-*/checkpoints "$out"/run-*/model
exit $rc

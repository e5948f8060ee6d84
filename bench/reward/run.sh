#!/usr/bin/env bash
# Benchmark: swerl reward against the plain-Python reference scorer
# (bench/reward/reference.py, on CPython's difflib) over the shared
# conformance corpus, side by side, whole processes.
#
#   bench/reward/run.sh [REPEAT]      # default REPEAT=3 copies of the corpus
#
# Prints wall seconds and peak RSS of each run, the speed-up on one core
# (GOMAXPROCS=1, --workers 1) and on all cores, checks that both produce the
# same reward for every record (1e-9) and that they equal expected_reward,
# and the peak memory of scoring the single largest record.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeat=${1:-3}
shared=${SWERL_SHARED:-../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/swerl" ./cmd/swerl
for _ in $(seq "$repeat"); do cat "$shared"/conformance/reward_search_replace.jsonl "$shared"/conformance/reward_unidiff.jsonl; done >"$work/in.jsonl"
n=$(wc -l <"$work/in.jsonl")
echo "corpus: $n records ($(du -h "$work/in.jsonl" | cut -f1)), $(nproc) cores"

# measure NAME CMD...: runs CMD under /usr/bin/time, prints wall s and peak KiB.
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/$name.time" "$@" 2>"$work/$name.err" >/dev/null || { cat "$work/$name.err"; exit 1; }
  read -r secs kib <"$work/$name.time"
  printf '%-28s %8.2f s  %8d KiB peak RSS\n' "$name" "$secs" "$kib"
  eval "${name//-/_}_s=$secs"
}
measure python-reference python3 bench/reward/reference.py --check "$work/in.jsonl" "$work/py.jsonl"
measure swerl-1-core env GOMAXPROCS=1 "$work/swerl" reward --workers 1 --in "$work/in.jsonl" --out "$work/go1.jsonl" --progress-every 0
measure swerl-all-cores "$work/swerl" reward --in "$work/in.jsonl" --out "$work/go.jsonl" --progress-every 0

python3 - "$work/in.jsonl" "$work/py.jsonl" "$work/go1.jsonl" "$work/go.jsonl" <<'PY'
import json, sys
ins, py, g1, g = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert len(ins) == len(py) == len(g1) == len(g), "record counts differ"
bad = 0
for rec, a, b, c in zip(ins, py, g1, g):
    for got in (a, b, c):
        if abs(got["reward"] - rec["expected_reward"]) > 1e-9:
            bad += 1
    if b["reward"] != c["reward"]:
        bad += 1
print(f"identical scores: {len(ins) - bad}/{len(ins)} records agree (python, swerl 1 core, swerl all cores, expected_reward)")
sys.exit(1 if bad else 0)
PY
awk -v p="$python_reference_s" -v a="$swerl_1_core_s" -v b="$swerl_all_cores_s" 'BEGIN {
  printf "speed-up, 1 core:   %.1fx (target >= 30x)\n", p / a
  printf "speed-up, all cores: %.1fx\n", p / b }'

# The largest record alone: peak memory of each scorer on it.
python3 - "$work/in.jsonl" "$work/big.jsonl" <<'PY'
import sys
lines = open(sys.argv[1]).readlines()
big = max(lines, key=len)
open(sys.argv[2], "w").write(big)
print(f"largest record: {len(big)} bytes")
PY
measure python-largest python3 bench/reward/reference.py "$work/big.jsonl" "$work/pybig.jsonl"
measure swerl-largest "$work/swerl" reward --in "$work/big.jsonl" --out "$work/gobig.jsonl" --progress-every 0

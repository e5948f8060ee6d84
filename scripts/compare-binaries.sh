#!/usr/bin/env bash
# compare-binaries.sh OLD NEW [REPO] checks that two swerl binaries give the
# same rows on fixed inputs: `swerl mine --commits` of REPO (default: this
# repository at HEAD, cloned so the mined tree is fixed), then `swerl train`
# of those instances with a recorded-completions (file:) policy and seed 7,
# and, with RUN=1, `swerl run --seed 1` (its step lines and reward halves).
# Rows are compared as sorted JSON without created_at and latency_ms, which
# record when and how fast, not what.
#
#   go build -o /tmp/swerl-old ./cmd/swerl   # at the old commit
#   go build -o /tmp/swerl-new ./cmd/swerl   # at the new one
#   scripts/compare-binaries.sh /tmp/swerl-old /tmp/swerl-new
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=${3:-}
if [ -z "$repo" ]; then
	repo=$work/repo
	git clone -q "$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)" "$repo"
fi
rows() { # rows BIN FILES… : sorted JSON rows, times left out
	local bin=$1
	shift
	"$bin" cat "$@" | python3 -c '
import sys, json
rows = [json.loads(l) for l in sys.stdin]
for r in rows:
    r.pop("created_at", None); r.pop("latency_ms", None)
for r in sorted(rows, key=lambda r: r["id"]):
    print(json.dumps(r, sort_keys=True))'
}
for side in old new; do
	bin=$1
	[ "$side" = new ] && bin=$2
	o=$work/$side
	"$bin" mine --repo "$repo" --commits --out "$o/mine" --metrics-addr "" >"$o.mine.log" 2>&1
	rows "$bin" "$o"/mine/instances/*.parquet >"$o.instances.jsonl"
	if [ "$side" = old ]; then
		# Recorded answers for every instance: empty, unformatted, a
		# well-formed wrong edit and an empty edit, rotated per instance.
		python3 - "$o.instances.jsonl" "$work/completions.jsonl" <<'PY'
import json, sys
out = open(sys.argv[2], "w")
for i, line in enumerate(open(sys.argv[1])):
    d = json.loads(line)
    p = sorted(d.get("oracle_new_content") or {"x.py": ""})[0]
    c = ["", "no format here",
         "<think>\nfix\n</think>\n<solution>\n```python\n### %s\n<<<<<<< SEARCH\nimport\n=======\nimport os\n>>>>>>> REPLACE\n```\n</solution>" % p,
         {"text": "<think>t</think>\n<solution>\n```python\n### %s\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n```\n</solution>" % p, "finish_reason": "stop"}]
    out.write(json.dumps({"instance_id": d["id"], "completions": c[i % 2:] + c[:i % 2]}) + "\n")
PY
	fi
	"$bin" train --instances "$o.instances.jsonl" --policy "file:$work/completions.jsonl" --out "$o/train" --seed 7 \
		--group-size 4 --metrics-addr "" >"$o.train.log" 2>&1
	rows "$bin" "$o"/train/samples/*.parquet >"$o.samples.jsonl"
	if [ "${RUN:-0}" = 1 ]; then
		"$bin" run --repo "$repo" --seed 1 --out "$o/run" --metrics-addr "" >"$o.run.log" 2>&1
		grep -E '^step |rollout reward' "$o.run.log" | sed 's/  [0-9.]* samples\/s//' >"$o.run.txt"
	fi
done
status=0
whats="instances samples"
[ "${RUN:-0}" = 1 ] && whats="$whats run"
for what in $whats; do
	ext=jsonl
	[ "$what" = run ] && ext=txt
	if cmp -s "$work/old.$what.$ext" "$work/new.$what.$ext"; then
		echo "compare: $what identical ($(wc -l <"$work/new.$what.$ext") lines)"
	else
		echo "compare: $what differ:"
		diff "$work/old.$what.$ext" "$work/new.$what.$ext" | head -20
		status=1
	fi
done
[ "${RUN:-0}" = 1 ] && grep 'rollout reward' "$work/new.run.txt"
exit $status

#!/usr/bin/env bash
# compare.sh runs BenchmarkSampleBatch (package gpu) of a base revision and
# of the working tree alternately, ROUNDS rounds (default 3), with the load
# average before each run: the dev box's cores are shared, so only numbers
# from the same round compare.
#
#	bench/gpu/compare.sh 4f88350 [ROUNDS] [BENCH]
#
# BENCH is the -test.bench pattern (default SampleBatch).
set -euo pipefail
base=${1:?usage: bench/gpu/compare.sh BASE-REV [ROUNDS] [BENCH]}
rounds=${2:-3}
bench=${3:-SampleBatch}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$root" archive "$base" | tar -x -C "$tmp"
(cd "$tmp" && go test -c -o "$tmp/base.test" ./gpu/)
(cd "$root" && go test -c -o "$tmp/new.test" ./gpu/)
for r in $(seq "$rounds"); do
	for v in base new; do
		echo "== round $r $v load $(cut -d' ' -f1-3 /proc/loadavg)"
		(cd "$root/gpu" && "$tmp/$v.test" -test.run XXX -test.bench "$bench" -test.benchtime 2x -test.count 1 | grep '^Benchmark')
	done
done

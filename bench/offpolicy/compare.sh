#!/usr/bin/env bash
# compare.sh times the learner's GRPO step (BenchmarkLearnerStep, package
# gpu/learner) at a base revision and in the working tree, alternately,
# ROUNDS rounds (default 3), with the load average before each run. The
# benchmark file of the working tree is copied into the base tree, so both
# run the same benchmark against their own learner: before the off-policy
# objectives the sampler's log-probs were π_old; now π_old is the trainer's
# own (the step's forward pass) and the sampler's the behaviour policy.
#
#	bench/offpolicy/compare.sh 91840d6 [ROUNDS]
set -euo pipefail
base=${1:?usage: bench/offpolicy/compare.sh BASE-REV [ROUNDS]}
rounds=${2:-3}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$root" archive "$base" | tar -x -C "$tmp"
cp "$root/gpu/learner/bench_test.go" "$tmp/gpu/learner/"
(cd "$tmp" && go test -c -o "$tmp/base.test" ./gpu/learner/)
(cd "$root" && go test -c -o "$tmp/new.test" ./gpu/learner/)
for r in $(seq "$rounds"); do
	for v in base new; do
		echo "== round $r $v load $(cut -d' ' -f1-3 /proc/loadavg)"
		(cd "$root/gpu/learner" && "$tmp/$v.test" -test.run XXX -test.bench LearnerStep -test.benchtime 3x -test.count 1 | grep '^Benchmark')
	done
done

"""Summarizes bench/peers/grpo.sh's three runs as a Markdown table.

Per side, the mean over the steps after the first (the first pays for
warm-up: compiled kernels, allocator growth, vLLM's first adapter) of the
wall time of a step and its split, training tokens per second (prompt and
completion tokens of the step's sequences over its training time), and the
peak RSS of the trainer's process (and of vLLM's processes beside it), then
swerl's figures over TRL's.
"""

import glob
import json
import os
import sys

import pyarrow.parquet as pq

out = sys.argv[1]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def kb(path):
    try:
        return int(open(path).read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return float("nan")


def swerl_side(d):
    hist = json.load(open(os.path.join(d, "run", "run.json")))["history"]
    steps = []
    for h in hist:
        files = glob.glob(os.path.join(d, "run", "samples", "round-%06d-*.parquet" % h["Step"]))
        rows = [r for f in files for r in pq.read_table(f, columns=["prompt_tokens", "completion_tokens"]).to_pylist()]
        tokens = sum(len(r["prompt_tokens"] or []) + len(r["completion_tokens"] or []) for r in rows)
        sec = lambda ns: ns / 1e9
        # As swerl run's own split (pipelines/rl.StepStats.Split): with
        # groups in flight together their latencies overlap, so sampling is
        # capped at the rollout phase's wall time.
        sample = min(h["SampleTime"], max(h["RolloutTime"] - h["SyncTime"], 0))
        steps.append({"wall_s": sec(h["RolloutTime"] + h["TrainTime"]), "generate_s": sec(sample),
                      "sync_s": sec(h["SyncTime"]),
                      "score_s": sec(h["RolloutTime"] - h["SyncTime"] - sample),
                      "train_s": sec(h["TrainTime"]), "tokens": tokens, "samples": h["Samples"],
                      "reward_mean": h["MeanReward"]})
    return steps


sides = {
    "TRL GRPOTrainer (transformers generate)": ([json.loads(l) for l in open(os.path.join(out, "trl", "steps.jsonl"))],
                                                kb(os.path.join(out, "trl", "maxrss_kb")), None),
    "swerl run, in process": (swerl_side(os.path.join(out, "swerl")), kb(os.path.join(out, "swerl", "maxrss_kb")), None),
    "swerl run + vLLM": (swerl_side(os.path.join(out, "vllm")), kb(os.path.join(out, "vllm", "maxrss_kb")),
                         kb(os.path.join(out, "vllm", "engine_maxrss_kb"))),
}
rows = {}
for name, (steps, rss, engine) in sides.items():
    later = steps[1:] or steps
    r = {k: mean([s.get(k, 0.0) for s in later]) for k in ("wall_s", "generate_s", "sync_s", "score_s", "train_s", "tokens")}
    r["tok_s"] = r["tokens"] / r["train_s"] if r["train_s"] else float("nan")
    r["rss"], r["engine"], r["n"] = rss, engine, len(later)
    r["samples"] = mean([s["samples"] for s in later])
    r["rewards"] = " ".join("%.3f" % s["reward_mean"] for s in steps)
    rows[name] = r

print("| side | steps | samples/step | wall/step | generation | weight sync | scoring (+ swerl's data plane) | training | training tokens/s | peak RSS | rewards by step |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name, r in rows.items():
    rss = "%.0f MB" % r["rss"] + (" (+ vLLM %.0f MB)" % r["engine"] if r["engine"] else "")
    print("| %s | %d | %.0f | %.1f s | %.1f s | %.2f s | %.2f s | %.1f s | %.0f | %s | %s |" % (
        name, r["n"], r["samples"], r["wall_s"], r["generate_s"], r["sync_s"], r["score_s"], r["train_s"], r["tok_s"], rss, r["rewards"]))
trl = rows["TRL GRPOTrainer (transformers generate)"]
print()
print("| swerl / TRL | wall/step | generation | scoring | training | training tokens/s | peak RSS |")
print("|---|---|---|---|---|---|---|")
for name in ("swerl run, in process", "swerl run + vLLM"):
    r = rows[name]
    print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
        name, r["wall_s"] / trl["wall_s"], r["generate_s"] / trl["generate_s"], r["score_s"] / trl["score_s"],
        r["train_s"] / trl["train_s"], r["tok_s"] / trl["tok_s"], r["rss"] / trl["rss"]))

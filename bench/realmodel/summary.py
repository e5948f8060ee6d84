"""Summarize bench/realmodel/paired.sh's runs: per step, for each seed and
side, the format-error rate, mean reward, entropy and grad norm (run.json's
history); the held-out evaluation before and after RL (eval/result-*.json);
and the mean reward of the first and second half of the steps, with RL's
second half over its control's and the control's own half-to-half drift.

Usage: python3 summary.py OUTDIR [--markdown]
"""
import glob
import json
import os
import sys


def load(run):
    try:
        hist = json.load(open(os.path.join(run, "run.json"))).get("history") or []
    except FileNotFoundError:
        return None
    ev = {}
    for when in ("start", "end"):
        try:
            ev[when] = json.load(open(os.path.join(run, "eval", f"result-{when}.json")))
        except FileNotFoundError:
            ev[when] = None
    return hist, ev


def halves(hist):
    r = [h["MeanReward"] for h in hist]
    if len(r) < 2:
        return float("nan"), float("nan")
    k = len(r) // 2
    return sum(r[:k]) / k, sum(r[k:]) / (len(r) - k)


def evals(ev):
    def one(e):
        if not e:
            return "—"
        return f"{100 * e['format_correct_rate']:.1f}% / {e['mean_reward']:+.3f}"
    return f"{one(ev['start'])} → {one(ev['end'])}"


def main():
    outdir = sys.argv[1]
    md = "--markdown" in sys.argv
    rows = []
    for seed_dir in sorted(glob.glob(os.path.join(outdir, "seed-*"))):
        seed = seed_dir.rsplit("-", 1)[1]
        runs = {side: load(os.path.join(seed_dir, side)) for side in ("rl", "control")}
        for side, got in runs.items():
            if got is None:
                continue
            hist, ev = got
            if not md:
                print(f"== seed {seed} {side}: held-out format-correct / mean reward {evals(ev)}")
                for h in hist:
                    ls = h.get("Learner") or {}
                    print(f"  step {h['Step']:2d}  format-err {100 * h['FormatErrorRate']:3.0f}%  reward {h['MeanReward']:+.3f}  "
                          f"exact {100 * h['ExactRate']:3.0f}%  zero-var {100 * h['ZeroVarianceRate']:3.0f}%  "
                          f"entropy {ls.get('entropy', float('nan')):.3f}  grad_norm {ls.get('grad_norm', float('nan')):.4f}")
        if runs["rl"] and runs["control"]:
            (r1, r2), (c1, c2) = halves(runs["rl"][0]), halves(runs["control"][0])
            rows.append((seed, r1, r2, c1, c2, evals(runs["rl"][1]), evals(runs["control"][1])))
    print()
    print("| seed | RL, reward 1st → 2nd half | control | RL − control, 2nd half | control's drift | held-out RL (format-correct / reward, before → after) | held-out control |")
    print("|---|---|---|---|---|---|---|")
    wins = 0
    for seed, r1, r2, c1, c2, er, ec in rows:
        drift = abs(c2 - c1)
        if r2 - c2 > drift:
            wins += 1
        print(f"| {seed} | {r1:+.3f} → {r2:+.3f} | {c1:+.3f} → {c2:+.3f} | {r2 - c2:+.3f} | {drift:.3f} | {er} | {ec} |")
    print(f"\nRL's second half above its control by more than the control's drift on {wins} of {len(rows)} seeds")


if __name__ == "__main__":
    main()

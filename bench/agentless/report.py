"""Report on bench/agentless/vllm.sh's run: rows with a patch and empty
ones and why, whether every non-empty prediction applies at its
base_commit (git apply --check against that tree, in a temporary index),
and how many localized or touched the gold patch's files.

Usage: python3 report.py OUTDIR REPO
"""
import json, os, subprocess, sys, tempfile, re
out, repo = sys.argv[1], sys.argv[2]
rows = {}
for l in open(os.path.join(out, "rows.jsonl")):
    r = json.loads(l)
    rows[r["instance_id"]] = r
insts = {}
for l in open(os.path.join(out, "out", "instances.jsonl")):
    r = json.loads(l)
    insts[r["instance_id"]] = r
summary = json.load(open(os.path.join(out, "out", "summary.json")))
files = lambda p: set(re.findall(r"^diff --git a/(\S+) ", p, re.M))
n = applies = fail = gold_files = localized_gold = 0
for l in open(os.path.join(out, "out", "predictions.jsonl")):
    p = json.loads(l)
    row = rows.pop(p["instance_id"])
    n += 1
    if set(insts[p["instance_id"]]["localized_files"] or []) & files(row["patch"]):
        localized_gold += 1
    if not p["model_patch"]:
        continue
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(d, "index"))
        subprocess.run(["git", "-C", repo, "read-tree", row["base_commit"]], env=env, check=True)
        r = subprocess.run(["git", "-C", repo, "apply", "--cached", "--check", "-"], env=env,
                           input=p["model_patch"].encode(), capture_output=True)
    if r.returncode == 0:
        applies += 1
    else:
        fail += 1
        print(f"{p['instance_id']}: does not apply at {row['base_commit']}: {r.stderr.decode().strip()}")
    if files(p["model_patch"]) & files(row["patch"]):
        gold_files += 1
assert not rows, f"rows without a prediction: {sorted(rows)}"
print(f"{n} rows: {summary['with_patch']} with a patch ({applies} apply at base_commit, {fail} do not), "
      f"{n - summary['with_patch']} empty; gold file localized in {localized_gold}; "
      f"patch touches a gold file in {gold_files}")
print(f"localization answers naming no file: {summary['malformed_localizations']}; candidates {summary['candidates']}, "
      f"dropped {summary['dropped_candidates']} {summary.get('dropped_by') or {}}; failed rows {summary['failed']}")
print(f"wall {summary['wall_ns'] / 1e9:.0f} s, policy {summary['policy_ns'] / 1e9:.0f} s")

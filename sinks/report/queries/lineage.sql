-- Lineage: what trained each version. Every sample id of a learner step record
-- (trained/vNNNNNN.json) joined to its sample row (prompt, completion, reward, advantage,
-- the version that sampled it), that row to its instance (the pull request: repository,
-- number, merge commit, oracle patch) and the version to its checkpoint index row.
-- Add `WHERE r.version = 57` for one version; `swerl explain --out swerl-out --version 57`
-- prints the same join, with each answer's diff against the oracle.
WITH r AS (
  SELECT version, step, unnest(samples) AS sample_id
  FROM read_json('swerl-out/trained/v*.json', union_by_name = true,
                 columns = {version: 'BIGINT', step: 'BIGINT', samples: 'VARCHAR[]'})
),
s AS (  -- one row an id: the train pipeline may have written a group twice after a crash
  SELECT * FROM read_parquet('swerl-out/samples/*.parquet')
  QUALIFY row_number() OVER (PARTITION BY id ORDER BY created_at) = 1
)
SELECT r.version, r.step, w.parent, round(w.loss, 6) AS loss,
       r.sample_id, s.group_id, s.policy_version,
       s.instance_id, i.repo, i.pr_number, i.merge_commit, i.pr_title,
       round(s.reward, 6) AS reward, s.format_error, round(s.advantage, 6) AS advantage,
       s.prompt, s.completion, i.oracle_patch
FROM r
LEFT JOIN s ON s.id = r.sample_id
LEFT JOIN read_parquet('swerl-out/instances/*.parquet') i
       ON i.id = s.instance_id
       OR starts_with(s.instance_id, i.id || '/')  -- a hunk task ("owner/repo#N/path:line"): its PR's instance
LEFT JOIN read_parquet('swerl-out/index.parquet') w ON w.version = r.version
ORDER BY r.version, r.sample_id;

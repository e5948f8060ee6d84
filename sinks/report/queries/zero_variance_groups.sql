-- Groups whose G rewards were all equal carry no GRPO signal; their share per version.
SELECT policy_version,
       count(*)                                         AS groups,
       sum(CASE WHEN max_r = min_r THEN 1 ELSE 0 END)   AS zero_variance_groups
FROM (
  SELECT policy_version, group_id, max(reward) AS max_r, min(reward) AS min_r
  FROM read_parquet('swerl-out/samples/*.parquet')
  GROUP BY policy_version, group_id
)
GROUP BY policy_version
ORDER BY policy_version;

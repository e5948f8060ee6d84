-- Mean reward, format-error rate and exact-match rate of each policy version.
-- Run from the directory that holds swerl-out/ (duckdb -c ".read FILE").
SELECT policy_version,
       count(*)                                           AS samples,
       round(avg(reward), 6)                              AS mean_reward,
       round(avg(CASE WHEN reward = -1 THEN 1 ELSE 0 END), 6) AS format_error_rate,
       round(avg(CASE WHEN reward = 1 THEN 1 ELSE 0 END), 6)  AS exact_match_rate
FROM read_parquet('swerl-out/samples/*.parquet')
GROUP BY policy_version
ORDER BY policy_version;

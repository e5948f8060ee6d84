-- Mean reward per repository, joining samples to the mined instances.
SELECT i.repo,
       count(*)                 AS samples,
       round(avg(s.reward), 6)  AS mean_reward
FROM read_parquet('swerl-out/samples/*.parquet') s
JOIN read_parquet('swerl-out/instances/*.parquet') i ON s.instance_id = i.id
GROUP BY i.repo
ORDER BY i.repo;

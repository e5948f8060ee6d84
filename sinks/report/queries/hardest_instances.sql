-- The instances the policy does worst on (lowest best-of-group reward), with their size.
SELECT s.instance_id,
       max(s.reward)               AS best_reward,
       any_value(i.stats.files_changed) AS files_changed,
       any_value(i.stats.lines_added + i.stats.lines_deleted) AS lines_changed
FROM read_parquet('swerl-out/samples/*.parquet') s
JOIN read_parquet('swerl-out/instances/*.parquet') i ON s.instance_id = i.id
GROUP BY s.instance_id
ORDER BY best_reward, s.instance_id
LIMIT 20;

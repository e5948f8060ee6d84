-- The checkpoint index: one row a published version, with its lineage and training metrics.
SELECT version, parent, step, uri, round(loss, 6) AS loss, round(mean_reward, 6) AS mean_reward,
       samples, len(files) AS files
FROM read_parquet('swerl-out/index.parquet')
ORDER BY version;

// Prints every row of a Parquet file as one JSON object a line, read by
// DuckDB: an independent Parquet reader that swerl's own output is checked
// against (see cmd/swerl/cat_test.go). Usage: node duckdb-rows.mjs FILE.parquet
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
if (!file) {
  console.error('usage: node duckdb-rows.mjs FILE.parquet');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const quoted = "'" + file.replaceAll("'", "''") + "'";
const reader = await conn.runAndReadAll(`SELECT to_json(t)::VARCHAR AS j FROM read_parquet(${quoted}) t`);
for (const row of reader.getRows()) {
  process.stdout.write(row[0] + '\n');
}

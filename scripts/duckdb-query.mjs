// Runs one SQL file with DuckDB and prints the result rows as JSON objects,
// one a line (BIGINT and DECIMAL values as JSON numbers where exact).
// Usage: node duckdb-query.mjs FILE.sql   (relative paths resolve from the cwd)
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
if (!file) {
  console.error('usage: node duckdb-query.mjs FILE.sql');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();
const reader = await conn.runAndReadAll(readFileSync(file, 'utf8'));
for (const row of reader.getRowObjectsJS()) {
  process.stdout.write(JSON.stringify(row, (k, v) => (typeof v === 'bigint' ? Number(v) : v)) + '\n');
}

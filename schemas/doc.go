// Package schemas holds the records that cross a process boundary in swerl:
// Instance (a mined pull request), Rollout (one policy completion), Sample (a
// scored rollout with its group-relative advantage) and WeightVersion (one
// published checkpoint).
//
// # Wire forms
//
// Every record has two forms with the same snake_case field names:
//   - JSON, used for Kafka values and JSONL files. Each value carries
//     schema_version; Decode* functions reject a value whose version is newer
//     than this build understands, and name the field at fault.
//   - Parquet, through parquet-go struct tags, used for datasets, the sample
//     store and the checkpoint index. Maps (path → text) are Parquet MAP
//     columns, readable by DuckDB, Spark and pyarrow.
//
// # Compatibility
//
// Fields may be added; none is renamed or removed without a schema_version
// bump. A reader ignores JSON fields it does not know.
package schemas

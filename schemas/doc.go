// Package schemas holds the records that cross a process boundary in swerl:
// Instance (a mined pull request), Rollout (one policy completion), Sample (a
// scored rollout with its group-relative advantage) and WeightVersion (one
// published checkpoint).
//
// # Wire forms
//
// Every record has two forms with the same snake_case field names:
//   - JSON, used for Kafka values and JSONL files. Each value carries
//     schema_version; Decode rejects a value whose version is newer than
//     this build understands, and names the record and the field at fault.
//     An Instance without one (a SWE-bench-style file from another tool)
//     reads as the current version.
//   - Parquet, through parquet-go struct tags, used for datasets, the sample
//     store and the checkpoint index. Maps (path → text) are Parquet MAP
//     columns, readable by DuckDB, Spark and pyarrow.
//
// # Compatibility
//
// Fields may be added; none is renamed or removed without a schema_version
// bump. A reader ignores JSON fields it does not know. A Parquet file must
// hold every column of its record except those the record's
// OptionalColumns lists: a field added later goes there, so that files
// written before it still read (sinks/parquetio refuses a file missing
// any other column, and warns of columns the record lacks).
//
// # Declaring a field
//
// A field is declared once, in its struct with its json and parquet tags.
// The codecs that are written field by field (the one-pass JSON decoder of
// Instance, the JSON encoder of Sample, and the binary form of both that
// package bincode carries through staging files and shuffles) are
// generated from the struct definitions by internal/codecgen: after
// changing a struct, run `go generate ./schemas`. A test fails while the
// generated files are stale.
package schemas

//go:generate go run ./internal/codecgen

// Package parquetio reads and writes swerl's Parquet files with parquet-go.
//
// # Behavior
//
// Every file is written under a temporary name in its final directory
// (".<name>.tmp-<random>"), synced, closed (which writes the footer) and only
// then renamed to its final name, so a reader never sees a half-written file
// and a crash leaves at most a temporary file that readers ignore. Column names
// are the snake_case parquet tags of the row type (see package schemas).
//
// # Concurrency
//
// The free functions are safe for concurrent use on distinct paths. A
// DirWriter is not safe for concurrent use.
package parquetio

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
// # Hostile files
//
// Every read (Scan, ReadFile, ReadDir, ScanAny) opens the file through one
// checked path (open.go): any bytes end in rows or in an error wrapping
// ErrCorrupt that names the file, never in a panic, an allocation beyond
// fixed bounds, or a goroutine of parquet-go left running.
//
// Before a row is read, the file's columns are checked against the row
// type (columns.go): a column of the type that the file lacks (a name
// damaged in the footer, "advantage" become "advanta>e") or holds with a
// type of another class is an error naming the file and the column, unless
// the column is optional (a parquet:",optional" field, or listed by the
// type's OptionalColumns); a column of the file that the type lacks is
// logged as a warning (SetWarnings), unless the type is a Projection.
// ScanAny checks a file that holds most of a swerl record's columns as
// that record.
//
// The fuzz targets FuzzReadBytes and FuzzSchema (here) and FuzzIndex
// (sinks/checkpoint) run as seed-corpus tests in `go test`; their seeds
// include footer byte mutations and schema mutations that keep the footer
// decoding (parquettest.MutateSchema). The long runs are
//
//	go test ./sinks/parquetio -run '^$' -fuzz '^FuzzReadBytes$' -fuzztime 1000000x -fuzzminimizetime 0 -parallel 1
//	go test ./sinks/parquetio -run '^$' -fuzz '^FuzzSchema$' -fuzztime 100000x -fuzzminimizetime 0 -parallel 1
//	go test ./sinks/checkpoint -run '^$' -fuzz '^FuzzIndex$' -fuzztime 1000000x -fuzzminimizetime 0 -parallel 1
//
// (-fuzzminimizetime 0: minimizing inputs of several KiB takes the default
// minute each, and the runs would make no progress.)
//
// # Concurrency
//
// The free functions are safe for concurrent use on distinct paths. A
// DirWriter is not safe for concurrent use.
package parquetio

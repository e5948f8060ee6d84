package train

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/parquetio"
)

// source adds the reading of a run's input to the pipeline and returns a
// PCollection of Record. Files and Kafka plug in here.
type source func(s beam.Scope) beam.PCollection

func init() {
	register.DoFn3x1[context.Context, string, func(Record), error](&readFileFn{})
	register.Emitter1[Record]()
}

// fileSource reads instances from a JSONL or Parquet file.
func fileSource(path string) source {
	return func(s beam.Scope) beam.PCollection {
		s = s.Scope("ReadInstancesFile")
		return beam.ParDo(s, &readFileFn{}, beam.Create(s, path))
	}
}

// readFileFn emits each line of a JSONL file ("PATH:LINE"), or each row of a
// Parquet file re-encoded as JSON ("PATH#ROW"), with its place among the
// file's records as its request index. Blank lines are skipped.
type readFileFn struct{}

func (*readFileFn) ProcessElement(ctx context.Context, path string, emit func(Record)) error {
	return scanInstances(ctx, path, func(src string, n int, key string, value []byte) error {
		emit(Record{Source: src, Key: key, Value: value, Request: n})
		return nil
	})
}

// scanInstances calls fn with each record of an instances file, local or
// in object storage (gs://, s3://: package files): a Parquet file's rows
// re-encoded as JSON ("PATH#ROW", keyed by id), or a JSONL file's
// non-blank lines ("PATH:LINE", no key), n being the record's place in
// the file (0-based). Records are named by path as given.
func scanInstances(ctx context.Context, path string, fn func(src string, n int, key string, value []byte) error) error {
	if !strings.HasSuffix(path, ".parquet") {
		return scanLines(ctx, path, func(src string, n int, line []byte) error { return fn(src, n, "", line) })
	}
	local, done, err := files.Local(ctx, path, "")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer done()
	row := 0
	return parquetio.Scan(local, func(rows []schemas.Instance) error {
		for i := range rows {
			row++
			v, err := schemas.Encode(&rows[i])
			if err != nil {
				return fmt.Errorf("train: %s#%d: %w", path, row, err)
			}
			if err := fn(fmt.Sprintf("%s#%d", path, row), row-1, rows[i].ID, v); err != nil {
				return err
			}
		}
		return nil
	})
}

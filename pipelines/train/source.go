package train

import (
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// source adds the reading of a run's input to the pipeline and returns a
// PCollection of Record. Files and Kafka plug in here.
type source func(s beam.Scope) beam.PCollection

func init() {
	register.DoFn2x1[string, func(Record), error](&readFileFn{})
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

func (*readFileFn) ProcessElement(path string, emit func(Record)) error {
	if strings.HasSuffix(path, ".parquet") {
		row := 0
		return parquetio.Scan(path, func(rows []schemas.Instance) error {
			for i := range rows {
				row++
				v, err := schemas.Encode(&rows[i])
				if err != nil {
					return fmt.Errorf("train: %s#%d: %w", path, row, err)
				}
				emit(Record{Source: fmt.Sprintf("%s#%d", path, row), Key: rows[i].ID, Value: v, Request: row - 1})
			}
			return nil
		})
	}
	return scanLines(path, func(src string, n int, line []byte) error {
		emit(Record{Source: src, Value: line, Request: n})
		return nil
	})
}

package rl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// LoadInstances reads instances from a directory of Parquet files (what
// `swerl mine` writes under DIR/instances), a Parquet file, or a JSONL file.
// A JSONL line that does not decode or validate is an error naming the
// file and line.
func LoadInstances(path string) ([]schemas.Instance, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() || strings.HasSuffix(path, ".parquet") {
		var ins []schemas.Instance
		if st.IsDir() {
			ins, err = parquetio.ReadDir[schemas.Instance](path)
		} else {
			ins, err = parquetio.ReadFile[schemas.Instance](path)
		}
		if err != nil {
			return nil, err
		}
		for i := range ins {
			if err := ins[i].Validate(); err != nil {
				return nil, fmt.Errorf("%s: row %d: %w", path, i+1, err)
			}
		}
		return ins, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var ins []schemas.Instance
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(b))) > 0 {
			var in schemas.Instance
			if derr := json.Unmarshal(b, &in); derr != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, derr)
			}
			if verr := in.Validate(); verr != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, verr)
			}
			ins = append(ins, in)
		}
		if errors.Is(err, io.EOF) {
			return ins, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

package parquetio_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// TestScanAnyMatchesTypedJSON checks that reading a file without its Go type
// yields, row for row, the same JSON object as the typed record's wire form.
func TestScanAnyMatchesTypedJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "i.parquet")
	in := sampleInstances()
	if err := parquetio.WriteFile(path, in); err != nil {
		t.Fatal(err)
	}
	var i int
	err := parquetio.ScanAny(path, func(row map[string]any) error {
		got, _ := json.Marshal(row)
		want, _ := json.Marshal(in[i])
		var g, w map[string]any
		json.Unmarshal(got, &g)
		json.Unmarshal(want, &w)
		for k, wv := range w {
			wj, _ := json.Marshal(wv)
			gj, _ := json.Marshal(g[k])
			if string(wj) != string(gj) && !(isEmpty(wv) && isEmpty(g[k])) {
				t.Errorf("row %d column %s:\ngot:  %s\nwant: %s", i, k, gj, wj)
			}
		}
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != len(in) {
		t.Fatalf("read %d rows, want %d", i, len(in))
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

var _ = schemas.Version

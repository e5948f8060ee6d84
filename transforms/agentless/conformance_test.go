package agentless

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"sort"
	"testing"
)

// vectorsReader opens the conformance vectors: $SWERL_AGENTLESS_VECTORS
// when set (a plain JSONL file), else the gzipped copy in testdata.
func vectorsReader(t testing.TB) io.Reader {
	t.Helper()
	if p := os.Getenv("SWERL_AGENTLESS_VECTORS"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	f, err := os.Open("testdata/vectors.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

type vector struct {
	CheckLine
	Expected            json.RawMessage `json:"expected"`
	ExpectedRaw         *string         `json:"expected_raw_patch"`
	ExpectedEditedFiles []string        `json:"expected_edited_files"`
	ExpectedNewFiles    json.RawMessage `json:"expected_new_files"`
	ExpectedIndex       *int            `json:"expected_index"`
}

// expectedResult builds the result a checker must print for v, from the
// vector's expected fields.
func expectedResult(t *testing.T, v vector) any {
	switch v.Kind {
	case "normalize":
		var s *string
		if err := json.Unmarshal(v.Expected, &s); err != nil {
			t.Fatalf("%s: expected: %v", v.ID, err)
		}
		if s == nil {
			return nil
		}
		return *s
	case "vote":
		if v.ExpectedIndex == nil {
			return nil
		}
		return float64(*v.ExpectedIndex)
	case "apply":
		var mp string
		if err := json.Unmarshal(v.Expected, &mp); err != nil {
			t.Fatalf("%s: expected: %v", v.ID, err)
		}
		var nf map[string]any
		if err := json.Unmarshal(v.ExpectedNewFiles, &nf); err != nil {
			t.Fatalf("%s: expected_new_files: %v", v.ID, err)
		}
		ef := make([]any, len(v.ExpectedEditedFiles))
		for i, f := range v.ExpectedEditedFiles {
			ef[i] = f
		}
		return map[string]any{"model_patch": mp, "raw_model_patch": *v.ExpectedRaw, "edited_files": ef, "new_files": nf}
	}
	t.Fatalf("%s: unknown kind %q", v.ID, v.Kind)
	return nil
}

// TestConformance runs every vector through Eval (as `swerl agentless
// check` does) and compares the JSON result with the vector's expected
// fields, produced by the Python reference.
func TestConformance(t *testing.T) {
	sc := bufio.NewScanner(vectorsReader(t))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	total := map[string]int{}
	pass := map[string]int{}
	var failed []string
	for sc.Scan() {
		var v vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		total[v.Kind]++
		res, err := Eval(v.CheckLine, DefaultEngine())
		if err != nil {
			failed = append(failed, v.ID+": "+err.Error())
			continue
		}
		// Compare through JSON, as a checker's output line is compared.
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var got any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		want := expectedResult(t, v)
		if !reflect.DeepEqual(got, want) {
			failed = append(failed, v.ID)
			if testing.Verbose() {
				gb, _ := json.MarshalIndent(got, "", " ")
				wb, _ := json.MarshalIndent(want, "", " ")
				t.Logf("%s differs\n got: %s\nwant: %s", v.ID, gb, wb)
			}
			continue
		}
		pass[v.Kind]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, 0, len(total))
	for k := range total {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("%s: %d/%d match", k, pass[k], total[k])
	}
	for _, f := range failed {
		t.Errorf("mismatch: %s", f)
	}
}

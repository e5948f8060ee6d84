package agentless

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"testing"
)

// vector is a whole conformance line: the inputs and the expected fields.
type vector struct {
	Vector
	raw                 []byte
	Expected            json.RawMessage   `json:"expected"`
	ExpectedIndex       *int              `json:"expected_index"`
	ExpectedRawPatch    *string           `json:"expected_raw_patch"`
	ExpectedEditedFiles []string          `json:"expected_edited_files"`
	ExpectedNewFiles    map[string]string `json:"expected_new_files"`
	Note                string            `json:"note"`
}

// loadVectors reads testdata/vectors.jsonl.gz (a copy of the shared
// conformance vectors, produced from Agentless Mini's own code).
func loadVectors(t testing.TB, kind string) []*vector {
	t.Helper()
	f, err := os.Open("testdata/vectors.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []*vector
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		v := &vector{raw: append([]byte(nil), sc.Bytes()...)}
		if err := json.Unmarshal(sc.Bytes(), v); err != nil {
			t.Fatal(err)
		}
		if kind == "" || v.Kind == kind {
			out = append(out, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVoteVectors(t *testing.T) {
	vs := loadVectors(t, "vote")
	if len(vs) != 20 {
		t.Fatalf("%d vote vectors, want 20", len(vs))
	}
	for _, v := range vs {
		i, ok := Vote(v.CandidatesNormalized)
		switch {
		case v.ExpectedIndex == nil && ok:
			t.Errorf("%s: chose %d, want none", v.ID, i)
		case v.ExpectedIndex != nil && (!ok || i != *v.ExpectedIndex):
			t.Errorf("%s: chose %d (%v), want %d (%s)", v.ID, i, ok, *v.ExpectedIndex, v.Note)
		}
	}
}

func TestApplyVectors(t *testing.T) {
	vs := loadVectors(t, "apply")
	if len(vs) != 31 {
		t.Fatalf("%d apply vectors, want 31", len(vs))
	}
	for _, v := range vs {
		r := Apply(v.Files, *v.Edits)
		var want string
		if err := json.Unmarshal(v.Expected, &want); err != nil {
			t.Fatalf("%s: expected: %v", v.ID, err)
		}
		if r.ModelPatch != want {
			t.Errorf("%s: model_patch\n%q\nwant\n%q\n(%s)", v.ID, r.ModelPatch, want, v.Note)
		}
		if r.RawModelPatch != *v.ExpectedRawPatch {
			t.Errorf("%s: raw_model_patch\n%q\nwant\n%q", v.ID, r.RawModelPatch, *v.ExpectedRawPatch)
		}
		if !slices.Equal(r.EditedFiles, v.ExpectedEditedFiles) {
			t.Errorf("%s: edited_files %q, want %q", v.ID, r.EditedFiles, v.ExpectedEditedFiles)
		}
		if !maps.Equal(r.NewFiles, v.ExpectedNewFiles) {
			t.Errorf("%s: new_files differ", v.ID)
		}
	}
}

func TestNormalizeVectors(t *testing.T) {
	vs := loadVectors(t, "normalize")
	if len(vs) != 74 {
		t.Fatalf("%d normalize vectors, want 74", len(vs))
	}
	for _, v := range vs {
		var want *string
		if err := json.Unmarshal(v.Expected, &want); err != nil {
			t.Fatalf("%s: expected: %v", v.ID, err)
		}
		got, err := NormalizePatch(*v.Patch, v.Files, v.NewFiles, v.EditedFiles)
		switch {
		case want == nil:
			if !errors.Is(err, ErrNormalizeRaises) {
				t.Errorf("%s: got %q, %v; Agentless Mini raises here (%s)", v.ID, got, err, v.Note)
			}
		case err != nil:
			t.Errorf("%s: %v", v.ID, err)
		case got != *want:
			t.Errorf("%s: normalized patch\n%s\nwant\n%s\n(%s)", v.ID, got, *want, v.Note)
		}
	}
}

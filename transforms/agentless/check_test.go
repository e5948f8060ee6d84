package agentless

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestCheckVectors runs every conformance line, with its expected fields
// removed, through Check and compares each result with the expectation.
func TestCheckVectors(t *testing.T) {
	vs := loadVectors(t, "")
	var in bytes.Buffer
	for _, v := range vs {
		var m map[string]any
		if err := json.Unmarshal(v.raw, &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if strings.HasPrefix(k, "expected") {
				delete(m, k)
			}
		}
		b, _ := json.Marshal(m)
		in.Write(b)
		in.WriteByte('\n')
	}
	var out bytes.Buffer
	st, err := Check(&in, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(vs) {
		t.Fatalf("%d output lines for %d input lines", len(lines), len(vs))
	}
	pass := map[string]int{}
	for i, v := range vs {
		var got struct {
			ID, Kind string
			Result   json.RawMessage
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != v.ID || got.Kind != v.Kind {
			t.Fatalf("line %d is %s/%s, want %s/%s", i+1, got.ID, got.Kind, v.ID, v.Kind)
		}
		var want any
		switch v.Kind {
		case "vote":
			if v.ExpectedIndex != nil {
				want = float64(*v.ExpectedIndex)
			}
		case "normalize":
			json.Unmarshal(v.Expected, &want)
		case "apply":
			var mp string
			json.Unmarshal(v.Expected, &mp)
			nf := map[string]any{}
			for k, s := range v.ExpectedNewFiles {
				nf[k] = s
			}
			ef := []any{}
			for _, f := range v.ExpectedEditedFiles {
				ef = append(ef, f)
			}
			want = map[string]any{"model_patch": mp, "raw_model_patch": *v.ExpectedRawPatch, "edited_files": ef, "new_files": nf}
		}
		var res any
		json.Unmarshal(got.Result, &res)
		if reflect.DeepEqual(res, want) {
			pass[v.Kind]++
		} else {
			t.Errorf("%s: result differs from the expected one", v.ID)
		}
	}
	t.Logf("conformance: apply %d/31, vote %d/20, normalize %d/74 (lines: %v, raised: %v, unsupported: %v)",
		pass["apply"], pass["vote"], pass["normalize"], st.Lines, st.Errors, st.Unsupported)
	if pass["apply"] != 31 || pass["vote"] != 20 || pass["normalize"] != 74 {
		t.Errorf("apply %d/31, vote %d/20, normalize %d/74", pass["apply"], pass["vote"], pass["normalize"])
	}
	if st.Errors["normalize"] != 2 {
		t.Errorf("%d normalize lines raised, want the 2 where Agentless Mini raises", st.Errors["normalize"])
	}
}

func TestCheckBadInput(t *testing.T) {
	for _, in := range []string{
		"{", `{"kind":"vote"}`, `{"id":"x","kind":"nope"}`, `{"id":"x","kind":"apply","files":{}}`,
		`{"id":"x","kind":"normalize","files":{}}`,
	} {
		if _, err := Check(strings.NewReader(in+"\n"), new(bytes.Buffer)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

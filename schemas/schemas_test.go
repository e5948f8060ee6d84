package schemas_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"swerl/schemas"
)

func TestJSONRoundTrip(t *testing.T) {
	in := schemas.Instance{ID: "o/r#1", Repo: "o/r", PRNumber: 1, LinkedIssues: []int{2},
		CodeContext: map[string]string{"a.py": "x\r\n"}, OracleNewContent: map[string]string{"a.py": "y\n"},
		Stats: schemas.ChangeStats{FilesChanged: 1}}
	b, err := schemas.Encode(&in)
	if err != nil {
		t.Fatal(err)
	}
	if in.SchemaVersion != schemas.Version {
		t.Fatalf("Encode left schema_version %d", in.SchemaVersion)
	}
	var out schemas.Instance
	if err := schemas.Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("got  %+v\nwant %+v", out, in)
	}
	// Sample embeds Rollout: its fields must be flat in the wire form.
	var s schemas.Sample
	s.InstanceID, s.GroupID, s.Reward, s.Advantage = "o/r#1", "g", 0.5, 1
	b, _ = schemas.Encode(&s)
	var flat map[string]any
	json.Unmarshal(b, &flat)
	for _, k := range []string{"instance_id", "group_id", "completion", "reward", "advantage", "policy_version", "schema_version"} {
		if _, ok := flat[k]; !ok {
			t.Errorf("sample wire form lacks %q: %s", k, b)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"not json", `{"id":`, "unexpected EOF"},
		{"zero version", `{"schema_version":0,"id":"x"}`, `instance "x": invalid schema_version 0`},
		{"newer version", `{"schema_version":99,"id":"x"}`, `instance "x": schema_version 99 is newer`},
		{"wrong type", `{"schema_version":1,"pr_number":"seven"}`, "pr_number"},
		{"trailing", `{"schema_version":1} {}`, "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in schemas.Instance
			err := schemas.Decode([]byte(tc.in), &in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got  %v\nwant an error containing %q", err, tc.wantErr)
			}
		})
	}
	var in schemas.Instance
	if err := schemas.Decode([]byte(`{"schema_version":1,"id":"x","future_field":[1,2]}`), &in); err != nil {
		t.Fatalf("unknown fields must be ignored: %v", err)
	}
}

// An instance without schema_version, as other tools write them, reads as
// the current version on the fast path and the fallback alike; a version
// that is there must be one this build reads, and the error names the
// record. Records only swerl writes still need theirs.
func TestDecodeVersions(t *testing.T) {
	// A SWE-bench-style row: no schema_version, fields swerl does not know.
	swebench := `{"instance_id":"o__r-7","id":"o/r#7","repo":"o/r","base_commit":"abc","patch":"diff","problem_statement":"it fails"}`
	for _, tc := range []struct{ name, in, id string }{
		{"missing", swebench, "o/r#7"},
		{"missing, fallback path", `{"Repo":"o/r","id":"o/r#8"}`, "o/r#8"}, // a case-folded key: encoding/json decodes it
		{"null", `{"schema_version":null,"id":"o/r#9"}`, "o/r#9"},
		{"null, fallback path", `{"schema_version":null,"ID":"o/r#10"}`, "o/r#10"},
		{"current", `{"schema_version":1,"id":"o/r#11"}`, "o/r#11"},
	} {
		var in schemas.Instance
		if err := schemas.Decode([]byte(tc.in), &in); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if in.SchemaVersion != schemas.Version || in.ID != tc.id {
			t.Errorf("%s: schema_version %d, id %q; want %d, %q", tc.name, in.SchemaVersion, in.ID, schemas.Version, tc.id)
		}
	}
	// A record that already holds a version keeps it when the JSON has none
	// (encoding/json merges into what it is given).
	kept := schemas.Instance{SchemaVersion: schemas.Version, ID: "keep"}
	if err := schemas.Decode([]byte(`{"repo":"o/r"}`), &kept); err != nil || kept.ID != "keep" || kept.Repo != "o/r" {
		t.Errorf("decode into a filled instance: %v %+v", err, kept)
	}

	for _, tc := range []struct{ name, in, want string }{
		{"zero", `{"id":"o/r#1","schema_version":0}`, `instance "o/r#1": invalid schema_version 0`},
		{"zero, fallback path", `{"ID":"o/r#1","schema_version":0}`, `instance "o/r#1": invalid schema_version 0`},
		{"negative", `{"schema_version":-1,"id":"o/r#2"}`, `instance "o/r#2": invalid schema_version -1`},
		{"the marker's value", `{"schema_version":-9223372036854775808,"id":"o/r#3"}`, `instance "o/r#3": invalid schema_version -9223372036854775808`},
		{"newer", `{"schema_version":2,"id":"o/r#4"}`, `instance "o/r#4": schema_version 2 is newer than this build understands (1)`},
		{"newer, fallback path", `{"schema_version":2,"ID":"o/r#5"}`, `instance "o/r#5": schema_version 2 is newer`},
		{"repeated, last null", `{"schema_version":0,"schema_version":null,"id":"o/r#6"}`, `invalid schema_version 0`},
		{"not a number", `{"schema_version":"1","id":"o/r#7"}`, `schema_version`},
	} {
		var in schemas.Instance
		err := schemas.Decode([]byte(tc.in), &in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	var s schemas.Sample
	if err := schemas.Decode([]byte(`{"id":"g/0","reward":1}`), &s); err == nil || !strings.Contains(err.Error(), `sample "g/0": missing schema_version`) {
		t.Errorf("a sample without schema_version: %v", err)
	}
	var w schemas.WeightVersion
	if err := schemas.Decode([]byte(`{"schema_version":3,"version":12}`), &w); err == nil || !strings.Contains(err.Error(), "weight version 12: schema_version 3 is newer") {
		t.Errorf("a newer weight version: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"id":"o/r#1","code_context":{"a":"b"}}`))
	f.Add([]byte(`{"schema_version":1,"instance_id":"x","reward":-1,"similarities":{"a":0.5}}`))
	f.Add([]byte(`{"schema_version":1,"version":3,"files":[{"path":"a","sha256":"b"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var i schemas.Instance
		if schemas.Decode(b, &i) == nil {
			if _, err := schemas.Encode(&i); err != nil {
				t.Fatalf("decoded instance does not encode: %v", err)
			}
		}
		var s schemas.Sample
		_ = schemas.Decode(b, &s)
		var w schemas.WeightVersion
		_ = schemas.Decode(b, &w)
	})
}

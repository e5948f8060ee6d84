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
		{"no version", `{"id":"x"}`, "missing schema_version"},
		{"newer version", `{"schema_version":99,"id":"x"}`, "newer"},
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

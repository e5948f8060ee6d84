package schemas

import (
	"encoding/json"
	"reflect"
	"swerl/internal/jsonscan/jsonscantest"
	"testing"
)

// checkFastInstance: where fastInstance decodes b, json.Unmarshal accepts b
// and gives the same Instance.
func checkFastInstance(t *testing.T, b []byte) bool {
	t.Helper()
	fast := func(b []byte) (Instance, bool) { return fastInstance(b, Instance{}) }
	return jsonscantest.Agrees(t, b, fast, jsonscantest.Unmarshal[Instance])
}

func fullInstance() Instance {
	return Instance{SchemaVersion: 1, ID: "o/r#12", Repo: "o/r", PRNumber: 12, BaseCommit: "abc", MergeCommit: "def",
		CreatedAt: "2026-11-24T00:00:00Z", ProblemStatement: "it <breaks> & \"fails\"\n\tbadly é 😀 \u2028",
		PRTitle: "fix", PRBody: "", PRUser: "u", HeadCommit: "123", LinkedIssues: []int{3, -4, 0},
		CodeContext:      map[string]string{"a.go": "package a\n\nfunc f() {}\n", "b/c.py": "x = '<'\n"},
		OracleNewContent: map[string]string{"a.go": "package a\n", "new.txt": ""},
		OraclePatch:      "diff --git a/a.go b/a.go\n", RelevantFiles: []string{"b/c.py"}, Language: "Go",
		Stats: ChangeStats{FilesChanged: 2, LinesAdded: 1, LinesDeleted: 3, Hunks: 2, PatchBytes: 99}, Source: SourceGit}
}

func TestFastInstance(t *testing.T) {
	full := fullInstance()
	b, err := json.Marshal(&full)
	if err != nil {
		t.Fatal(err)
	}
	if !checkFastInstance(t, b) {
		t.Fatalf("fast decoder gave up on json.Marshal's own output: %s", b)
	}
	// json.Marshal writes nil slices and maps as null: still the fast path.
	sparse := Instance{SchemaVersion: 1, ID: "o/r#1"}
	if sb, _ := json.Marshal(&sparse); !checkFastInstance(t, sb) {
		t.Fatalf("fast decoder gave up on %s", sb)
	}
	// Decode takes the fast path into a zero Instance and gets the record.
	var back Instance
	if err := Decode(b, &back); err != nil || !reflect.DeepEqual(back, full) {
		t.Fatalf("Decode: %v\n%+v", err, back)
	}
	accept := []string{
		`{"schema_version":1}`,
		` {"id":"a","linked_issues":[],"code_context":{},"relevant_files":[],"stats":{}} ` + "\n",
		`{"id":"\u00e9\ud83d\ude00\/","unknown":[1,{"x":null},true,-2.5e3],"stats":{"hunks":-0,"other":"x"},"pr_number":-7}`,
		`{"code_context":{"a":"1","a":"2"},"oracle_new_content":{"\u0041":""}}`,
		`{"id":null,"linked_issues":null,"code_context":null,"relevant_files":null,"stats":null,"pr_number":null}`,
		`{"stats":{"hunks":null,"lines_added":2}}`,
	}
	for _, s := range accept {
		if !checkFastInstance(t, []byte(s)) {
			t.Errorf("%s: fast decoder gave up", s)
		}
	}
	giveUp := []string{
		`{"ID":"a"}`, `{"id":"a","id":"b"}`, `{"pr_number":1.0}`, `{"pr_number":1e2}`,
		`{"pr_number":"1"}`, `{"pr_number":99999999999999999999}`, `{"linked_issues":[1,null]}`,
		`{"stats":{"Hunks":1}}`, `{"stats":{"hunks":1,"hunks":2}}`, `{"code_context":{"a":null}}`,
		`{"relevant_files":[null]}`, `{"id":"\ud83d"}`, "{\"id\":\"\xff\"}", `{"id":"a"} x`, `{"id":"a",}`, `[]`, ``, `{"id":"a"`,
	}
	for _, s := range giveUp {
		if checkFastInstance(t, []byte(s)) {
			t.Errorf("%s: fast decoder did not give up", s)
		}
	}
	// Decode into a record that already holds values merges as
	// encoding/json does: the fast path is not taken.
	pre := Instance{ID: "keep", CodeContext: map[string]string{"old": "x"}}
	if err := Decode([]byte(`{"schema_version":1,"code_context":{"new":"y"}}`), &pre); err != nil || pre.ID != "keep" || len(pre.CodeContext) != 2 {
		t.Fatalf("Decode into a filled record: %v %+v", err, pre)
	}
	// Errors still come from encoding/json.
	if err := Decode([]byte(`{"schema_version":1,"pr_number":"x"}`), &Instance{}); err == nil {
		t.Fatal("a string pr_number decoded")
	}
}

func FuzzDecodeInstance(f *testing.F) {
	full := fullInstance()
	b, _ := json.Marshal(&full)
	f.Add(b)
	f.Add([]byte(`{"id":"a","linked_issues":[1,2],"stats":{"hunks":1,"x":[{}]},"pr_number":-0}`))
	f.Add([]byte(`{"Stats":{},"id":"\udc00"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastInstance(t, b)
		// Decode agrees with itself on the fallback path too: whatever it
		// accepts, json.Unmarshal into a zero Instance gives the same,
		// except that a missing schema_version reads as Version.
		var got Instance
		if err := Decode(b, &got); err == nil {
			var want Instance
			if err := json.Unmarshal(b, &want); err != nil {
				return // Decode's json.Decoder path tolerates some trailing bytes Unmarshal rejects
			}
			if want.SchemaVersion == 0 { // missing: Decode reads it as the current version
				want.SchemaVersion = Version
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: Decode gave %+v, json.Unmarshal %+v", b, got, want)
			}
		}
	})
}

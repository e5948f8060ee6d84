package kafkaio

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"swerl/schemas"
)

func TestEncodeDecodeSample(t *testing.T) {
	in := schemas.Sample{Rollout: schemas.Rollout{ID: "g/1", InstanceID: "o/r#1", GroupID: "g", Completion: "x"}, Reward: -1, Advantage: 0.5}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"schema_version":1`) {
		t.Fatalf("encoded sample lacks schema_version: %s", b)
	}
	out, err := Decode[schemas.Sample](b, "swerl.samples@2:7")
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != in.ID || out.Reward != in.Reward || out.Advantage != in.Advantage {
		t.Fatalf("round trip changed the sample: %+v", out)
	}
}

func TestDecodeErrorsNameTheSource(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{`not json`, "invalid character"},
		{`{"schema_version":0,"id":"a"}`, "invalid schema_version 0"},
		{`{"schema_version":99,"id":"a"}`, "newer"},
		{`{"schema_version":1,"id":"a"} {}`, "trailing data"},
		{`{"schema_version":1,"pr_number":"seven"}`, "pr_number"},
		{``, "EOF"},
	} {
		_, err := Decode[schemas.Instance]([]byte(tc.value), "swerl.instances@3:42")
		if err == nil {
			t.Errorf("%q decoded as an instance", tc.value)
			continue
		}
		if !strings.Contains(err.Error(), "swerl.instances@3:42") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not name the source and %q", tc.value, err, tc.want)
		}
	}
	// Non-record types decode as strict JSON.
	if _, err := Decode[map[string]int]([]byte(`{"a":1} x`), "t@0:1"); err == nil || !strings.Contains(err.Error(), "t@0:1") {
		t.Errorf("trailing garbage after plain JSON: %v", err)
	}
	if v, err := Decode[map[string]int]([]byte(`{"a":1}`), "t@0:1"); err != nil || v["a"] != 1 {
		t.Errorf("plain JSON: %v %v", v, err)
	}
}

// FuzzDecode: Kafka values are outside bytes. Decoding never panics; what
// decodes re-encodes and decodes to the same record; errors name the
// source.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"schema_version":1,"id":"o/r#1","code_context":{"a.py":"x"},"oracle_new_content":{"a.py":"y"}}`,
		`{"schema_version":1,"id":"g/0","group_id":"g","reward":-1,"advantage":0.5,"similarities":{"a":0.1}}`,
		`{"schema_version":1,"version":3,"offsets":[{"topic":"t","partition":0,"offset":9}]}`,
		`{"schema_version":0}`, `{"schema_version":1e400}`, `[]`, `null`, `{"schema_version":1,"id":"\ud800"}`,
		"\x00\xff", `{"schema_version":1,"linked_issues":[1,2,"3"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const src = "swerl.x@1:2"
		check := func(err error) {
			if err != nil && !strings.Contains(err.Error(), src) {
				t.Fatalf("error %q does not name the source", err)
			}
		}
		in, err := Decode[schemas.Instance](b, src)
		check(err)
		if err == nil {
			re, err := Encode(in)
			if err != nil {
				t.Fatalf("decoded instance does not encode: %v", err)
			}
			again, err := Decode[schemas.Instance](re, src)
			if err != nil {
				t.Fatalf("re-encoded instance does not decode: %v\n%s", err, re)
			}
			a, _ := json.Marshal(again)
			if string(a) != string(re) {
				t.Fatalf("decode∘encode is not stable:\n%s\n%s", re, a)
			}
		}
		s, err := Decode[schemas.Sample](b, src)
		check(err)
		if err == nil && (math.IsNaN(s.Reward) || math.IsInf(s.Advantage, 0)) {
			t.Fatalf("JSON cannot carry NaN or Inf, yet decoded %v %v", s.Reward, s.Advantage)
		}
		_, err = Decode[schemas.WeightVersion](b, src)
		check(err)
		_, err = Decode[schemas.DeadLetter](b, src)
		check(err)
	})
}

func TestParsePosition(t *testing.T) {
	for _, s := range []string{"swerl.instances@0:0", "a@b@3:17", "t:x@2:9"} {
		p, err := ParsePosition(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if p.String() != s {
			t.Errorf("%s parsed to %+v, prints %s", s, p, p)
		}
	}
	for _, s := range []string{"", "t", "@1:2", "t@1", "t@-1:2", "t@1:-2", "t@x:1", "t@1:9223372036854775808"} {
		if _, err := ParsePosition(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"swerl.samples@3:17", "a@b@1:2", "@:", "t@1:", "x@01:007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			return
		}
		if p.Topic == "" || p.Partition < 0 || p.Offset < 0 {
			t.Fatalf("%q parsed to invalid %+v", s, p)
		}
		q, err := ParsePosition(p.String())
		if err != nil || q != p {
			t.Fatalf("%q → %+v → %q → %+v %v", s, p, p.String(), q, err)
		}
	})
}

func TestMessageSourceAndDeadLetter(t *testing.T) {
	m := Message{Topic: "swerl.instances", Partition: 2, Offset: 41, Key: []byte("o/r#1"), Value: []byte("{")}
	if m.Source() != "swerl.instances@2:41" {
		t.Fatal(m.Source())
	}
	_, err := Decode[schemas.Instance](m.Value, m.Source())
	dl := DeadLetterFor(m, "decode", err)
	if dl.Source != m.Source() || dl.Key != "o/r#1" || string(dl.Value) != "{" || !strings.Contains(dl.Reason, "swerl.instances@2:41") || dl.SchemaVersion != schemas.Version {
		t.Fatalf("%+v", dl)
	}
}

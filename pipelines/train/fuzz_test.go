package train_test

import (
	"strings"
	"testing"

	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
)

// FuzzDecodeRecord feeds arbitrary input values (Kafka values, file lines)
// to the pipeline's decode stage: it never panics, an accepted value is a
// valid instance that encodes again, and a rejected one's error names the
// record's source.
func FuzzDecodeRecord(f *testing.F) {
	in := traintest.Instance(1)
	good, _ := schemas.Encode(&in)
	f.Add(good)
	f.Add([]byte(`{"schema_version":1,"id":"o/r#1","oracle_new_content":{"a.py":"x"}}`))
	f.Add([]byte(`{"schema_version":1,"id":"o/r#1","oracle_new_content":{"":"x"}}`))
	f.Add([]byte(`{"schema_version":2,"id":"o/r#1"}`))
	f.Add([]byte(`{"schema_version":1,"id":`))
	f.Add([]byte("this is not json"))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := train.DecodeRecord(train.Record{Source: "t@0:7", Value: b})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "t@0:7: ") {
				t.Fatalf("error does not name the source: %v", err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted an invalid instance: %v", err)
		}
		if _, err := schemas.Encode(&got); err != nil {
			t.Fatalf("accepted instance does not encode: %v", err)
		}
	})
}

package beamrun

import (
	"errors"
	"testing"
)

func TestRootCause(t *testing.T) {
	dump := "job job-001 failed:\nbundle inst009 failed: while executing Process for Plan[stage-009]:\n1: DataSource[S[stage-009_source@localhost:36681], i0]\n\tcaused by:\n" +
		"DoFn[UID:2, PID:e15, Name: swerl/pipelines/train.sampleSinkFn] failed:\nparquetio: write /o/samples/x.parquet: no space left on device"
	for _, tc := range []struct {
		name     string
		err      string
		prefixes []string
		want     string
	}{
		{"the last line of the dump", dump, []string{"parquetio: "}, "write /o/samples/x.parquet: no space left on device"},
		{"the first prefix on the line", "x\ntrain: parquetio: write F: full", []string{"parquetio: ", "train: "}, "parquetio: write F: full"},
		{"no line holds one", "job failed:\nsomething else", []string{"mine: "}, "job failed:\nsomething else"},
		{"a prefix with nothing after it", "mine: staging: write F\nmine: ", []string{"mine: "}, "staging: write F"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RootCause(errors.New(tc.err), tc.prefixes...); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

package jsonscantest

import (
	"strconv"
	"testing"
)

// fastInt decodes a bare decimal integer and gives up on anything else.
func fastInt(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}

// The check passes where both readings agree and where the fast one
// gives up; it fails the test where the fast one accepts what
// encoding/json rejects or reads a different value.
func TestAgrees(t *testing.T) {
	if !Agrees(t, []byte("12"), fastInt, Unmarshal[int]) {
		t.Error("12: reported as given up")
	}
	if Agrees(t, []byte("1.5"), fastInt, Unmarshal[int]) {
		t.Error("1.5: reported as decoded")
	}
	for _, tc := range []struct {
		in   string
		fast func([]byte) (int, bool)
	}{
		{"012", fastInt}, // Atoi takes a leading zero, JSON does not
		{"7", func([]byte) (int, bool) { return 8, true }},
	} {
		var rec recorder
		Agrees(&rec, []byte(tc.in), tc.fast, Unmarshal[int])
		if !rec.failed {
			t.Errorf("%s: a disagreement passed", tc.in)
		}
	}
}

// recorder is a testing.TB whose Fatalf records the failure and returns,
// so that a failing check can be observed.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(string, ...any) { r.failed = true }

package gpu_test

import (
	"strings"
	"testing"

	"swerl/gpu"
)

// TestAttentionShapeError: the shapes every backend refuses, each with
// an error naming what is wrong, and the edge shapes it takes.
func TestAttentionShapeError(t *testing.T) {
	for _, c := range []struct {
		B, Tq, Tk, NH, NKV, HS int
		want                   string // "" for no error
	}{
		{2, 5, 5, 4, 2, 8, ""},
		{0, 0, 0, 1, 1, 1, ""},  // nothing to do
		{1, 1, 9, 4, 4, 16, ""}, // one query over a cache of nine
		{1, 6, 5, 4, 2, 8, "Tq=6 exceeds Tk=5"},
		{1, 5, 5, 6, 4, 8, "NH=6 is not a multiple of NKV=4"},
		{-1, 5, 5, 4, 2, 8, "bad shape B=-1"},
		{1, -1, 5, 4, 2, 8, "bad shape"},
		{1, 5, 5, 4, 0, 8, "NKV=0"},
		{1, 5, 5, 0, 2, 8, "NH=0"},
		{1, 5, 5, 4, 2, 0, "HS=0"},
	} {
		err := gpu.AttentionShapeError(c.B, c.Tq, c.Tk, c.NH, c.NKV, c.HS)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", c, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error with %q", c, err, c.want)
		}
	}
}

package policy

import (
	"context"
	"math"
	"strings"
	"testing"

	"swerl/gpu/modeldir"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/transforms/rollout"
)

// A policy following an output root never swaps in a version whose
// weights make NaN: one with a NaN weight (refused by modeldir.Load,
// naming the tensor) or one of finite weights of 3e38 (refused by the
// probe). The version served stays and answers.
func TestReloadRefusesWeightsThatMakeNaN(t *testing.T) {
	root := t.TempDir()
	base := t.TempDir()
	if _, err := modeldir.Init(base, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: root, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(v int64, fill func(i int) (float32, bool)) {
		t.Helper()
		mp, err := modeldir.Load(base)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range mp.Model.Tensors() {
			if f, ok := fill(i); ok {
				for j := range x.Data {
					x.Data[j] = f
				}
			}
		}
		if _, err := st.Publish(schemas.WeightVersion{Version: v, Step: v}, func(d string) error {
			_, err := modeldir.WriteCheckpoint(d, base, mp.Model, false)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, func(int) (float32, bool) { return 0, false })
	pol, err := Open(root, Options{MaxSeq: 128, MaxTokens: 4, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	if err := pol.Probe(context.Background()); err != nil {
		t.Fatalf("v0: %v", err)
	}
	for _, tc := range []struct {
		v    int64
		fill func(int) (float32, bool)
		want string
	}{
		{1, func(i int) (float32, bool) { return float32(math.NaN()), i == 3 }, "NaN or infinite"},
		{2, func(int) (float32, bool) { return 3e38, true }, "probe"},
	} {
		publish(tc.v, tc.fill)
		swapped, err := pol.Reload()
		if swapped || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("v%d: swapped %v, %v; want an error with %q", tc.v, swapped, err, tc.want)
		}
		if pol.Version() != 0 {
			t.Fatalf("serving v%d after refusing v%d", pol.Version(), tc.v)
		}
	}
	if _, err := pol.Complete(context.Background(), rollout.Request{Prompt: "still serving", N: 1, MaxTokens: 2}); err != nil {
		t.Fatal(err)
	}
}

package learner

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/files/filestest"
)

// A learner whose Out is a bucket works in a local store of its own:
// version 0 is in the bucket before it is announced, and the
// announcement names the bucket's copy; the caller's Config is left as it
// was; Close removes the local store; a second fresh learner on the same
// bucket is refused with ErrPublished, wrapped so that callers can match
// it.
func TestBucketOutCopiesBeforeAnnouncing(t *testing.T) {
	ctx := context.Background()
	out := filestest.S3(t, "swerl") + "/learn"
	var announced []schemas.WeightVersion
	var local string
	cfg := Config{Out: out, Model: initModel(t), Backend: cpu.New(), Log: quiet(), BatchGroups: 1, MaxStaleness: -1,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64}}
	cfg.Announce = func(ctx context.Context, v schemas.WeightVersion) error {
		st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true, Log: quiet()})
		if err != nil {
			return err
		}
		if _, err := st.Get(v.Version); err != nil {
			t.Errorf("v%d announced before it is in the bucket: %v", v.Version, err)
		}
		announced = append(announced, v)
		return nil
	}
	l, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Out != out {
		t.Errorf("New rewrote the caller's Out: %s", cfg.Out)
	}
	local = l.cfg.Out
	if local == out || strings.Contains(local, "://") {
		t.Fatalf("the learner works in %s, want a local store", local)
	}
	if len(announced) != 1 || announced[0].Version != 0 || !strings.HasPrefix(announced[0].URI, out+"/") {
		t.Fatalf("announced %+v, want v0 under %s", announced, out)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(local); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left the local store %s: %v", local, err)
	}
	if _, err := New(ctx, cfg); !errors.Is(err, ErrPublished) || !strings.Contains(err.Error(), out) {
		t.Errorf("a fresh learner on a bucket with versions: %v, want ErrPublished naming %s", err, out)
	}
}

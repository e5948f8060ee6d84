package learner

import (
	"context"
	"errors"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/schemas"
)

// The announcement of version 0 runs under New's context: an
// announcer that waits (a broker or an engine that never answers) ends
// when the context is cancelled (an interrupt) instead of holding the
// learner's start for good. Version 0 was published before its
// announcement, so a resumed learner starts from it.
func TestNewCancelsTheFirstAnnouncement(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	cfg := Config{Out: t.TempDir(), Model: initModel(t), Backend: cpu.New(), Log: quiet(), BatchGroups: 1, MaxStaleness: -1,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64},
		Announce: func(ctx context.Context, _ schemas.WeightVersion) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}}
	done := make(chan error, 1)
	go func() {
		_, err := New(ctx, cfg)
		done <- err
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("New cancelled during the announcement: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("New still waits for the announcement 30s after its context was cancelled")
	}
	cfg.Resume, cfg.Announce = true, nil
	l, err := New(context.Background(), cfg)
	if err != nil || l.Version() != 0 {
		t.Fatalf("resumed: %v", err)
	}
}

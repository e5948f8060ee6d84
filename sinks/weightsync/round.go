package weightsync

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"swerl/sinks/checkpoint"
)

// SpecSyncer returns the Syncer of a run whose rollouts come from the HTTP
// policy spec (Spec.SyncConfig: every engine of the spec), recording what
// each engine holds in t, the table the run's rollout policies are opened
// with (rollout.WithTable), so their next requests name it. timeout bounds
// each engine request (Config.Timeout; 0: its default). It returns nil
// when the spec turns the sync off (sync=false).
func SpecSyncer(spec string, t *Table, timeout time.Duration, log *slog.Logger) (*Syncer, error) {
	sp, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	cfg, ok := sp.SyncConfig()
	if !ok {
		return nil, nil
	}
	cfg.Table, cfg.Timeout, cfg.Log = t, timeout, log
	return New(cfg)
}

// Round returns the sync of a run that waits for each push before the
// round that samples the version (pipelines/rl.Config.Sync): it pushes
// the version's folder under out (checkpoints/vNNNNNN) to every engine,
// bounded by each request's timeout and the retries. A version an engine
// refuses or does not answer in time is logged, and the run goes on: that
// engine keeps the newest version it holds, the rollouts keep naming it,
// and their samples carry its version, so the staleness of what the
// learner trains on stays exact. Only a cancelled context is an error,
// and it ends the push in flight at once.
func (s *Syncer) Round(out string) func(ctx context.Context, version int64) error {
	return func(ctx context.Context, version int64) error {
		err := s.Push(ctx, version, versionDir(out, version))
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.cfg.Log.Warn("weightsync: an engine did not load the new version; its rollouts stay on the version it holds", "version", version, "err", err.Error())
		}
		return nil
	}
}

// versionDir is the folder of version under the output root out.
func versionDir(out string, version int64) string {
	return filepath.Join(out, checkpoint.CheckpointsDir, checkpoint.VersionDir(version))
}

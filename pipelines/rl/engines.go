package rl

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"swerl/internal/engineapi"
	"swerl/sinks/checkpoint"
	"swerl/sinks/weightsync"
	"swerl/transforms/rollout"
)

// sync calls the Sync hook, if any.
func (c *Config) sync(ctx context.Context, version int64) error {
	if c.Sync == nil {
		return nil
	}
	if err := c.Sync(ctx, version); err != nil {
		return fmt.Errorf("rl: syncing version %d to the engines: %w", version, err)
	}
	return nil
}

// SpecSync returns the Config.Sync of a run whose rollouts come from the
// HTTP policy spec (sinks/weightsync.ConfigFromSpec of each of its engines), or
// nil when the spec turns the sync off. Each version an engine holds is
// recorded in served, the table the run's rollout policies were opened
// with (rollout.WithServed), so their next requests name it. timeout
// bounds each engine request (weightsync.Config's Timeout; 0: its default).
func SpecSync(spec, out string, served *rollout.Served, timeout time.Duration, log *slog.Logger) (func(ctx context.Context, version int64) error, error) {
	specs, err := rollout.EngineSpecs(spec)
	if err != nil {
		return nil, err
	}
	var cfg weightsync.Config
	for i, s := range specs {
		c, ok, err := weightsync.ConfigFromSpec(s)
		if err != nil || !ok {
			return nil, err
		}
		if i == 0 {
			cfg = c
			continue
		}
		cfg.Engines = append(cfg.Engines, c.Engines...)
	}
	cfg.Log, cfg.Timeout = log, timeout
	cfg.OnHeld = func(e weightsync.Engine, v engineapi.ServedVersion) { served.Set(e.URL, v) }
	s, err := weightsync.New(cfg)
	if err != nil {
		return nil, err
	}
	return EngineSync(s, out, log), nil
}

// EngineSync returns a Config.Sync that pushes each version's folder under
// out (checkpoints/vNNNNNN) to the engines of s. The round that samples a
// version waits for its push, which each request's timeout and the
// syncer's retries bound. A version an engine refuses or does not answer
// in time is logged, and the run goes on: that engine keeps the newest
// version it holds, the rollouts keep naming it, and their samples carry
// its version, so the staleness of what the learner trains on stays
// exact. Only a cancelled context stops the run, and it ends the push in
// flight at once.
func EngineSync(s *weightsync.Syncer, out string, log *slog.Logger) func(ctx context.Context, version int64) error {
	return func(ctx context.Context, version int64) error {
		dir := filepath.Join(out, checkpoint.CheckpointsDir, checkpoint.VersionDir(version))
		err := s.Push(ctx, version, dir)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			log.Warn("rl: an engine did not load the new version; its rollouts stay on the version it holds", "version", version, "err", err.Error())
		}
		return nil
	}
}

package learner

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/files"
)

// bucketOut lets a learner whose Out is a bucket (gs://…, s3://…) work in
// local folders, as it does for a local Out: it works in a local
// temporary store, and every version it publishes is copied, with its
// step record, into the store in the bucket before it is announced (the
// announcement names the bucket's copy). With Resume the bucket's newest
// good version and its record are first copied into the local store.
// It rewrites Out and Announce of cfg, New's own copy of the caller's
// Config, and does nothing for a local Out. done removes the local store.
func bucketOut(ctx context.Context, cfg *Config, log *slog.Logger) (done func(), err error) {
	if !files.IsRemote(cfg.Out) {
		return func() {}, nil
	}
	remote, err := checkpoint.Open(checkpoint.Config{Dir: cfg.Out, Log: log, Keep: cfg.KeepCheckpoints, Pin: []int64{cfg.Reference}})
	if err != nil {
		return nil, err
	}
	rows, err := remote.Versions()
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 && !cfg.Resume {
		return nil, fmt.Errorf("learner: %s has %d published versions (latest v%d): %w", remote.Dir(), len(rows), rows[len(rows)-1].Version, ErrPublished)
	}
	dir, err := os.MkdirTemp("", "swerl-learn-")
	if err != nil {
		return nil, err
	}
	done = func() { os.RemoveAll(dir) }
	local, err := checkpoint.Open(checkpoint.Config{Dir: dir, Log: log, Keep: cfg.KeepCheckpoints, Pin: []int64{cfg.Reference}})
	if err == nil && len(rows) > 0 {
		err = pullVersion(ctx, remote, local, dir, cfg.Reference)
	}
	if err != nil {
		done()
		return nil, err
	}
	bucket, announce := cfg.Out, cfg.Announce
	cfg.Out = dir
	cfg.Announce = func(ctx context.Context, row schemas.WeightVersion) error {
		rec := RecordPath(dir, row.Version)
		if _, err := os.Stat(rec); err == nil {
			if err := files.Upload(ctx, rec, files.Join(bucket, RecordDir, files.Base(rec))); err != nil {
				return err
			}
		}
		copied, err := remote.CopyFrom(local, row.Version)
		if err != nil {
			return fmt.Errorf("learner: copy v%d to %s: %w", row.Version, bucket, err)
		}
		if announce != nil {
			return announce(ctx, copied)
		}
		return nil
	}
	log.Info("learner: working in a local store, copying each version to the bucket", "local", dir, "out", bucket)
	return done, nil
}

// pullVersion copies remote's newest good version, and its step record if
// there is one, into the empty local store at dir; the KL reference
// version ref first, when it is older and good, so that the learner finds
// it as in a local --out.
func pullVersion(ctx context.Context, remote, local *checkpoint.Store, dir string, ref int64) error {
	v, err := remote.LatestGood()
	if err != nil {
		return err
	}
	if r, err := remote.Get(ref); err == nil && ref < v.Version && remote.Verify(r) == nil {
		if _, err := local.CopyFrom(remote, ref); err != nil {
			return err
		}
	}
	if _, err := local.CopyFrom(remote, v.Version); err != nil {
		return err
	}
	rec := RecordPath(dir, v.Version)
	src := files.Join(remote.Dir(), RecordDir, files.Base(rec))
	if ok, err := files.Exists(ctx, src); err != nil || !ok {
		return err
	}
	b, err := files.ReadFile(ctx, src)
	if err != nil {
		return err
	}
	return files.WriteFile(ctx, rec, b)
}

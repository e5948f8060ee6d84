package main

import (
	"context"
	"fmt"
	"os"

	"swerl/gpu/learner"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/files"
)

// bucketOut lets `swerl learn --out gs://…|s3://…` work with a learner
// that reads and writes local folders: the learner works in a local
// temporary store, and every version it publishes is copied, with its
// step record, into the store in the bucket before it is announced (the
// announcement names the bucket's copy). With --resume the bucket's newest
// good version and its record are first copied into the local store.
// It does nothing for a local --out. done removes the local store.
func bucketOut(ctx context.Context, cfg *learner.Config) (done func(), err error) {
	if !files.IsRemote(cfg.Out) {
		return func() {}, nil
	}
	remote, err := checkpoint.Open(checkpoint.Config{Dir: cfg.Out, Log: cfg.Log, Keep: cfg.KeepCheckpoints, Pin: []int64{cfg.Reference}})
	if err != nil {
		return nil, err
	}
	rows, err := remote.Versions()
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 && !cfg.Resume {
		return nil, fmt.Errorf("learner: %s has %d published versions (latest v%d): %w", remote.Dir(), len(rows), rows[len(rows)-1].Version, learner.ErrPublished)
	}
	dir, err := os.MkdirTemp("", "swerl-learn-")
	if err != nil {
		return nil, err
	}
	done = func() { os.RemoveAll(dir) }
	local, err := checkpoint.Open(checkpoint.Config{Dir: dir, Log: cfg.Log, Keep: cfg.KeepCheckpoints, Pin: []int64{cfg.Reference}})
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
		rec := learner.RecordPath(dir, row.Version)
		if _, err := os.Stat(rec); err == nil {
			if err := files.Upload(ctx, rec, files.Join(bucket, learner.RecordDir, files.Base(rec))); err != nil {
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
	cfg.Log.Info("learner: working in a local store, copying each version to the bucket", "local", dir, "out", bucket)
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
	rec := learner.RecordPath(dir, v.Version)
	src := files.Join(remote.Dir(), learner.RecordDir, files.Base(rec))
	if ok, err := files.Exists(ctx, src); err != nil || !ok {
		return err
	}
	b, err := files.ReadFile(ctx, src)
	if err != nil {
		return err
	}
	return files.WriteFile(ctx, rec, b)
}

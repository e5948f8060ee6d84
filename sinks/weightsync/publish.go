package weightsync

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	"swerl/internal/engineapi"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Syncer pushes each version to the engines, in the background; nil:
	// no engines. Its Config.OnPushed, if any, still hears every push.
	Syncer *Syncer
	// Out is the learner's output root: the engines get the absolute path
	// of checkpoints/vNNNNNN under it, and a version the learner resumed
	// from is looked up in its index.parquet to be announced again.
	Out string
	// LoRA says the versions are PEFT adapters: each announcement names the
	// adapter a version is loaded as (engineapi.AdapterName).
	LoRA bool
	// Announce writes one announcement to the weights topic
	// (gpu/learner.Announcer.Announce); nil: no announcements (an offline
	// learner).
	Announce func(context.Context, schemas.WeightVersion) error
	// Log gets what goes wrong without stopping the learner. Default
	// slog.Default().
	Log *slog.Logger
}

// Publisher is the weight sync of a learner in its own process (swerl
// learn). Its Publish is the learner's Config.Announce: it announces each
// version on the weights topic, naming the adapter of a LoRA version, and
// hands it to the background push (Async), so the learner never waits for
// an engine. Once a push loaded a version on some engines, the version is
// announced again naming exactly those engines, so rollout workers in
// other processes (swerl train --follow) name it there. Safe for
// concurrent use.
type Publisher struct {
	cfg  PublisherConfig
	out  string // absolute Out
	push *Async // nil: no engines

	mu        sync.Mutex
	started   bool                            // a version was published or Start pushed one
	published map[int64]schemas.WeightVersion // recent announcements, to announce again with their engines
}

// NewPublisher starts the background push (until ctx ends or Close) and
// returns the publisher. With Announce set it takes cfg.Syncer's OnPushed
// (calling the one it had after its own), so a Syncer serves one
// Publisher.
func NewPublisher(ctx context.Context, cfg PublisherConfig) (*Publisher, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	out, err := filepath.Abs(cfg.Out) // the engines run in other processes
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, out: out, published: map[int64]schemas.WeightVersion{}}
	if s := cfg.Syncer; s != nil {
		if cfg.Announce != nil {
			next := s.cfg.OnPushed
			s.cfg.OnPushed = func(version int64, adapter string, engines []string) {
				p.pushed(ctx, version, adapter, engines)
				if next != nil {
					next(version, adapter, engines)
				}
			}
		}
		p.push = s.Async(ctx)
	}
	return p, nil
}

// Publish announces v and submits it to the background push; an error is
// the announcement's (the push reports its own failures in the log).
func (p *Publisher) Publish(ctx context.Context, v schemas.WeightVersion) error {
	if p.cfg.Announce != nil {
		if p.cfg.LoRA {
			v.Adapter = engineapi.AdapterName(v.Version)
		}
		p.mu.Lock()
		p.published[v.Version] = v
		for old := range p.published {
			if old < v.Version-16 { // pushes lag a few versions at most; skipped ones are never confirmed
				delete(p.published, old)
			}
		}
		p.mu.Unlock()
		if err := p.cfg.Announce(ctx, v); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	p.submit(v.Version)
	return nil
}

// Start pushes version, the one the learner starts from, unless a version
// was published already: a resumed learner publishes nothing at start
// (engines that hold it already are skipped).
func (p *Publisher) Start(version int64) {
	p.mu.Lock()
	started := p.started
	p.started = true
	p.mu.Unlock()
	if !started {
		p.submit(version)
	}
}

func (p *Publisher) submit(version int64) {
	if p.push != nil {
		p.push.Submit(version, versionDir(p.out, version))
	}
}

// Pushing reports whether the publisher pushes to engines.
func (p *Publisher) Pushing() bool { return p.push != nil }

// Wait returns when every version submitted was pushed (see Async.Wait);
// at once without engines.
func (p *Publisher) Wait(ctx context.Context) error {
	if p.push == nil {
		return nil
	}
	return p.push.Wait(ctx)
}

// Close cancels the push in flight and drops those waiting; the engines
// keep what they confirmed. Call it before closing what Announce writes
// to, so that no push announces on a closed writer.
func (p *Publisher) Close() {
	if p.push != nil {
		p.push.Close()
	}
}

// pushed announces version again, naming the engines that hold it.
func (p *Publisher) pushed(ctx context.Context, version int64, adapter string, engines []string) {
	p.mu.Lock()
	v, ok := p.published[version]
	p.mu.Unlock()
	if !ok {
		// The version the learner resumed from, published by an earlier
		// process: its index row.
		var rows []schemas.WeightVersion
		st, err := checkpoint.Open(checkpoint.Config{Dir: p.cfg.Out, ReadOnly: true})
		if err == nil {
			rows, err = st.Versions()
		}
		i := slices.IndexFunc(rows, func(r schemas.WeightVersion) bool { return r.Version == version })
		if i < 0 {
			p.cfg.Log.Warn("weightsync: the engines hold a version the index does not list; not announced", "version", version, "err", err)
			return
		}
		v = rows[i]
	}
	v.Adapter, v.Engines = adapter, engines
	if err := p.cfg.Announce(ctx, v); err != nil && ctx.Err() == nil {
		p.cfg.Log.Warn("weightsync: announcing the engines that hold a version failed; workers following the topic keep the version they name", "version", version, "err", err.Error())
	}
}

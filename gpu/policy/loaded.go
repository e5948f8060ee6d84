package policy

import (
	"log/slog"

	"swerl/gpu/modeldir"
)

// withDefaults fills the zero fields of o (see Options).
func (o Options) withDefaults() Options {
	if o.Device == "" {
		o.Device = "cpu"
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = 256
	}
	if o.Temperature == 0 {
		o.Temperature = 1
	}
	if o.Batch == 0 {
		o.Batch = 32
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Loaded returns the version served: its folder, weights, tokenizer, stop
// ids and version. The weights are the sampler's source and must not be
// changed; swerl serve copies them to merge a LoRA adapter.
func (p *Policy) Loaded() *modeldir.Policy {
	st := p.cur.Load()
	return &modeldir.Policy{Dir: st.dir, Model: st.model, Tokenizer: st.tok, Stop: st.stop, Version: st.version}
}

// FromLoaded serves weights already in memory (mp.Model, with its
// tokenizer and stop ids), reporting mp.Version; it never reloads. swerl
// serve serves a base model with a LoRA adapter merged this way.
func FromLoaded(mp *modeldir.Policy, opts Options) (*Policy, error) {
	opts = opts.withDefaults()
	be, err := openDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	p := &Policy{path: mp.Dir, opts: opts, be: be, stop: make(chan struct{}), done: make(chan struct{})}
	st, err := p.stateFor(mp)
	if err != nil {
		return nil, err
	}
	p.cur.Store(st)
	close(p.done)
	return p, nil
}

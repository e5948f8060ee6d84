// Package policy is the in-process policy: a model directory (or an output
// root with checkpoints) sampled with gpu.Sampler behind the
// rollout.Policy interface, registered as the rollout scheme "model:".
//
// Spec: model:PATH[?max_seq=N&batch=N&poll=DURATION&device=NAME]. PATH is a model
// directory (config.json, model.safetensors, tokenizer files) or an output
// root (index.parquet + checkpoints/), which serves the newest checkpoint
// whose hashes verify and polls index.parquet for newer ones (every poll,
// default 2s; poll=0 disables). A new version is loaded beside the old
// one and swapped in between requests: a request in flight finishes all
// its completions on the weights it started with and reports that version.
//
// All completions in flight — the N of a request and those of concurrent
// requests — are decoded together by one gpu.BatchSampler of up to batch
// sequences (default 32): one forward pass a token for all of them, a
// finished completion handing its slot to a waiting one. A completion's
// tokens depend only on its prompt, parameters and seed, not on what it
// was batched with.
//
// Completions carry the prompt and completion token ids and the sampler's
// per-token log-probabilities (temperature 1, untruncated: the quantity
// the learner recomputes), so the learner can form exact GRPO ratios.
package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"swerl/gpu"
	"swerl/gpu/device"
	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/tokenizer"
	"swerl/sinks/checkpoint"
	"swerl/transforms/rollout"
)

// Scheme is the rollout scheme this package registers.
const Scheme = "model"

// openDevice opens the backend of device=NAME (Options.Device): the
// devices of package gpu/device, the same table as swerl's --device.
func openDevice(name string) (gpu.Backend, error) {
	open, ok := device.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("policy: device %q is not available in this build", name)
	}
	return open()
}

func init() {
	rollout.RegisterScheme(Scheme, func(spec string) (rollout.Policy, error) {
		path, opts, err := ParseSpec(spec)
		if err != nil {
			return nil, err
		}
		return Open(path, opts)
	})
}

// Options configure a Policy. The zero value is valid.
type Options struct {
	// Device names the compute backend. Default "cpu".
	Device string
	// MaxSeq bounds prompt + completion in tokens (it sizes the KV cache).
	// Default min(1024, max_position_embeddings).
	MaxSeq int
	// Batch is the most completions decoded together (each holds a KV
	// cache of MaxSeq tokens once used). Default 32.
	Batch int
	// Poll is how often an output root's index is checked for a newer
	// version; 0 (or negative) never reloads. ParseSpec and swerl serve
	// default to DefaultPoll.
	Poll time.Duration
	// MaxTokens and Temperature are used when a request leaves them zero.
	// Defaults 256 and 1.0 (RL rollouts sample the raw distribution).
	MaxTokens   int
	Temperature float64
	// BF16Weights rounds every weight served to bfloat16 (ties to even),
	// as an engine serving a bf16 copy of a float32 trainer's weights
	// does: its log-probabilities then differ from the trainer's by a real
	// engine–trainer mismatch (the experiments of the off-policy
	// corrections use it).
	BF16Weights bool
	// Log receives reload notices and skipped corrupt checkpoints.
	// Default slog.Default().
	Log *slog.Logger
}

// DefaultPoll is how often a policy opened from a spec without poll=
// (and swerl serve without --poll) checks an output root for a newer
// version.
const DefaultPoll = 2 * time.Second

// ParseSpec splits "model:PATH?k=v&…" into PATH and Options; Poll is
// DefaultPoll unless the spec says poll= (0: never).
func ParseSpec(spec string) (string, Options, error) {
	o := Options{Poll: DefaultPoll}
	rest, ok := strings.CutPrefix(spec, Scheme+":")
	if !ok {
		return "", o, fmt.Errorf("policy: spec %q does not start with %s:", spec, Scheme)
	}
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		return "", o, fmt.Errorf("policy: spec %q names no directory", spec)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", o, fmt.Errorf("policy: spec %q: %w", spec, err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "max_seq":
			o.MaxSeq, err = positiveInt(v)
		case "max_tokens":
			o.MaxTokens, err = positiveInt(v)
		case "batch":
			o.Batch, err = positiveInt(v)
		case "poll":
			o.Poll, err = time.ParseDuration(v)
		case "device":
			o.Device = v
		case "bf16":
			o.BF16Weights, err = strconv.ParseBool(v)
		case "temperature":
			o.Temperature, err = strconv.ParseFloat(v, 64)
			if err == nil && o.Temperature < 0 {
				err = errors.New("want a number ≥ 0")
			}
		default:
			return "", o, fmt.Errorf("policy: spec %q: unknown option %q (have max_seq, max_tokens, batch, poll, device, temperature, bf16)", spec, k)
		}
		if err != nil {
			return "", o, fmt.Errorf("policy: spec %q: %s=%q: %w", spec, k, v, err)
		}
	}
	return path, o, nil
}

// positiveInt parses a count that must be above zero.
func positiveInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n <= 0 {
		err = errors.New("want a positive integer")
	}
	return n, err
}

// state is one loaded version: its weights in a batch sampler, and the
// completions of this version in flight.
type state struct {
	version int64
	dir     string
	model   *gpu.Model
	tok     *tokenizer.Tokenizer
	stop    []int32
	maxSeq  int

	mu      sync.Mutex // guards sampler, owner and driving
	sampler *gpu.BatchSampler
	owner   map[*gpu.Seq]owner    // the request of each pending completion
	watch   map[*gpu.Seq]*watcher // the pending completions whose tokens are reported as sampled
	driving bool                  // a drive goroutine is stepping the sampler
}

// owner is the request a pending completion belongs to: where it is
// reported, and the request's context, which the drive loop checks before
// every step so that a cancelled request (a client gone) samples nothing
// more, however long its own goroutine takes to notice.
type owner struct {
	done chan<- finished
	ctx  context.Context
}

// watcher reports the tokens of one completion as they are sampled
// (Params.OnToken).
type watcher struct {
	fn    func(Token)
	index int // the completion's index in its request
	sent  int // tokens reported so far
}

// Token is one sampled token, reported by Params.OnToken.
type Token struct {
	Version    int64 // the version sampling it
	Completion int   // the completion's index in the request (0…N-1)
	ID         int32
	LogProb    float32
}

// finished reports one completion of a request, or the error that ended it.
type finished struct {
	seq *gpu.Seq
	err error
}

// Policy implements rollout.Policy over a local model. It is safe for
// concurrent use: the completions of concurrent requests are batched
// together, and one forward step at a time runs on the backend (which is
// not safe for concurrent use and uses every core itself).
type Policy struct {
	path string
	opts Options
	be   gpu.Backend

	run sync.Mutex // serialises the backend
	cur atomic.Pointer[state]
	// seen is the index's newest row (version@created_at) when Reload last
	// resolved it; while it stays the same, Reload verifies nothing.
	seen atomic.Pointer[string]

	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool

	sampled atomic.Int64 // tokens sampled, every version (TokensSampled)
	polls   atomic.Int64 // checks of the output root's index done (Polls)

	afterCompletion func(i int) // test hook, called after completion i of a request
}

// Open loads the model PATH names (see the package documentation).
func Open(path string, opts Options) (*Policy, error) {
	opts = opts.withDefaults()
	be, err := openDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	p := &Policy{path: path, opts: opts, be: be, stop: make(chan struct{}), done: make(chan struct{})}
	st, err := p.load()
	if err != nil {
		return nil, err
	}
	p.cur.Store(st)
	if modeldir.IsRoot(path) && opts.Poll > 0 {
		go p.watch()
	} else {
		close(p.done)
	}
	return p, nil
}

// load resolves and loads the newest good version into a new sampler.
func (p *Policy) load() (*state, error) {
	mp, err := modeldir.Open(p.path, p.opts.Log)
	if err != nil {
		return nil, err
	}
	return p.stateFor(mp)
}

func (p *Policy) stateFor(mp *modeldir.Policy) (*state, error) {
	maxSeq := p.opts.MaxSeq
	if maxSeq == 0 {
		maxSeq = 1024
	}
	maxSeq = min(maxSeq, mp.Model.Config.MaxPositionEmbeddings)
	if p.opts.BF16Weights {
		roundBF16(mp.Model)
	}
	p.run.Lock()
	defer p.run.Unlock()
	s, err := gpu.NewBatchSampler(mp.Model, p.be, maxSeq, p.opts.Batch)
	if err != nil {
		return nil, fmt.Errorf("policy: %s: %w", mp.Dir, err)
	}
	return &state{version: mp.Version, dir: mp.Dir, model: mp.Model, tok: mp.Tokenizer, stop: mp.Stop, sampler: s, maxSeq: maxSeq,
		owner: make(map[*gpu.Seq]owner), watch: make(map[*gpu.Seq]*watcher)}, nil
}

// Reload loads the newest good version when it is newer than the one
// served, and reports whether it swapped.
//
// On an output root it first reads the index's newest row: while that row
// is the one the last Reload resolved, nothing changed and no checkpoint
// is hashed (resolving verifies the newest checkpoint's sha256s, optimizer
// state included). A damaged index is an error; the caller keeps serving.
// So is a version whose weights are NaN or infinite (modeldir.Load) or
// make a NaN on the probe prompt (Probe): it never replaces the version
// served.
func (p *Policy) Reload() (bool, error) {
	cur := p.cur.Load()
	var newest string
	if modeldir.IsRoot(p.path) {
		st, err := checkpoint.Open(checkpoint.Config{Dir: p.path, Log: p.opts.Log, ReadOnly: true})
		if err != nil {
			return false, err
		}
		row, ok, err := st.Newest()
		if err != nil {
			return false, err
		}
		if ok {
			newest = fmt.Sprintf("%d@%s", row.Version, row.CreatedAt)
			if seen := p.seen.Load(); (seen != nil && *seen == newest) || (seen == nil && row.Version == cur.version) {
				p.seen.Store(&newest)
				return false, nil
			}
		}
	}
	dir, v, step, err := modeldir.Resolve(p.path, p.opts.Log)
	if err != nil {
		return false, err
	}
	if newest != "" {
		p.seen.Store(&newest)
	}
	if v == cur.version && dir == cur.dir {
		return false, nil
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		return false, err
	}
	mp.Version, mp.Step = v, step
	st, err := p.stateFor(mp)
	if err != nil {
		return false, err
	}
	// Finite weights that overflow forward are refused as NaN ones are
	// (modeldir.Load): the version served stays.
	if err := p.probe(context.Background(), st); err != nil {
		return false, err
	}
	p.cur.Store(st)
	p.opts.Log.Info("policy: now serving a new weight version", "version", v, "dir", dir, "previous", cur.version)
	return true, nil
}

func (p *Policy) watch() {
	defer close(p.done)
	t := time.NewTicker(p.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if _, err := p.Reload(); err != nil {
				p.opts.Log.Warn("policy: reload failed; still serving the previous version", "err", err.Error())
			}
			p.polls.Add(1)
		}
	}
}

// Polls is how many times the output root's index has been checked for
// a newer version (every Options.Poll), failed checks included.
func (p *Policy) Polls() int64 { return p.polls.Load() }

// Version is the weight version new requests are served by (-1 for a
// plain model directory).
func (p *Policy) Version() int64 { return p.cur.Load().version }

// TokensSampled is the number of tokens sampled so far, over every
// request and version: work done, whether or not anyone received it
// (swerl serve's tests count the tokens sampled after a client left).
func (p *Policy) TokensSampled() int64 { return p.sampled.Load() }

// Tokenizer returns the tokenizer of the version served.
func (p *Policy) Tokenizer() *tokenizer.Tokenizer { return p.cur.Load().tok }

// Close stops the reload watcher.
func (p *Policy) Close() error {
	if p.closed.CompareAndSwap(false, true) {
		close(p.stop)
	}
	<-p.done
	return nil
}

// ErrPromptTooLong reports a prompt that leaves no room to generate.
var ErrPromptTooLong = errors.New("policy: prompt too long")

// Params are the sampling parameters of one request beyond rollout.Request.
type Params struct {
	TopK int
	// Stop are extra stop token ids (the model's eos tokens always stop).
	Stop []int32
	// OnToken, when set, is called with each token as soon as the step
	// that sampled it ends, in order within each completion, and before
	// the call returns. It runs on the decoding goroutine with the batch
	// held: it must not block (swerl serve queues the tokens for its
	// streaming writer).
	OnToken func(Token)
	// Forced continue the prompt with tokens that are scored, not
	// sampled (gpu.SamplingParams.Forced): each completion's Tokens and
	// LogProbs start with them, and MaxTokens counts the tokens sampled
	// after them. The prompt and Forced must fit the context together.
	Forced []int32
	// ScoreOnly samples nothing after Forced (which must not be empty).
	ScoreOnly bool
	// TopLogProbs records each step's most likely tokens
	// (gpu.SamplingParams.TopLogProbs), returned by CompleteTokensRaw.
	TopLogProbs int
}

// Complete samples req.N completions of the chat prompt (system + user
// message, rendered with the model's chat template). Completion i uses
// seed req.Seed+i, so a request is reproducible.
func (p *Policy) Complete(ctx context.Context, req rollout.Request) (rollout.Response, error) {
	return p.CompleteWith(ctx, req, Params{})
}

// CompleteWith is Complete with extra sampling parameters.
func (p *Policy) CompleteWith(ctx context.Context, req rollout.Request, extra Params) (rollout.Response, error) {
	return p.CompleteMessages(ctx, tokenizer.ChatMessages(req.System, req.Prompt), req, extra)
}

// CompleteMessages samples req.N completions of a whole conversation
// (req.System and req.Prompt are ignored), rendered with the chat
// template and a generation prompt.
func (p *Policy) CompleteMessages(ctx context.Context, msgs []tokenizer.Message, req rollout.Request, extra Params) (rollout.Response, error) {
	t0 := time.Now()
	st := p.cur.Load()
	prompt, err := st.tok.EncodeMessages(msgs)
	if err != nil {
		return rollout.Response{PolicyVersion: st.version}, fmt.Errorf("policy: instance %q: %w", req.InstanceID, err)
	}
	return p.sample(ctx, st, req, prompt, extra, t0)
}

// CompleteTokens samples req.N completions of an already tokenized prompt.
func (p *Policy) CompleteTokens(ctx context.Context, req rollout.Request, prompt []int32, extra Params) (rollout.Response, error) {
	resp, _, err := p.sampleRaw(ctx, p.cur.Load(), req, prompt, extra, time.Now())
	return resp, err
}

// CompleteTokensRaw is CompleteTokens that also returns the sampler's
// completions, with the top log-probabilities and ranks extra.TopLogProbs
// asks for (Forced tokens first, as in the response's Tokens).
func (p *Policy) CompleteTokensRaw(ctx context.Context, req rollout.Request, prompt []int32, extra Params) (rollout.Response, []gpu.Completion, error) {
	return p.sampleRaw(ctx, p.cur.Load(), req, prompt, extra, time.Now())
}

// MaxSeq is the context of the version served: prompt and completion
// together are at most this many tokens (vLLM's max_model_len).
func (p *Policy) MaxSeq() int { return p.cur.Load().maxSeq }

func (p *Policy) sample(ctx context.Context, st *state, req rollout.Request, prompt []int32, extra Params, t0 time.Time) (rollout.Response, error) {
	resp, _, err := p.sampleRaw(ctx, st, req, prompt, extra, t0)
	return resp, err
}

// sampleRaw samples the completions of prompt with version st: the
// response and the sampler's completions.
func (p *Policy) sampleRaw(ctx context.Context, st *state, req rollout.Request, prompt []int32, extra Params, t0 time.Time) (rollout.Response, []gpu.Completion, error) {
	resp := rollout.Response{PolicyVersion: st.version}
	n := req.N
	if n <= 0 {
		n = 1
	}
	maxTok := req.MaxTokens
	if maxTok <= 0 {
		maxTok = p.opts.MaxTokens
	}
	if extra.ScoreOnly {
		if len(extra.Forced) == 0 {
			return resp, nil, fmt.Errorf("policy: instance %q: nothing to score", req.InstanceID)
		}
		maxTok = 0
	}
	if room := len(prompt) + len(extra.Forced) + min(maxTok, 1); room > st.maxSeq {
		return resp, nil, fmt.Errorf("%w: instance %q: %d prompt tokens, the context is %d (raise max_seq up to max_position_embeddings)", ErrPromptTooLong, req.InstanceID, len(prompt)+len(extra.Forced), st.maxSeq)
	}
	temp := req.Temperature // the sampler's 0 is greedy
	switch {
	case req.Greedy:
		temp = 0
	case temp == 0:
		temp = p.opts.Temperature
	}
	sp := gpu.SamplingParams{
		Temperature: temp, TopP: req.TopP, TopK: extra.TopK, MaxTokens: len(extra.Forced) + maxTok,
		StopTokens: append(append([]int32(nil), st.stop...), extra.Stop...),
		Forced:     extra.Forced, TopLogProbs: extra.TopLogProbs,
	}
	if err := ctx.Err(); err != nil {
		return resp, nil, err
	}
	// Completion i uses seed req.Seed+i; all n join the batch of this
	// version's sampler and are reported on done as they finish.
	done := make(chan finished, n)
	seqs := make([]*gpu.Seq, n)
	index := make(map[*gpu.Seq]int, n)
	st.mu.Lock()
	for i := range n {
		sp.Seed = uint64(req.Seed) + uint64(i)
		q, err := st.sampler.Submit(prompt, sp)
		if err != nil {
			st.cancel(seqs[:i])
			st.mu.Unlock()
			return resp, nil, fmt.Errorf("policy: instance %q: %w", req.InstanceID, err)
		}
		seqs[i], index[q] = q, i
		st.owner[q] = owner{done: done, ctx: ctx}
		if extra.OnToken != nil {
			st.watch[q] = &watcher{fn: extra.OnToken, index: i}
		}
	}
	if !st.driving {
		st.driving = true
		go p.drive(st)
	}
	st.mu.Unlock()
	for range n {
		var f finished
		if ctx.Err() == nil {
			select {
			case f = <-done:
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil || f.err != nil {
			st.mu.Lock()
			st.cancel(seqs)
			st.mu.Unlock()
			if err != nil {
				return resp, nil, err
			}
			return resp, nil, fmt.Errorf("policy: instance %q: %w", req.InstanceID, f.err)
		}
		if p.afterCompletion != nil && req.InstanceID != probeInstance {
			p.afterCompletion(index[f.seq])
		}
	}
	resp.Completions = make([]rollout.Completion, n)
	raw := make([]gpu.Completion, n)
	for i, q := range seqs {
		c := q.Completion()
		raw[i] = c
		body := c.Tokens
		if c.FinishReason == "stop" {
			body = body[:len(body)-1]
		}
		resp.Completions[i] = rollout.Completion{
			Text: DecodeLenient(st.tok, body), Tokens: c.Tokens, PromptTokens: prompt,
			LogProbs: c.LogProbs, FinishReason: c.FinishReason,
		}
	}
	resp.LatencyMS = time.Since(t0).Milliseconds()
	return resp, raw, nil
}

// cancel drops the completions of seqs that are still pending; st.mu is
// held.
func (st *state) cancel(seqs []*gpu.Seq) {
	for _, q := range seqs {
		if _, ok := st.owner[q]; ok {
			st.sampler.Cancel(q)
			delete(st.owner, q)
		}
		delete(st.watch, q)
	}
}

// drive steps st's sampler while completions are pending, one forward
// step at a time on the backend, and reports each finished completion to
// its request. Before each step it drops the completions of cancelled
// requests. A failed step fails every pending completion.
func (p *Policy) drive(st *state) {
	for {
		p.run.Lock()
		st.mu.Lock()
		st.dropCancelled()
		if st.sampler.Pending() == 0 {
			st.driving = false
			st.mu.Unlock()
			p.run.Unlock()
			return
		}
		n0 := st.sampler.Sampled()
		done, err := st.sampler.Step()
		p.sampled.Add(st.sampler.Sampled() - n0)
		st.report()
		for _, q := range done {
			st.owner[q].done <- finished{seq: q}
			delete(st.owner, q)
		}
		if err != nil {
			for q, o := range st.owner {
				o.done <- finished{seq: q, err: err}
				st.sampler.Cancel(q)
				delete(st.owner, q)
				delete(st.watch, q)
			}
		}
		st.mu.Unlock()
		p.run.Unlock()
	}
}

// dropCancelled takes the completions of requests whose context is done
// out of the batch; st.mu is held. Their requests return the context's
// error themselves (sample), so nothing is reported to them.
func (st *state) dropCancelled() {
	for q, o := range st.owner {
		if o.ctx.Err() != nil {
			st.sampler.Cancel(q)
			delete(st.owner, q)
			delete(st.watch, q)
		}
	}
}

// report calls the OnToken of every watched completion with the tokens
// sampled since the last report, and forgets the finished ones; st.mu is
// held.
func (st *state) report() {
	for q, w := range st.watch {
		c := q.Completion()
		for ; w.sent < len(c.Tokens); w.sent++ {
			t := Token{Version: st.version, Completion: w.index, ID: c.Tokens[w.sent]}
			if w.sent < len(c.LogProbs) {
				t.LogProb = c.LogProbs[w.sent]
			}
			w.fn(t)
		}
		if q.Done() {
			delete(st.watch, q)
		}
	}
}

// DecodeLenient decodes ids without special tokens, writing U+FFFD for an
// id the tokenizer lacks (a model's vocabulary is often padded beyond its
// tokenizer's) and making the result valid UTF-8.
func DecodeLenient(tok *tokenizer.Tokenizer, ids []int32) string {
	var b []byte
	for _, id := range ids {
		var err error
		if b, err = tok.DecodeBytes(b, []int32{id}, false); err != nil {
			b = append(b, "\uFFFD"...)
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// roundBF16 rounds m's weights to bfloat16 in place.
func roundBF16(m *gpu.Model) {
	for _, t := range m.Tensors() {
		for i, x := range t.Data {
			t.Data[i] = hf.BF16ToFloat32(hf.Float32ToBF16(x))
		}
	}
}

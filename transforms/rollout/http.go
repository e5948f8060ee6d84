package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"swerl/internal/engineapi"
	"swerl/sinks/weightsync"
)

func init() {
	open := func(spec string) (Policy, error) { return openHTTP(spec) }
	RegisterScheme("http", open)
	RegisterScheme("https", open)
}

// openHTTP is OpenHTTP as a Policy: nil, not a nil *HTTPPolicy, on error.
func openHTTP(spec string, opts ...Option) (Policy, error) {
	p, err := OpenHTTP(spec, opts...)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// HTTPPolicy calls one or more OpenAI-compatible chat-completions servers
// (vLLM, SGLang, llama.cpp server, swerl serve, hosted APIs) that serve
// one policy. Its spec is parsed by sinks/weightsync.ParseSpec; the keys
// (model, concurrency, retries, timeout, backoff, token_ids, logprobs,
// engine, route, health, follow and the weight sync's) are in
// docs/engines.md's table.
//
// Each request asks for n completions and token log-probs (more requests
// follow when a server returns fewer choices); 429, 5xx, timeouts and
// connection errors are retried, on another engine at once where there is
// one, with the same body and seed, so a group's completions do not
// depend on the engine that answered; other statuses fail at once. The
// API key is engineapi.APIKey's, sent as a bearer token.
//
// Requests to an engine name the version the policy's weightsync.Table
// gives for it (Table.Named): the adapter the weight sync loaded there,
// and with follow=true the newest adapter the engine lists or a learner
// announced. An answer to a request naming an adapter takes its version
// from the response's model field, and one that names no version is an
// error, never version -1, so the learner's staleness bound holds.
type HTTPPolicy struct {
	eps          []*endpoint
	table        *weightsync.Table // what each engine holds; with follow, also what it lists and was announced
	route        string
	follow       bool
	engine       engineapi.Kind
	model        string
	key          string
	retries      int
	tokenIDs     bool
	processed    bool // the engine reports processed log-probs (logprobs=processed)
	timeout      time.Duration
	probeTimeout time.Duration
	backoff      time.Duration
	sem          chan struct{}
	mu           sync.Mutex // serializes pick
	rr           uint64     // round-robin position; under mu
	stop         chan struct{}
	closeOnce    sync.Once
	log          *slog.Logger
	client       *http.Client
	version      atomic.Int64
	Attempts     atomic.Int64 // HTTP requests sent, retries included
	RetriesDone  atomic.Int64 // requests retried
}

// OpenHTTP opens an "http://…" or "https://…" spec.
func OpenHTTP(spec string, opts ...Option) (*HTTPPolicy, error) {
	sp, err := weightsync.ParseSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	p := &HTTPPolicy{table: o.table, route: sp.Route, follow: sp.Follow, engine: sp.Kind, model: sp.Model,
		retries: sp.Retries, tokenIDs: sp.TokenIDs, processed: sp.Processed, timeout: sp.Timeout, backoff: sp.Backoff,
		client: &http.Client{}, log: slog.Default()}
	if p.table == nil {
		p.table = weightsync.NewTable()
	}
	m := engineSeries()
	for i, raw := range sp.URLs {
		u, _ := url.Parse(raw)
		e := &endpoint{base: sp.Bases[i], m: m}
		if !strings.HasSuffix(u.Path, "/chat/completions") {
			u.Path = strings.TrimSuffix(u.Path, "/") + "/chat/completions"
		}
		e.url = u.String()
		m.up.WithLabelValues(e.base).Set(1)
		p.table.Show(e.base, p.follow)
		p.eps = append(p.eps, e)
	}
	p.sem = make(chan struct{}, sp.Concurrency*len(p.eps))
	// A probe waits at most the probe interval (at least 1s, at most 10s
	// and the request timeout): an engine that stalls leaves routing soon.
	p.probeTimeout = min(p.timeout, 10*time.Second, max(sp.Health, time.Second))
	p.key = engineapi.APIKey()
	p.version.Store(-1)
	p.stop = make(chan struct{})
	if p.follow {
		// The first requests already name the adapters the engines hold.
		p.probeAll(context.Background())
	}
	if sp.Health > 0 && (len(p.eps) > 1 || p.follow) {
		go p.watch(sp.Health, p.stop)
	}
	return p, nil
}

// Complete asks the server for req.N completions.
func (p *HTTPPolicy) Complete(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	out := Response{PolicyVersion: -1}
	for len(out.Completions) < req.N {
		r, v, from, err := p.once(ctx, req, req.N-len(out.Completions))
		if err != nil {
			return Response{}, err
		}
		if len(r) == 0 {
			return Response{}, fmt.Errorf("rollout: %s: instance %s: the server returned no choices", from, req.InstanceID)
		}
		if v >= 0 {
			out.PolicyVersion = v
		}
		out.Completions = append(out.Completions, r...)
	}
	out.Completions = out.Completions[:req.N]
	out.LatencyMS = time.Since(start).Milliseconds()
	return out, nil
}

// once sends one request (with retries, on another engine where there is
// one) for n completions.
func (p *HTTPPolicy) once(ctx context.Context, req Request, n int) (cs []Completion, v int64, from string, err error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, "", ctx.Err()
	}
	defer func() { <-p.sem }()
	delay := p.backoff
	tried := map[*endpoint]bool{}
	for attempt := 0; ; attempt++ {
		e := p.pick(tried)
		if e == nil { // every engine tried since the last backoff
			clear(tried)
			e = p.pick(tried)
		}
		tried[e] = true
		var (
			sv         engineapi.ServedVersion
			synced     bool
			res        httpResult
			retryAfter time.Duration
			status     int
			start      time.Time
		)
		// An engine the weight sync saw lose its version (a restart) gets
		// it loaded again before anything is asked of it; until that
		// works, the attempt fails like one the engine did not answer.
		err := p.table.Restore(ctx, e.base)
		if err != nil {
			e.release()
		} else {
			sv, synced = p.held(e)
			b, berr := p.body(req, n, sv, synced)
			if berr != nil {
				e.release()
				return nil, 0, "", berr
			}
			start = time.Now()
			res, retryAfter, status, err = p.post(ctx, e, b)
		}
		if status == http.StatusNotFound && p.refuse(e, sv) {
			p.fail(e, errReason(err, status), err)
			// The engine lacks the announced adapter (restarted without
			// it): it is not named there again, and the attempt is sent
			// at once with what the engine lists.
			clear(tried)
			continue
		}
		if status == http.StatusNotFound && synced && sv.Adapter != "" && p.table.Lose(e.base) {
			// The engine lacks the adapter the weight sync loaded there
			// (restarted since): the next attempt loads it again first.
			p.fail(e, errReason(err, status), err)
			if attempt >= p.retries {
				return nil, 0, e.url, fmt.Errorf("rollout: %s: instance %s: after %d attempts: %w", e.url, req.InstanceID, attempt+1, err)
			}
			p.RetriesDone.Add(1)
			continue
		}
		if err == nil {
			cs, v, err := p.decode(e, res, sv, synced)
			if err != nil {
				p.fail(e, "decode", err)
				return nil, 0, e.url, fmt.Errorf("instance %s: %w", req.InstanceID, err)
			}
			p.done(e, cs, time.Since(start))
			return cs, v, e.url, nil
		}
		var perm permanent
		if ctx.Err() != nil {
			return nil, 0, "", ctx.Err()
		}
		if status == 0 && errReason(err, 0) == "connect" {
			// No server answered: it may come back as a new process
			// without the version it held.
			p.table.Lose(e.base)
		}
		p.fail(e, errReason(err, status), err)
		if errors.As(err, &perm) || attempt >= p.retries {
			return nil, 0, e.url, fmt.Errorf("rollout: %s: instance %s: after %d attempts: %w", e.url, req.InstanceID, attempt+1, err)
		}
		p.RetriesDone.Add(1)
		if p.untried(tried) && retryAfter == 0 {
			continue // another engine has not been tried: no reason to wait
		}
		wait := delay/2 + rand.N(delay/2+1)
		if retryAfter > wait {
			wait = retryAfter
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, 0, "", ctx.Err()
		}
		delay = min(2*delay, 20*time.Second)
		clear(tried)
	}
}

// body is the request for n completions of req to an engine that holds sv
// (synced: the weight sync or adapter following set it). Only the model
// field depends on the engine; the seed is the request's wherever it goes.
func (p *HTTPPolicy) body(req Request, n int, sv engineapi.ServedVersion, synced bool) ([]byte, error) {
	body := engineapi.ChatRequest{Model: p.model, Sampling: engineapi.Sampling{N: &n}, Logprobs: true, ReturnTokenIDs: p.tokenIDs}
	if req.MaxTokens != 0 {
		body.MaxTokens = &req.MaxTokens
	}
	if synced && sv.Adapter != "" {
		body.Model = engineapi.AdapterModel(p.engine, p.model, sv.Adapter)
	}
	if req.System != "" {
		body.Messages = append(body.Messages, engineapi.Message{Role: "system", Content: req.System})
	}
	body.Messages = append(body.Messages, engineapi.Message{Role: "user", Content: req.Prompt})
	switch {
	case req.Greedy:
		zero := 0.0
		body.Temperature = &zero
	case req.Temperature != 0:
		body.Temperature = &req.Temperature
	}
	if req.TopP != 0 {
		body.TopP = &req.TopP
	}
	if req.Seed != 0 {
		body.Seed = &req.Seed
	}
	return json.Marshal(body)
}

// done counts a successful attempt on e.
func (p *HTTPPolicy) done(e *endpoint, cs []Completion, took time.Duration) {
	var toks int
	for _, c := range cs {
		if len(c.Tokens) > 0 {
			toks += len(c.Tokens)
		} else {
			toks += len(c.LogProbs)
		}
	}
	e.tokens.Add(int64(toks))
	e.m.tokens.WithLabelValues(e.base).Add(float64(toks))
	e.m.seconds.WithLabelValues(e.base).Observe(took.Seconds())
	if s := took.Seconds(); s > 0 {
		e.m.tps.WithLabelValues(e.base).Set(float64(toks) / s)
	}
}

type permanent struct{ error }

type httpResult struct {
	body    []byte
	version string
}

// post sends one attempt to e (which pick counted in flight; post
// releases it); status is the HTTP status of an answer
// that is an error (0 when none came). Errors wrapped in permanent are not
// retried.
func (p *HTTPPolicy) post(ctx context.Context, e *endpoint, body []byte) (_ httpResult, retryAfter time.Duration, status int, err error) {
	p.Attempts.Add(1)
	e.requests.Add(1)
	e.m.requests.WithLabelValues(e.base).Inc()
	defer e.release()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	gen := e.generation()
	if len(p.eps) > 1 {
		defer context.AfterFunc(gen, cancel)()
	}
	defer func() {
		// Cut short because the engine left routing, not because the
		// caller gave up: an error of its own, retried elsewhere.
		if err != nil && gen.Err() != nil && ctx.Err() == context.Canceled {
			err = fmt.Errorf("%w (%v)", errAbandoned, err)
		}
	}()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return httpResult{}, 0, 0, permanent{err}
	}
	hr.Header.Set("Content-Type", "application/json")
	if p.key != "" {
		hr.Header.Set("Authorization", engineapi.Bearer(p.key))
	}
	resp, err := p.client.Do(hr)
	if err != nil {
		return httpResult{}, 0, 0, err // timeouts and connection errors: retried
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return httpResult{}, 0, 0, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		var ra time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			ra = time.Duration(s) * time.Second
		}
		return httpResult{}, ra, resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(data))
	}
	if resp.StatusCode != http.StatusOK {
		return httpResult{}, 0, resp.StatusCode, permanent{fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(data))}
	}
	return httpResult{data, resp.Header.Get(engineapi.VersionHeader)}, 0, 0, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// decode turns a response body into completions and the reported version.
// A request that named a synced adapter takes its version from the
// response's model field alone; a full-weight sync's version is the one
// the sync loaded unless the server reports its own.
func (p *HTTPPolicy) decode(e *endpoint, r httpResult, sv engineapi.ServedVersion, synced bool) ([]Completion, int64, error) {
	cs, v, model, err := decodeChat(r.body, r.version)
	if err != nil {
		return nil, 0, fmt.Errorf("rollout: %s: %w", e.url, err)
	}
	for i := range cs {
		cs[i].LogProbsProcessed = p.processed && cs[i].LogProbs != nil
	}
	switch {
	case synced && sv.Adapter != "":
		av, ok := engineapi.ParseAdapter(model)
		if !ok {
			return nil, 0, fmt.Errorf("rollout: %s: asked for adapter %s, the response's model is %q, which names no swerl version", e.url, sv.Adapter, model)
		}
		v = av
	case synced && v < 0:
		v = sv.Version
	}
	if v >= 0 {
		p.version.Store(v)
	}
	return cs, v, nil
}

// decodeChat parses a chat-completions response body; header is the value of
// engineapi.VersionHeader (may be empty). Without it, a system_fingerprint
// of the form "swerl-v<N>" is read instead; otherwise the version is -1
// (unknown).
func decodeChat(body []byte, header string) ([]Completion, int64, string, error) {
	var cr engineapi.ChatResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, 0, "", fmt.Errorf("bad chat-completions response: %v: %s", err, snippet(body))
	}
	v := engineapi.ParseVersion(header, cr.SystemFingerprint)
	var out []Completion
	for _, ch := range cr.Choices {
		c := Completion{Text: ch.Message.Content, FinishReason: ch.FinishReason}
		if len(ch.TokenIDs) > 0 && len(cr.PromptTokenIDs) > 0 {
			c.Tokens, c.PromptTokens = ch.TokenIDs, cr.PromptTokenIDs
		}
		if ch.Logprobs != nil {
			for _, t := range ch.Logprobs.Content {
				c.LogProbs = append(c.LogProbs, float32(t.Logprob))
			}
		}
		out = append(out, c)
	}
	return out, v, cr.Model, nil
}

// Version is the last version a server reported, or -1.
func (p *HTTPPolicy) Version() int64 { return p.version.Load() }

// Close stops the health probes and releases idle connections. A policy
// of several engines logs what each served.
func (p *HTTPPolicy) Close() error {
	p.closeOnce.Do(func() {
		close(p.stop)
		if len(p.eps) > 1 || p.follow {
			for _, e := range p.Engines() {
				p.log.Info("rollout: engine", "engine", e.URL, "requests", e.Requests, "errors", e.Errors, "tokens", e.Tokens,
					"up", e.Up, "served", e.Served.Adapter)
			}
		}
	})
	p.client.CloseIdleConnections()
	return nil
}

// Option configures an HTTP policy beyond its spec: what a process holds
// (a table shared with the weight syncer) rather than what a spec can say.
type Option func(*options)

type options struct {
	table *weightsync.Table
}

// WithTable makes the policy read (and, with follow=true, write) what its
// engines hold in t: the table the weight syncer of this process records
// its pushes in, and where a learner's announcements are recorded
// (pipelines/train.FollowWeights). A nil t leaves the policy a table of
// its own.
func WithTable(t *weightsync.Table) Option { return func(o *options) { o.table = t } }

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
// (vLLM, SGLang, llama.cpp server, swerl serve, hosted APIs).
//
// The spec is the server's base URL ("http://host:8000/v1"; "/chat/completions"
// is appended unless present), or several separated by commas
// ("http://a:8000/v1,http://b:8000/v1", engines serving the same model),
// with optional query parameters after the last URL that configure the
// client and are not sent: model (default "default"; swerl's commands
// fill it from $SWERL_OPENAI_MODEL), concurrency (requests in flight per engine, default 8),
// retries (default 5), timeout (per request, default 120s), backoff (first
// retry delay, default 500ms, doubled each retry up to 20s, with jitter; a
// Retry-After header is honoured), token_ids (true: ask for vLLM's
// return_token_ids, which swerl serve and vLLM answer with the prompt and
// completion token ids, so the learner trains on exactly the sampled tokens
// against the sampler's log-probabilities; hosted APIs reject the field, so
// it is off by default; token ids a server returns unasked are used too),
// logprobs (raw, the default, or processed: whether the engine's
// log-probabilities are taken before or after the temperature), engine
// (vllm, the default, or sglang: how a request names a LoRA adapter, see
// below), route, health and follow (see below), and the weight sync's
// sync, keep_adapters and engine_path (read by
// sinks/weightsync.ConfigFromSpec for each engine).
// 429, 5xx, timeouts and connection errors are retried;
// other statuses fail at once. The API key is read from $SWERL_API_KEY, else
// $OPENAI_API_KEY (internal/engineapi.APIKey), on the machine that sends
// the requests, and sent as a bearer token.
//
// Each request asks for n completions and token logprobs; when a server
// returns fewer choices than asked (some ignore n), the rest are requested
// again.
//
// # Several engines
//
// With several engines, each attempt goes to one chosen by route:
// least-loaded (the default: the fewest requests in flight) or
// round-robin. An attempt that fails (no answer, a timeout, 5xx, 429) is
// sent again to another engine at once, with the same body, seed
// included, so a group's completions do not depend on which engine
// answered; the failed engine leaves routing (a 429 only moves the
// attempt), and the attempts still waiting on it are abandoned and sent
// elsewhere. Every health interval (default 5s; 0 turns the probes off)
// each engine is asked for /v1/models, waiting at most the interval: one
// that answers again rejoins, one that does not leaves routing before a
// request finds out. Engines that hold the newest
// version the weight sync pushed are preferred: one a push failed on is
// routed to only when no other is up. Per-engine Prometheus series:
// swerl_engine_requests_total, _errors_total{reason},
// _request_seconds, _completion_tokens_total, _tokens_per_second,
// _in_flight, _up.
//
// # Engine weight sync
//
// When the weight sync (sinks/weightsync) has loaded a version on the server
// (Served.Set on the table the policy was opened WithServed, keyed by
// BaseURL), requests name that version's adapter:
// "model": "swerl-v000123" for vLLM (and swerl serve), "model":
// "BASE:swerl-v000123" for SGLang (BASE the spec's model). The policy
// version of the answer is then read from the response's model field,
// which both engines set to the adapter that produced it; a response
// whose model field names no version is an error, never version -1, so
// the learner's staleness bound holds. For a full-weight sync (SGLang's
// update_weights_from_disk) the version is the one the sync last loaded.
//
// A rollout worker in another process than the learner follows the
// adapters it pushes with follow=true: each health probe reads the
// adapters an engine lists on /v1/models (vLLM and swerl serve list them)
// and the newest swerl-vNNNNNN becomes what requests to that engine name.
// A policy opened WithAnnounced also names the newest adapter the learner
// announced an engine holds (on the weights topic) when it is newer than
// the listed one, so engines that do not list their adapters (older
// SGLang) are followed too; an engine that answers 404 to an announced
// adapter (restarted without it) is not asked for it again, and falls
// back to what it lists until a newer version is announced for it.
type HTTPPolicy struct {
	eps          []*endpoint
	served       *Served
	announced    *Announced // with follow: what the learner announced each engine holds; nil: listing only
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
	urls, q, err := SplitSpec(spec)
	if err != nil {
		return nil, err
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	p := &HTTPPolicy{model: "default", retries: 5, timeout: 120 * time.Second, served: o.served, announced: o.announced,
		backoff: 500 * time.Millisecond, client: &http.Client{}, route: RouteLeastLoaded, log: slog.Default()}
	if p.served == nil {
		p.served = NewServed()
	}
	concurrency, health := 8, 5*time.Second
	for k, vs := range q {
		v := vs[len(vs)-1]
		var err error
		switch k {
		case "model":
			p.model = v
		case "concurrency":
			concurrency, err = strconv.Atoi(v)
			if err == nil && concurrency < 1 {
				err = errors.New("must be at least 1")
			}
		case "retries":
			p.retries, err = strconv.Atoi(v)
		case "timeout":
			p.timeout, err = time.ParseDuration(v)
		case "backoff":
			p.backoff, err = time.ParseDuration(v)
		case "token_ids":
			p.tokenIDs, err = strconv.ParseBool(v)
		case "logprobs":
			// What the engine's log-probs are: raw (temperature 1, vLLM's
			// default and swerl serve's) or processed (after temperature:
			// vLLM --logprobs-mode processed_logprobs). The learner
			// converts raw ones to its temperature.
			switch v {
			case "raw", "processed":
				p.processed = v == "processed"
			default:
				err = errors.New("want raw or processed")
			}
		case "engine":
			p.engine = engineapi.Kind(v)
			if !p.engine.Valid() {
				err = fmt.Errorf("want %s or %s", engineapi.VLLM, engineapi.SGLang)
			}
		case "route":
			p.route = v
			if v != RouteLeastLoaded && v != RouteRoundRobin {
				err = fmt.Errorf("want %s or %s", RouteLeastLoaded, RouteRoundRobin)
			}
		case "health":
			health, err = time.ParseDuration(v)
			if err == nil && health < 0 {
				err = errors.New("must not be negative")
			}
		case "follow":
			p.follow, err = strconv.ParseBool(v)
		case "sync", "keep_adapters", "engine_path":
			// The weight sync's options (sinks/weightsync.ConfigFromSpec).
		default:
			err = errors.New("unknown parameter (want model, concurrency, retries, timeout, backoff, token_ids, logprobs, engine, route, health, follow, sync, keep_adapters, engine_path)")
		}
		if err != nil {
			return nil, fmt.Errorf("rollout: policy %q: %s=%q: %v", spec, k, v, err)
		}
	}
	if p.follow && health == 0 {
		return nil, fmt.Errorf("rollout: policy %q: follow=true reads the engines' adapters on each health probe; health=0 turns them off", spec)
	}
	m := engineSeries()
	seen := map[string]bool{}
	for _, raw := range urls {
		u, _ := url.Parse(raw)
		e := &endpoint{base: engineapi.BaseURL(raw), m: m}
		e.refused.Store(-1)
		if seen[e.base] {
			return nil, fmt.Errorf("rollout: policy %q: engine %s listed twice", spec, e.base)
		}
		seen[e.base] = true
		if !strings.HasSuffix(u.Path, "/chat/completions") {
			u.Path = strings.TrimSuffix(u.Path, "/") + "/chat/completions"
		}
		e.url = u.String()
		m.up.WithLabelValues(e.base).Set(1)
		if sv, ok := p.held(e); ok {
			m.served.WithLabelValues(e.base).Set(float64(sv.Version))
		} else {
			m.served.WithLabelValues(e.base).Set(-1)
		}
		p.eps = append(p.eps, e)
	}
	p.sem = make(chan struct{}, concurrency*len(p.eps))
	// A probe waits at most the probe interval (at least 1s, at most 10s
	// and the request timeout): an engine that stalls leaves routing soon.
	p.probeTimeout = min(p.timeout, 10*time.Second, max(health, time.Second))
	p.key = engineapi.APIKey()
	p.version.Store(-1)
	p.stop = make(chan struct{})
	if p.follow {
		// The first requests already name the adapters the engines hold.
		p.probeAll(context.Background())
	}
	if health > 0 && (len(p.eps) > 1 || p.follow) {
		go p.watch(health, p.stop)
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
		sv, synced := p.held(e)
		b, err := p.body(req, n, sv, synced)
		if err != nil {
			e.release()
			return nil, 0, "", err
		}
		start := time.Now()
		res, retryAfter, status, err := p.post(ctx, e, b)
		if status == http.StatusNotFound && p.refuse(e, sv) {
			p.fail(e, errReason(err, status), err)
			// The engine lacks the announced adapter (restarted without
			// it): it is not named there again, and the attempt is sent
			// at once with what the engine lists.
			clear(tried)
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
	if req.Temperature != 0 {
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

// Served records, per engine (keyed by engineapi.BaseURL), the version
// requests to it name: what the weight sync loaded there (sinks/weightsync's
// OnHeld hook calls Set) or what adapter following found. The syncer and
// the policy share one when the policy is opened WithServed; a policy
// opened without one keeps its own. Safe for concurrent use.
type Served struct {
	mu sync.Mutex
	m  map[string]engineapi.ServedVersion
}

// NewServed returns an empty table.
func NewServed() *Served { return &Served{m: map[string]engineapi.ServedVersion{}} }

// Set records that the server at base (any URL engineapi.BaseURL reduces
// to it) now serves v; HTTP policies of this table name it in their next
// requests.
func (s *Served) Set(base string, v engineapi.ServedVersion) {
	base = engineapi.BaseURL(base)
	s.mu.Lock()
	s.m[base] = v
	s.mu.Unlock()
	engineSeries().served.WithLabelValues(base).Set(float64(v.Version))
}

// Get returns what Set recorded for the server at base.
func (s *Served) Get(base string) (engineapi.ServedVersion, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[engineapi.BaseURL(base)]
	return v, ok
}

// Clear forgets a server's synced version.
func (s *Served) Clear(base string) {
	base = engineapi.BaseURL(base)
	s.mu.Lock()
	delete(s.m, base)
	s.mu.Unlock()
	engineSeries().served.WithLabelValues(base).Set(-1)
}

// Option configures an HTTP policy beyond its spec: what a process holds
// (a table shared with the weight syncer) rather than what a spec can say.
type Option func(*options)

type options struct {
	served    *Served
	announced *Announced
}

// WithServed makes the policy read (and, with follow=true, write) the
// versions its engines serve in s, the table the weight syncer's OnHeld
// hook sets. A nil s leaves the policy its own table.
func WithServed(s *Served) Option { return func(o *options) { o.served = s } }

// WithAnnounced makes a policy with follow=true also name, on each engine,
// the newest adapter a is told that engine holds, when it is newer than
// the one the engine lists (see Announced). A nil a leaves listing only.
func WithAnnounced(a *Announced) Option { return func(o *options) { o.announced = a } }

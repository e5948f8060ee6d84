package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"swerl/internal/engineapi"
	"swerl/sinks/metrics"
	"swerl/sinks/weightsync"
)

// endpoint is one engine of an HTTPPolicy.
type endpoint struct {
	base     string // server root (engineapi.BaseURL): keys the Table, labels metrics
	url      string // its chat-completions URL
	inFlight atomic.Int64
	down     atomic.Bool  // a request or health probe failed; not routed to until a probe succeeds
	downs    atomic.Int64 // how many times the engine left routing
	requests atomic.Int64
	errors   atomic.Int64
	tokens   atomic.Int64
	m        engineMetrics

	// gen ends when the engine leaves routing: attempts in flight to it
	// are abandoned then and sent to another engine, instead of waiting
	// out the request timeout on an engine that no longer answers probes.
	genMu     sync.Mutex
	gen       context.Context
	cancelGen context.CancelFunc
}

// leave takes e out of routing and ends its generation; it reports
// whether e was in routing.
func (e *endpoint) leave() bool {
	e.genMu.Lock()
	defer e.genMu.Unlock()
	if e.down.Swap(true) {
		return false
	}
	e.downs.Add(1)
	if e.cancelGen != nil {
		e.cancelGen()
		e.gen, e.cancelGen = nil, nil
	}
	return true
}

// rejoin brings e back into routing after a probe that began when e had
// left routing downs times; it reports whether e was out. A probe that
// was in flight when e left (its answer may predate the failure) does not
// bring e back: the next one decides.
func (e *endpoint) rejoin(downs int64) bool {
	e.genMu.Lock()
	defer e.genMu.Unlock()
	if e.downs.Load() != downs {
		return false
	}
	return e.down.Swap(false)
}

// generation is the context that ends when e next leaves routing.
func (e *endpoint) generation() context.Context {
	e.genMu.Lock()
	defer e.genMu.Unlock()
	if e.gen == nil {
		e.gen, e.cancelGen = context.WithCancel(context.Background())
	}
	return e.gen
}

// errAbandoned ends an attempt to an engine that left routing meanwhile.
var errAbandoned = errors.New("the engine left routing (a request or probe failed) while this request waited on it")

// EngineStats is what an HTTPPolicy knows of one of its engines.
type EngineStats struct {
	URL      string // server root
	Up       bool   // routed to: no failure since the last successful probe
	InFlight int64
	Requests int64 // attempts sent to it
	Errors   int64 // attempts that failed (no answer, timeout, 5xx, 429, or a bad answer)
	Tokens   int64 // completion tokens it returned
	// Served is what the weight sync (or adapter following) says it holds.
	Served    engineapi.ServedVersion
	HasServed bool
}

// Engines reports the policy's engines, in spec order.
func (p *HTTPPolicy) Engines() []EngineStats {
	out := make([]EngineStats, len(p.eps))
	for i, e := range p.eps {
		sv, ok := p.held(e)
		out[i] = EngineStats{URL: e.base, Up: !e.down.Load(), InFlight: e.inFlight.Load(), Requests: e.requests.Load(),
			Errors: e.errors.Load(), Tokens: e.tokens.Load(), Served: sv, HasServed: ok}
	}
	return out
}

// pick chooses the engine of the next attempt, skipping those in tried,
// and counts the attempt in its in-flight requests (the caller's release
// takes it off): choosing and counting under one lock, concurrent requests
// spread over the engines by the load they see.
//
// Candidates are, in order of preference: the engines that are up and hold
// the newest version any of the policy's engines holds (an engine the
// weight sync could not push to stays out of routing until it holds it,
// so a round's samples are not spread over versions); then any engine that
// is up; then any at all (every engine down: the next attempt is as good a
// probe as any). It returns nil when every engine was tried.
func (p *HTTPPolicy) pick(tried map[*endpoint]bool) *endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.candidate(tried)
	if e != nil {
		e.m.inFlight.WithLabelValues(e.base).Set(float64(e.inFlight.Add(1)))
	}
	return e
}

// release ends an attempt pick counted.
func (e *endpoint) release() {
	e.m.inFlight.WithLabelValues(e.base).Set(float64(e.inFlight.Add(-1)))
}

// untried reports whether an engine not in tried is left to pick.
func (p *HTTPPolicy) untried(tried map[*endpoint]bool) bool {
	return len(tried) < len(p.eps)
}

func (p *HTTPPolicy) candidate(tried map[*endpoint]bool) *endpoint {
	if len(p.eps) == 1 {
		if tried[p.eps[0]] {
			return nil
		}
		return p.eps[0]
	}
	newest, synced := int64(-1), false
	for _, e := range p.eps {
		if sv, ok := p.held(e); ok {
			synced = true
			newest = max(newest, sv.Version)
		}
	}
	current := func(e *endpoint) bool {
		if !synced {
			return true
		}
		sv, ok := p.held(e)
		return ok && sv.Version == newest
	}
	for _, ok := range []func(*endpoint) bool{
		func(e *endpoint) bool { return !e.down.Load() && current(e) },
		func(e *endpoint) bool { return !e.down.Load() },
		func(*endpoint) bool { return true },
	} {
		if e := p.choose(tried, ok); e != nil {
			return e
		}
	}
	return nil
}

// choose applies the routing policy to the engines not tried that pass ok.
func (p *HTTPPolicy) choose(tried map[*endpoint]bool, ok func(*endpoint) bool) *endpoint {
	n := len(p.eps)
	p.rr++
	start := int(p.rr % uint64(n))
	var best *endpoint
	for i := range n {
		e := p.eps[(start+i)%n]
		if tried[e] || !ok(e) {
			continue
		}
		if p.route == weightsync.RouteRoundRobin {
			return e
		}
		if best == nil || e.inFlight.Load() < best.inFlight.Load() {
			best = e
		}
	}
	return best
}

// fail records a failed attempt on e: a policy of several engines takes e
// out of routing until a health probe answers.
func (p *HTTPPolicy) fail(e *endpoint, reason string, err error) {
	e.errors.Add(1)
	e.m.errors.WithLabelValues(e.base, reason).Inc()
	// A 4xx or an answer that cannot be used says nothing of the engine's
	// health (a request it refuses, an adapter it does not hold), and a 429
	// says it is busy with work it accepted: the attempt goes elsewhere,
	// the engine stays.
	if len(p.eps) > 1 && reason != "http_4xx" && reason != "http_429" && reason != "decode" && e.leave() {
		e.m.up.WithLabelValues(e.base).Set(0)
		p.log.Warn("rollout: engine out of routing until it answers again", "engine", e.base, "err", err.Error())
	}
}

// probe asks one engine for /v1/models (every OpenAI-compatible server
// answers it, vLLM, SGLang and swerl serve with their loaded adapters): an
// answer brings a down engine back into routing.
func (p *HTTPPolicy) probe(ctx context.Context, e *endpoint) error {
	ctx, cancel := context.WithTimeout(ctx, p.probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+engineapi.ModelsPath, nil)
	if err != nil {
		return err
	}
	if p.key != "" {
		req.Header.Set("Authorization", engineapi.Bearer(p.key))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/models: HTTP %d: %s", resp.StatusCode, snippet(body))
	}
	var list engineapi.ModelList
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("GET /v1/models: %v: %s", err, snippet(body))
	}
	if p.follow {
		p.followListed(e, list.Data)
	}
	return nil
}

// followListed makes the newest swerl adapter an engine lists what
// requests to it name (adapter following without a weight sync in this
// process). The listing is the truth, newer or older than what was named
// before: an engine restarted without its adapters, or a learner that
// started over, is followed back, never asked for an adapter it dropped.
// An engine that lists no swerl adapter is asked for the base model.
func (p *HTTPPolicy) followListed(e *endpoint, models []engineapi.Model) {
	newest := int64(-1)
	for _, m := range models {
		if v, ok := engineapi.ParseAdapter(m.ID); ok && m.ID == engineapi.AdapterName(v) {
			newest = max(newest, v)
		}
	}
	sv, ok := p.table.Get(e.base)
	switch {
	case newest < 0 && ok && sv.Adapter != "":
		p.table.Clear(e.base)
		p.log.Warn("rollout: engine lists no swerl adapter any more; requests name the base model", "engine", e.base, "was", sv.Adapter)
	case newest >= 0 && (!ok || sv.Version != newest || sv.Adapter != engineapi.AdapterName(newest)):
		p.table.Set(e.base, engineapi.ServedVersion{Version: newest, Adapter: engineapi.AdapterName(newest)})
		p.log.Info("rollout: engine holds a new adapter; requests name it", "engine", e.base, "adapter", engineapi.AdapterName(newest))
	}
}

// held is what requests to e name (weightsync.Table.Named): the weight
// sync's version or, with follow=true, the newest adapter e lists or a
// learner announced it holds.
func (p *HTTPPolicy) held(e *endpoint) (engineapi.ServedVersion, bool) {
	return p.table.Named(e.base, p.follow)
}

// refuse records that e answered 404 to a request naming sv; it reports
// whether sv was an announced adapter (then the request is sent again
// without it). A 404 to what the engine lists or the sync loaded stays an
// error of the request.
func (p *HTTPPolicy) refuse(e *endpoint, sv engineapi.ServedVersion) bool {
	if !p.follow {
		return false
	}
	announced, news := p.table.Refuse(e.base, sv)
	if news {
		p.log.Warn("rollout: engine does not hold the adapter it was announced to hold (restarted?); requests name what it lists", "engine", e.base, "adapter", sv.Adapter)
	}
	return announced
}

// probeAll probes every engine once, at the same time: a down engine that
// answers rejoins, an up one that does not leaves routing before a request
// finds out.
func (p *HTTPPolicy) probeAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range p.eps {
		wg.Go(func() {
			downs := e.downs.Load()
			err := p.probe(ctx, e)
			if p.follow {
				// The gauge shows what requests name, the announced
				// adapter included.
				p.table.Show(e.base, true)
			}
			switch {
			case ctx.Err() != nil:
			case err != nil && len(p.eps) > 1:
				p.fail(e, "probe", err)
			case err == nil && e.rejoin(downs):
				e.m.up.WithLabelValues(e.base).Set(1)
				p.log.Info("rollout: engine answers again; back in routing", "engine", e.base)
			}
		})
	}
	wg.Wait()
}

// watch probes every engine each interval until stop is closed.
func (p *HTTPPolicy) watch(interval time.Duration, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.probeAll(ctx)
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// engineMetrics are the Prometheus series of every HTTP policy's engines,
// labelled by the engine's server root.
type engineMetrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	tps      *prometheus.GaugeVec
	inFlight *prometheus.GaugeVec
	up       *prometheus.GaugeVec
}

var (
	metricsOnce sync.Once
	mEngine     engineMetrics
)

func engineSeries() engineMetrics {
	metricsOnce.Do(func() {
		mEngine = engineMetrics{
			requests: metrics.Factory.CounterVec(prometheus.CounterOpts{Name: "swerl_engine_requests_total",
				Help: "Chat-completion requests sent to an inference engine (retries included)."}, []string{"engine"}),
			errors: metrics.Factory.CounterVec(prometheus.CounterOpts{Name: "swerl_engine_errors_total",
				Help: "Failed requests and health probes of an engine, by reason (connect, timeout, http_5xx, http_429, http_4xx, decode, probe, abandoned)."}, []string{"engine", "reason"}),
			seconds: registerHistogramVec(prometheus.HistogramOpts{Name: "swerl_engine_request_seconds",
				Help: "Latency of an engine's successful chat-completion requests.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}, []string{"engine"}),
			tokens: metrics.Factory.CounterVec(prometheus.CounterOpts{Name: "swerl_engine_completion_tokens_total",
				Help: "Completion tokens an engine returned (rate() of it is its tokens/s)."}, []string{"engine"}),
			tps: metrics.Factory.GaugeVec(prometheus.GaugeOpts{Name: "swerl_engine_tokens_per_second",
				Help: "Completion tokens per second of an engine's last successful request."}, []string{"engine"}),
			inFlight: metrics.Factory.GaugeVec(prometheus.GaugeOpts{Name: "swerl_engine_in_flight",
				Help: "Requests in flight to an engine."}, []string{"engine"}),
			up: metrics.Factory.GaugeVec(prometheus.GaugeOpts{Name: "swerl_engine_up",
				Help: "1 while an engine is routed to, 0 while it is out of routing after a failure."}, []string{"engine"}),
		}
	})
	return mEngine
}

func registerHistogramVec(o prometheus.HistogramOpts, labels []string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(o, labels)
	if err := metrics.Registry.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector.(*prometheus.HistogramVec)
		}
		panic(err)
	}
	return h
}

// errReason names the kind of a failed attempt for the errors metric.
func errReason(err error, status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "http_429"
	case status >= 500:
		return "http_5xx"
	case status >= 400:
		return "http_4xx"
	case errors.Is(err, errAbandoned):
		return "abandoned"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "connect"
}

package weightsync

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"swerl/internal/engineapi"
)

// Routing policies of a spec with several engines (route=).
const (
	RouteLeastLoaded = "least-loaded" // the engine with the fewest requests in flight
	RouteRoundRobin  = "round-robin"  // each engine in turn
)

// Spec is an HTTP policy spec, parsed: the engines that serve one policy
// and the options of the rollout client (transforms/rollout's HTTPPolicy)
// and of the weight sync. It is parsed here, once, for both: the spec
// names the engines the sync pushes to. docs/engines.md's table lists
// every key, its meaning and its default. ParseSpec fills the defaults.
type Spec struct {
	// URLs are the engines' URLs as written, without the query; Bases
	// their server roots (engineapi.BaseURL), in the same order.
	URLs, Bases []string

	Model       string        // model: the name requests send; default "default"
	Concurrency int           // concurrency: requests in flight per engine; default 8
	Retries     int           // retries of a failed request; default 5
	Timeout     time.Duration // timeout of one request; default 120s
	Backoff     time.Duration // backoff: the first retry's delay; default 500ms
	TokenIDs    bool          // token_ids: ask for the sampled token ids; default false
	// Processed is logprobs=processed: the engine's log-probs are taken
	// after the temperature; default false (raw).
	Processed bool
	Kind      engineapi.Kind // engine: the API the engines speak; default vllm
	Route     string         // route: RouteLeastLoaded (default) or RouteRoundRobin
	Health    time.Duration  // health: the probe interval; default 5s, 0 off
	Follow    bool           // follow: name the adapters the engines list; default false

	Sync    bool   // sync: push each version to the engines; default true
	Keep    int    // keep_adapters: Config.Keep; 0: its default
	PathMap string // engine_path: Config.PathMap
}

// specKeys are the query keys a spec may hold.
var specKeys = []string{"model", "concurrency", "retries", "timeout", "backoff", "token_ids", "logprobs", "engine",
	"route", "health", "follow", "sync", "keep_adapters", "engine_path"}

// ParseSpec parses an HTTP policy spec: one or more http(s) URLs separated
// by commas ("http://a:8000/v1,http://b:8000/v1?model=m"), the options
// once, after the last URL. A key given twice is an error naming it (no
// value silently wins), as are an unknown key, a value that does not
// parse, an engine listed twice and a URL that is not http(s) with a
// host; each error names the spec.
func ParseSpec(spec string) (Spec, error) {
	urls, q, err := SplitSpec(spec)
	if err != nil {
		return Spec{}, err
	}
	s := Spec{URLs: urls, Model: "default", Concurrency: 8, Retries: 5, Timeout: 120 * time.Second,
		Backoff: 500 * time.Millisecond, Kind: engineapi.VLLM, Route: RouteLeastLoaded, Health: 5 * time.Second, Sync: true}
	for _, u := range urls {
		b := engineapi.BaseURL(u)
		if slices.Contains(s.Bases, b) {
			return Spec{}, fmt.Errorf("weightsync: policy %q: engine %s listed twice", spec, b)
		}
		s.Bases = append(s.Bases, b)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key is the same on every run
	for _, k := range keys {
		vs := q[k]
		if len(vs) > 1 {
			return Spec{}, fmt.Errorf("weightsync: policy %q: %s given %d times (%s); give it once", spec, k, len(vs), strings.Join(vs, ", "))
		}
		if err := s.set(k, vs[0]); err != nil {
			return Spec{}, fmt.Errorf("weightsync: policy %q: %s=%q: %v", spec, k, vs[0], err)
		}
	}
	if s.Follow && s.Health == 0 {
		return Spec{}, fmt.Errorf("weightsync: policy %q: follow=true reads the engines' adapters on each health probe; health=0 turns them off", spec)
	}
	return s, nil
}

// set applies one option.
func (s *Spec) set(k, v string) (err error) {
	switch k {
	case "model":
		s.Model = v
	case "concurrency":
		s.Concurrency, err = strconv.Atoi(v)
		if err == nil && s.Concurrency < 1 {
			err = errors.New("must be at least 1")
		}
	case "retries":
		s.Retries, err = strconv.Atoi(v)
	case "timeout":
		s.Timeout, err = time.ParseDuration(v)
	case "backoff":
		s.Backoff, err = time.ParseDuration(v)
	case "token_ids":
		s.TokenIDs, err = strconv.ParseBool(v)
	case "logprobs":
		// Raw: temperature 1, vLLM's default and swerl serve's, which the
		// learner converts to its temperature; processed: after the
		// temperature (vLLM --logprobs-mode processed_logprobs).
		switch v {
		case "raw", "processed":
			s.Processed = v == "processed"
		default:
			err = errors.New("want raw or processed")
		}
	case "engine":
		s.Kind = engineapi.Kind(v)
		if !s.Kind.Valid() {
			err = fmt.Errorf("want %s or %s", engineapi.VLLM, engineapi.SGLang)
		}
	case "route":
		s.Route = v
		if v != RouteLeastLoaded && v != RouteRoundRobin {
			err = fmt.Errorf("want %s or %s", RouteLeastLoaded, RouteRoundRobin)
		}
	case "health":
		s.Health, err = time.ParseDuration(v)
		if err == nil && s.Health < 0 {
			err = errors.New("must not be negative")
		}
	case "follow":
		s.Follow, err = strconv.ParseBool(v)
	case "sync":
		s.Sync, err = strconv.ParseBool(v)
	case "keep_adapters":
		s.Keep, err = strconv.Atoi(v)
		if err == nil && s.Keep < 1 {
			err = errors.New("want an integer ≥ 1")
		}
	case "engine_path":
		s.PathMap = v
	default:
		err = fmt.Errorf("unknown parameter (want %s)", strings.Join(specKeys, ", "))
	}
	return err
}

// SyncConfig is the weight sync the spec asks for: every engine, of the
// spec's kind, with its keep_adapters and engine_path, and the API key of
// engineapi.APIKey ($SWERL_API_KEY, else $OPENAI_API_KEY). ok is false
// when the spec turns the sync off (sync=false). The caller adds what a
// spec cannot say: the Table, timeouts, hooks, the logger.
func (s Spec) SyncConfig() (cfg Config, ok bool) {
	if !s.Sync {
		return Config{}, false
	}
	cfg = Config{Keep: s.Keep, PathMap: s.PathMap, APIKey: engineapi.APIKey()}
	for _, b := range s.Bases {
		cfg.Engines = append(cfg.Engines, Engine{URL: b, Kind: s.Kind})
	}
	return cfg, true
}

// SplitSpec splits an HTTP policy spec naming one or more engines
// ("http://a:8000/v1,http://b:8000/v1?model=m") into the engines' URLs,
// without a query, and the options (the query, which comes once, after
// the last URL). A URL that is not http(s) with a host, or a query before
// the last URL, is an error. It checks no option: ParseSpec does.
func SplitSpec(spec string) (urls []string, query url.Values, err error) {
	parts := strings.Split(spec, ",")
	for i, s := range parts {
		s = strings.TrimSpace(s)
		u, err := url.Parse(s)
		if err != nil {
			return nil, nil, fmt.Errorf("weightsync: policy %q: engine %d: %w", spec, i+1, err)
		}
		if _, ok := httpURL(s); !ok {
			return nil, nil, fmt.Errorf("weightsync: policy %q: engine %d (%q) is not an http(s) URL with a host", spec, i+1, s)
		}
		if u.RawQuery != "" {
			if i != len(parts)-1 {
				return nil, nil, fmt.Errorf("weightsync: policy %q: engine %d (%q) has options; write them once, after the last URL", spec, i+1, s)
			}
			if query, err = url.ParseQuery(u.RawQuery); err != nil {
				return nil, nil, fmt.Errorf("weightsync: policy %q: options: %w", spec, err)
			}
		}
		u.RawQuery, u.Fragment = "", ""
		urls = append(urls, u.String())
	}
	if query == nil {
		query = url.Values{}
	}
	return urls, query, nil
}

// WithDefault returns an http(s) policy spec with the option key set to
// value unless the spec sets it; other specs are returned as they are.
func WithDefault(spec, key, value string) string {
	urls, q, err := SplitSpec(spec)
	if err != nil || q.Has(key) {
		return spec
	}
	q.Set(key, value)
	return strings.Join(urls, ",") + "?" + q.Encode()
}

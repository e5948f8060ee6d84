package weightsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"swerl/internal/engineapi"
)

// Engine is one inference server.
type Engine struct {
	// URL is the server's root or its OpenAI base ("http://h:8000" or
	// "http://h:8000/v1"; a query is ignored).
	URL  string
	Kind engineapi.Kind
}

// DefaultTimeout is Config.Timeout's default (swerl's --engine-timeout).
const DefaultTimeout = 60 * time.Second

// DefaultAttempts is Config.Attempts's default: a request and four
// retries (swerl's --engine-retries 4).
const DefaultAttempts = 5

// Config configures a Syncer.
type Config struct {
	Engines []Engine
	// Keep is how many of the newest adapters this syncer loaded stay
	// loaded on each engine; older ones are unloaded. Default 2.
	Keep int
	// Attempts is how many times one request is sent before it fails, the
	// first included (1: no retry), with exponential backoff from Backoff
	// between them (doubled each time, at most 30s, with jitter). Defaults
	// DefaultAttempts and 1s.
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one request, the answer included: an engine that
	// accepts the connection and never answers fails that attempt after
	// Timeout, and the retries follow. Default DefaultTimeout; loading the
	// full weights of a large model can take longer, raise it there.
	Timeout time.Duration
	// PathMap rewrites the learner's path prefix to the one the engines
	// see: "/learner/out=/mnt/out" or "/learner/out=s3://bucket/out".
	// Empty: the engines see the learner's paths.
	PathMap string
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey string
	// Table is where the syncer records what each engine holds once it
	// confirmed a load; the rollout policies opened with the same table
	// (rollout.WithTable) name it in their next requests. Default: a table
	// of the syncer's own.
	Table *Table
	// OnHeld, when set, is called after Table records a version an engine
	// confirmed (tests watch the pushes with it).
	OnHeld func(e Engine, v engineapi.ServedVersion)
	// OnPushed is called at the end of a Push that loaded the version on
	// at least one engine, with the adapter name it was loaded as ("" for
	// full weights) and every engine (its URL) that holds it then: swerl
	// learn announces the version again with them, so rollout workers in
	// other processes learn which engines hold which adapter.
	OnPushed func(version int64, adapter string, engines []string)
	// Client sends the requests. Default: a new http.Client.
	Client *http.Client
	Log    *slog.Logger
}

// Syncer pushes versions to engines. It is safe for concurrent use; pushes
// are serialized, and Held does not wait for a push in flight.
type Syncer struct {
	cfg      Config
	from, to string

	push   sync.Mutex // held by Push: serializes pushes, guards states
	states []*state
}

// state is the push side of one engine; what it holds is in cfg.Table.
type state struct {
	Engine
	loaded []int64 // adapter versions loaded there, oldest first
	// noReload is set once a vLLM answered 404 to the full-weight reload
	// (started without VLLM_SERVER_DEV_MODE=1): full weights are no
	// longer pushed to it.
	noReload bool
	adopted  bool // the engine's adapters from before were read (adopt)
	// want is the newest version a Push asked the engine to load, and
	// full the newest full-weight version it loaded (the base of later
	// adapters): what restore loads again onto an engine that lost them.
	want, full *pushed
}

// pushed is a version as a Push sent it: its number and the folder the
// engine reads (mapped), an adapter or full weights.
type pushed struct {
	version int64
	path    string
	adapter bool
}

// New returns a Syncer for cfg.Engines.
func New(cfg Config) (*Syncer, error) {
	if len(cfg.Engines) == 0 {
		return nil, errors.New("weightsync: no engines to sync")
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 2
	}
	if cfg.Attempts < 0 {
		return nil, fmt.Errorf("weightsync: %d attempts, want ≥ 1 (0: %d)", cfg.Attempts, DefaultAttempts)
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Table == nil {
		cfg.Table = NewTable()
	}
	s := &Syncer{cfg: cfg}
	if cfg.PathMap != "" {
		from, to, ok := strings.Cut(cfg.PathMap, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("weightsync: path map %q: want LEARNER_PREFIX=ENGINE_PREFIX", cfg.PathMap)
		}
		s.from, s.to = filepath.Clean(from), strings.TrimSuffix(to, "/")
	}
	for _, e := range cfg.Engines {
		if !e.Kind.Valid() {
			return nil, fmt.Errorf("weightsync: %s: %w", e.URL, engineapi.KindError(e.Kind))
		}
		s.states = append(s.states, &state{Engine: Engine{URL: engineapi.BaseURL(e.URL), Kind: e.Kind}})
	}
	cfg.Table.restoreWith(s.restore)
	return s, nil
}

// Held returns the newest version the engine at url (any URL of it) holds,
// and false before one was pushed.
func (s *Syncer) Held(url string) (engineapi.ServedVersion, bool) {
	return s.cfg.Table.Get(url)
}

// holds reports whether st holds version.
func (s *Syncer) holds(st *state, version int64) bool {
	v, ok := s.cfg.Table.Get(st.URL)
	return ok && v.Version == version
}

// Adapter returns the PEFT adapter folder of a version folder (the folder
// itself or its adapter/ child, whichever holds adapter_config.json), or
// "" when it holds none.
func Adapter(dir string) string {
	for _, d := range []string{dir, filepath.Join(dir, "adapter")} {
		if _, err := os.Stat(filepath.Join(d, "adapter_config.json")); err == nil {
			return d
		}
	}
	return ""
}

// Push makes every engine load version from its folder dir (an adapter or
// full weights, see the package documentation). Engines that already hold
// it are skipped. The error joins those of the engines that refused it
// after the retries; the others hold it.
//
// Every request is bounded by Config.Timeout and the retries by ctx:
// cancelling ctx ends a push at once, and the engines keep what they
// confirmed before.
func (s *Syncer) Push(ctx context.Context, version int64, dir string) error {
	s.push.Lock()
	defer s.push.Unlock()
	adapter := Adapter(dir)
	path := dir
	if adapter != "" {
		path = adapter
	} else if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return fmt.Errorf("weightsync: version %d: %s holds neither adapter_config.json nor config.json", version, dir)
	}
	if err := readable(path); err != nil {
		return fmt.Errorf("weightsync: version %d: %w (the engines read it as another user: files 0644, folders 0755)", version, err)
	}
	remote := s.mapPath(path)
	var errs []error
	loaded := false
	for _, st := range s.states {
		if s.holds(st, version) && !s.cfg.Table.Lost(st.URL) {
			continue
		}
		st.want = &pushed{version: version, path: remote, adapter: adapter != ""}
		err := s.load(ctx, st, *st.want)
		if err != nil {
			errs = append(errs, err)
		} else if s.holds(st, version) {
			loaded = true
		}
	}
	if loaded && s.cfg.OnPushed != nil {
		var holders []string
		for _, st := range s.states {
			if s.holds(st, version) {
				holders = append(holders, st.URL)
			}
		}
		name := ""
		if adapter != "" {
			name = engineapi.AdapterName(version)
		}
		s.cfg.OnPushed(version, name, holders)
	}
	return errors.Join(errs...)
}

// load pushes one version to one engine. When no answer came (the engine
// is down, or restarting without what it held), the Table marks the
// engine lost, so its next rollout request first loads st.want again.
func (s *Syncer) load(ctx context.Context, st *state, p pushed) error {
	var err error
	if p.adapter {
		err = s.pushAdapter(ctx, st, p.version, p.path)
	} else if err = s.pushFull(ctx, st, p.version, p.path); err == nil && s.holds(st, p.version) {
		st.full = &p
	}
	var ref *refused
	if err != nil && !errors.As(err, &ref) && ctx.Err() == nil {
		s.cfg.Table.Lose(st.URL)
	}
	return err
}

// restore loads again, onto an engine the Table marked lost, the newest
// version a Push asked it to load (and before an adapter the full-weight
// version it builds on). One GET /v1/models first: an engine that does not
// answer yet is an error at once (the rollout request retries later), and
// one that still lists the adapter (a dropped connection, no restart)
// holds it without a load. Full weights cannot be seen in the listing, so
// they are always loaded again.
func (s *Syncer) restore(ctx context.Context, base string) error {
	s.push.Lock()
	defer s.push.Unlock()
	t := s.cfg.Table
	if !t.Lost(base) {
		return nil // restored by another request meanwhile
	}
	i := slices.IndexFunc(s.states, func(st *state) bool { return st.URL == base })
	if i < 0 || s.states[i].want == nil {
		t.found(base) // nothing of this syncer's to load again
		return nil
	}
	st := s.states[i]
	listed, err := s.list(ctx, st)
	if err != nil {
		return fmt.Errorf("weightsync: %s may have lost version %d and does not answer yet: %w", base, st.want.version, err)
	}
	w := *st.want
	if w.adapter && slices.Contains(listed, w.version) {
		st.loaded = mergeSorted(st.loaded, listed)
		s.hold(st, engineapi.ServedVersion{Version: w.version, Adapter: engineapi.AdapterName(w.version)})
		return nil
	}
	s.cfg.Log.Warn("weightsync: the engine lost its weight version (restarted?); loading it again", "engine", base, "version", w.version)
	st.loaded = listed
	if st.full != nil && (!w.adapter || st.full.version < w.version) {
		if err := s.load(ctx, st, *st.full); err != nil {
			return err
		}
		if !w.adapter {
			return nil
		}
	}
	return s.load(ctx, st, w)
}

// list returns the swerl adapter versions the engine lists on GET
// /v1/models, sorted, in one request bounded by Config.Timeout. The error
// is only for no answer: an engine that answers something else than a
// model list lists none.
func (s *Syncer) list(ctx context.Context, st *state) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.URL+engineapi.ModelsPath, nil)
	if err != nil {
		return nil, err
	}
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", engineapi.Bearer(s.cfg.APIKey))
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list engineapi.ModelList
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list) != nil {
		return nil, nil // it answers, and lists no adapters
	}
	var vs []int64
	for _, m := range list.Data {
		if v, ok := engineapi.ParseAdapter(m.ID); ok && m.ID == engineapi.AdapterName(v) {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs), nil
}

// mergeSorted returns the sorted union of a and b.
func mergeSorted(a, b []int64) []int64 {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *Syncer) pushAdapter(ctx context.Context, st *state, version int64, path string) error {
	s.adopt(ctx, st)
	name := engineapi.AdapterName(version)
	load := engineapi.AdapterRequest{LoraName: name, LoraPath: path}
	err := s.call(ctx, st, engineapi.LoadAdapterPath(st.Kind), load, nil)
	var ref *refused
	if errors.As(err, &ref) && ref.already() {
		// The name is taken: by this very load whose answer was lost, or
		// by an earlier run's adapter of the same version number from
		// another folder. Either way, unload it and load this folder.
		err = s.call(ctx, st, engineapi.UnloadAdapterPath(st.Kind), engineapi.AdapterRequest{LoraName: name}, okIfUnknown)
		if err == nil {
			err = s.call(ctx, st, engineapi.LoadAdapterPath(st.Kind), load, nil)
		}
	}
	if err != nil {
		return fmt.Errorf("weightsync: %s (%s) did not load version %d (%s from %s): %w; rollouts keep %s", st.URL, st.Kind, version, name, path, err, s.heldName(st))
	}
	st.loaded = append(slices.DeleteFunc(st.loaded, func(v int64) bool { return v == version }), version)
	s.hold(st, engineapi.ServedVersion{Version: version, Adapter: name})
	// Unload what falls out of the window; a failure costs an adapter slot,
	// not correctness, so it is logged, not returned.
	for len(st.loaded) > s.cfg.Keep {
		old := engineapi.AdapterName(st.loaded[0])
		if err := s.call(ctx, st, engineapi.UnloadAdapterPath(st.Kind), engineapi.AdapterRequest{LoraName: old}, okIfUnknown); err != nil {
			s.cfg.Log.Warn("weightsync: unloading an old adapter failed; it stays loaded", "engine", st.URL, "adapter", old, "err", err.Error())
			break
		}
		st.loaded = st.loaded[1:]
	}
	return nil
}

// adopt reads, once per engine, the swerl adapters it already holds (GET
// /v1/models, which vLLM and swerl serve answer with the loaded adapters):
// those an earlier process of the run loaded (a --resume, a restart) join
// the window, so they are unloaded in turn instead of taking an adapter
// slot for good. An engine that does not list them is left as it is.
func (s *Syncer) adopt(ctx context.Context, st *state) {
	if st.adopted {
		return
	}
	st.adopted = true
	listed, err := s.list(ctx, st)
	if err != nil {
		if ctx.Err() == nil { // an interrupt is no news
			s.cfg.Log.Info("weightsync: could not list the engine's adapters", "engine", st.URL, "err", err.Error())
		}
		return
	}
	st.loaded = mergeSorted(st.loaded, listed)
}

func (s *Syncer) pushFull(ctx context.Context, st *state, version int64, path string) error {
	if st.Kind == engineapi.VLLM {
		return s.reloadVLLM(ctx, st, version, path)
	}
	body := engineapi.UpdateWeightsRequest{ModelPath: path, WeightVersion: engineapi.AdapterName(version)}
	if err := s.call(ctx, st, engineapi.UpdateWeightsPath, body, nil); err != nil {
		return fmt.Errorf("weightsync: %s (%s) did not load the full weights of version %d from %s: %w; rollouts keep %s", st.URL, st.Kind, version, path, err, s.heldName(st))
	}
	s.hold(st, engineapi.ServedVersion{Version: version})
	return nil
}

// reloadVLLM loads full weights into a running vLLM through its workers'
// reload_weights (POST /collective_rpc, which vLLM serves only with
// VLLM_SERVER_DEV_MODE=1). A vLLM without that endpoint (404) keeps the
// weights it started with: logged once, and not asked again.
func (s *Syncer) reloadVLLM(ctx context.Context, st *state, version int64, path string) error {
	if st.noReload {
		return nil
	}
	missing := false
	notFound := func(status int, _ string) bool {
		missing = status == http.StatusNotFound
		return missing
	}
	if err := s.call(ctx, st, engineapi.CollectiveRPCPath, engineapi.ReloadWeights(path), notFound); err != nil {
		return fmt.Errorf("weightsync: %s (%s) did not reload the full weights of version %d from %s: %w; rollouts keep %s", st.URL, st.Kind, version, path, err, s.heldName(st))
	}
	if missing {
		st.noReload = true
		s.cfg.Log.Warn("weightsync: this vLLM has no /collective_rpc (start it with VLLM_SERVER_DEV_MODE=1 to reload full weights); its rollouts keep the weights it started with (or train a LoRA adapter)", "engine", st.URL)
		return nil
	}
	s.hold(st, engineapi.ServedVersion{Version: version})
	return nil
}

func (s *Syncer) hold(st *state, v engineapi.ServedVersion) {
	s.cfg.Table.Set(st.URL, v)
	mHeld.WithLabelValues(st.URL).Set(float64(v.Version))
	if s.cfg.OnHeld != nil {
		s.cfg.OnHeld(st.Engine, v)
	}
}

func (s *Syncer) heldName(st *state) string {
	v, ok := s.cfg.Table.Get(st.URL)
	switch {
	case !ok:
		return "the weights the engine started with"
	case v.Adapter != "":
		return v.Adapter
	}
	return "version " + strconv.FormatInt(v.Version, 10)
}

// mapPath rewrites the learner's prefix to the engines' (PathMap).
func (s *Syncer) mapPath(p string) string {
	if s.from == "" {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if rest, ok := strings.CutPrefix(abs, s.from); ok && (rest == "" || rest[0] == filepath.Separator) {
		return s.to + filepath.ToSlash(rest)
	}
	return p
}

// readable checks that everything under dir can be read by other users:
// folders 0755 (r+x), files 0644 (r) at least.
func readable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := info.Mode().Perm()
		if d.IsDir() && m&0o005 != 0o005 {
			return fmt.Errorf("folder %s has mode %#o, not readable by other users", p, m)
		}
		if !d.IsDir() && m&0o004 == 0 {
			return fmt.Errorf("file %s has mode %#o, not readable by other users", p, m)
		}
		return nil
	})
}

// accept decides whether a refusal is the outcome wanted all the same
// (an adapter to unload that is already gone).
type accept func(status int, msg string) bool

// refused is an engine's answer that says no.
type refused struct {
	status int
	path   string
	msg    string
}

func (r *refused) Error() string { return fmt.Sprintf("HTTP %d from %s: %s", r.status, r.path, r.msg) }

// already reports a load refused because the name is taken (vLLM: "has
// already been loaded"; SGLang: "already loaded" / "already exists").
func (r *refused) already() bool {
	return r.status < 500 && strings.Contains(strings.ToLower(r.msg), "already")
}

func okIfUnknown(status int, msg string) bool {
	m := strings.ToLower(msg)
	return status == http.StatusNotFound || (status < 500 && (strings.Contains(m, "cannot be found") || strings.Contains(m, "not found") || strings.Contains(m, "not loaded")))
}

// call POSTs body to the engine's path, with retries, and checks the
// answer: a 2xx whose JSON (when it is JSON) carries no "success": false.
func (s *Syncer) call(ctx context.Context, st *state, path string, body any, ok accept) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	delay := s.cfg.Backoff
	for attempt := 0; ; attempt++ {
		status, msg, err := s.post(ctx, st.URL+path, b)
		if err == nil && ok != nil && ok(status, msg) {
			return nil
		}
		if err == nil && status/100 == 2 {
			return nil
		}
		if err == nil {
			err = &refused{status, path, msg}
			if err.(*refused).already() {
				return err // the caller handles it; retrying cannot change it
			}
		}
		if attempt+1 >= s.cfg.Attempts || ctx.Err() != nil {
			return fmt.Errorf("after %d attempts: %w", attempt+1, err)
		}
		s.cfg.Log.Warn("weightsync: request failed, retrying", "engine", st.URL, "path", path, "attempt", attempt+1, "err", err.Error())
		wait := delay/2 + rand.N(delay/2+1)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("after %d attempts: %w (then %v)", attempt+1, err, ctx.Err())
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// post sends one request and returns the status and the engine's message;
// a 2xx with "success": false is reported as 400 with its message. err is
// set only when no answer came.
func (s *Syncer) post(ctx context.Context, url string, body []byte) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", engineapi.Bearer(s.cfg.APIKey))
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", err
	}
	status, msg := resp.StatusCode, Message(data)
	if status/100 == 2 && failed(data) {
		status = http.StatusBadRequest
	}
	return status, msg, nil
}

// answer holds the fields of every answer shape the engines use: vLLM's
// ErrorResponse (old: top-level message; new: error.message), SGLang's
// LoRAUpdateOutput (success, error_message) and update-weights answer
// (success, message), FastAPI's validation error (detail).
type answer struct {
	Success      *bool           `json:"success"`
	Message      string          `json:"message"`
	ErrorMessage string          `json:"error_message"`
	Error        json.RawMessage `json:"error"`
	Detail       json.RawMessage `json:"detail"`
}

func failed(body []byte) bool {
	var a answer
	return json.Unmarshal(body, &a) == nil && a.Success != nil && !*a.Success
}

// Message is the human-readable part of an engine's answer: the message
// of a JSON answer of any of the engines' shapes, else the body's text
// (trimmed, at most 300 bytes).
func Message(body []byte) string {
	var a answer
	if json.Unmarshal(body, &a) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		switch {
		case a.ErrorMessage != "":
			return clip(a.ErrorMessage)
		case len(a.Error) > 0 && json.Unmarshal(a.Error, &nested) == nil && nested.Message != "":
			return clip(nested.Message)
		case a.Message != "":
			return clip(a.Message)
		case len(a.Detail) > 0:
			return clip(string(a.Detail))
		}
	}
	return clip(string(body))
}

func clip(s string) string {
	s = strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD")
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}

// ParseEngines returns the engines of a comma-separated list of server
// URLs ("http://a:8000/v1,http://b:8000"), all speaking kind's API, as
// swerl learn --engine names them. Each must be an http(s) URL with a host.
func ParseEngines(list string, kind engineapi.Kind) ([]Engine, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("weightsync: %w", engineapi.KindError(kind))
	}
	var es []Engine
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, ok := httpURL(s); !ok {
			return nil, fmt.Errorf("weightsync: %q is not an http(s) server URL", s)
		}
		es = append(es, Engine{URL: s, Kind: kind})
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("weightsync: no server URL in %q", list)
	}
	return es, nil
}

// httpURL parses s and reports whether it is an http(s) URL with a host.
func httpURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	return u, err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"swerl/gpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/gpu/tokenizer"
	"swerl/internal/engineapi"
)

// adapter is a loaded LoRA adapter: its name and folder.
type adapter struct {
	name, path string
}

// merged is a base model with an adapter merged, ready to sample.
type merged struct {
	name string
	base *gpu.Model // the base weights it was merged into
	pol  *policy.Policy
}

// target is what serves one request: a policy, the model name its answer
// carries, the tokenizer, and the version an adapter name fixes (or -1:
// the policy's).
type target struct {
	pol   *policy.Policy
	tok   *tokenizer.Tokenizer
	name  string
	fixed int64
}

func (t target) version(reported int64) int64 {
	if t.fixed >= 0 {
		return t.fixed
	}
	return reported
}

// base is the policy of the base model.
func (s *Server) base() *policy.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pol
}

// lookup finds a loaded adapter a request's model names: the name itself,
// or SGLang's "BASE:name". Callers hold s.mu.
func (s *Server) lookup(model string) (adapter, bool) {
	for _, m := range []string{model, model[strings.LastIndexByte(model, ':')+1:]} {
		for _, a := range s.adapters {
			if a.name == m {
				return a, true
			}
		}
	}
	return adapter{}, false
}

// target returns what serves a request naming model: the base model, or
// the base with the named adapter merged (merged now if it is not among
// the MaxMerged kept).
func (s *Server) target(model string) (target, error) {
	s.mu.Lock()
	base := s.pol
	a, ok := s.lookup(model)
	s.mu.Unlock()
	if !ok {
		if _, isAdapter := engineapi.ParseAdapter(model[strings.LastIndexByte(model, ':')+1:]); isAdapter {
			// The name claims a weight version (swerl-vNNNNNN). Answering
			// with the base under that name would label the base's samples
			// with the adapter's version; vLLM answers such a request 404,
			// and so does this server, so the client can name another.
			return target{}, &apiError{status: http.StatusNotFound, param: "model",
				msg: fmt.Sprintf("The model `%s` does not exist: no adapter of that name is loaded.", model)}
		}
		name := model
		if name == "" {
			name = s.Name
		}
		return target{pol: base, tok: base.Tokenizer(), name: name, fixed: -1}, nil
	}
	m, err := s.merge(base, a)
	if err != nil {
		return target{}, err
	}
	fixed := int64(-1)
	if v, ok := engineapi.ParseAdapter(a.name); ok {
		fixed = v
	}
	return target{pol: m.pol, tok: m.pol.Tokenizer(), name: model, fixed: fixed}, nil
}

// merge returns the base with adapter a merged, from the kept ones or
// merged now (the least recently used one making room). A merged model
// with a NaN or infinite weight, or whose probe forward pass gives one,
// is refused (400 naming the tensor).
func (s *Server) merge(base *policy.Policy, a adapter) (*merged, error) {
	lb := base.Loaded()
	s.mu.Lock()
	for i, m := range s.merged {
		if m.name == a.name && m.base == lb.Model {
			s.merged = append(slices.Delete(s.merged, i, i+1), m)
			s.mu.Unlock()
			return m, nil
		}
	}
	s.mu.Unlock()
	if s.LoadAdapter == nil {
		return nil, &apiError{status: http.StatusBadRequest, msg: "this server was started without adapter support"}
	}
	w, err := s.LoadAdapter(lb.Model, a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("No adapter found for %s: %v", a.path, err)}
	}
	if err == nil {
		// Whatever the loader, weights that make NaN logits never serve.
		err = w.CheckFinite()
	}
	if err != nil {
		return nil, badRequest("lora_path", "adapter %s from %s: %v", a.name, a.path, err)
	}
	v := lb.Version
	if av, ok := engineapi.ParseAdapter(a.name); ok {
		v = av
	}
	pol, err := policy.FromLoaded(&modeldir.Policy{Dir: a.path, Model: w, Tokenizer: lb.Tokenizer, Stop: lb.Stop, Version: v}, s.PolicyOptions)
	if err != nil {
		return nil, err
	}
	if err := pol.Probe(context.Background()); err != nil {
		pol.Close()
		return nil, badRequest("lora_path", "adapter %s from %s merged into the base: %v", a.name, a.path, err)
	}
	m := &merged{name: a.name, base: lb.Model, pol: pol}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.merged = append(s.merged, m)
	for len(s.merged) > s.MaxMerged {
		s.merged[0].pol.Close() // requests in flight on it finish
		s.merged = s.merged[1:]
	}
	return m, nil
}

// loadAdapter registers an adapter, merging it at once so that a folder
// that does not fit the base is refused here rather than at the first
// request naming it.
func (s *Server) loadAdapter(name, path string) *apiError {
	if name == "" || path == "" {
		return badRequest("lora_name", "Both 'lora_name' and 'lora_path' must be provided.")
	}
	if e := checkAdapterName(name); e != nil {
		return e
	}
	if name == s.Name {
		// Requests naming the base would get the adapter, and /v1/models
		// would list the id twice.
		return badRequest("lora_name", "The lora adapter name '%s' is the base model's id; choose another name.", name)
	}
	s.loading.Lock()
	defer s.loading.Unlock()
	s.mu.Lock()
	_, taken := s.lookup(name)
	full := len(s.adapters) >= s.MaxAdapters
	base := s.pol
	s.mu.Unlock()
	if taken {
		return badRequest("lora_name", "The lora adapter '%s' has already been loaded.", name)
	}
	if full {
		return badRequest("lora_name", "%d adapters are loaded, the most this server holds; unload one first", s.MaxAdapters)
	}
	if _, err := os.Stat(path); err != nil {
		return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("No adapter found for %s: %v", path, err)}
	}
	a := adapter{name, path}
	if _, err := s.merge(base, a); err != nil {
		return asAPIError(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.lookup(name); taken {
		return badRequest("lora_name", "The lora adapter '%s' has already been loaded.", name)
	}
	s.adapters = append(s.adapters, a)
	return nil
}

// unloadAdapter forgets an adapter and its merged model.
func (s *Server) unloadAdapter(name string) *apiError {
	if e := checkAdapterName(name); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.adapters, func(a adapter) bool { return a.name == name })
	if name == "" || i < 0 {
		return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("The lora adapter '%s' cannot be found.", name)}
	}
	s.adapters = slices.Delete(s.adapters, i, i+1)
	s.merged = slices.DeleteFunc(s.merged, func(m *merged) bool {
		if m.name == name {
			m.pol.Close()
			return true
		}
		return false
	})
	return nil
}

// admin decodes the body of a weight endpoint: POST, JSON, at most MaxBody.
func (s *Server) admin(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if r.Method != http.MethodPost {
		return &apiError{status: http.StatusMethodNotAllowed, msg: "use POST"}
	}
	return s.decode(w, r, v, "a weight-update")
}

// adapterOp is what a load or unload endpoint does with its request.
type adapterOp func(s *Server, req engineapi.AdapterRequest) *apiError

func loadOp(s *Server, req engineapi.AdapterRequest) *apiError {
	return s.loadAdapter(req.LoraName, req.LoraPath)
}

func unloadOp(s *Server, req engineapi.AdapterRequest) *apiError {
	return s.unloadAdapter(req.LoraName)
}

// applyAdapterOp decodes the request of an adapter endpoint and applies op.
func (s *Server) applyAdapterOp(w http.ResponseWriter, r *http.Request, op adapterOp) (engineapi.AdapterRequest, *apiError) {
	var req engineapi.AdapterRequest
	if e := s.admin(w, r, &req); e != nil {
		return req, e
	}
	return req, op(s, req)
}

// vllmAdapter is vLLM's load or unload endpoint: op applied to the
// decoded request, answered with vLLM's plain-text success message
// ("Success: LoRA adapter 'NAME' <done> successfully.") or an error.
func (s *Server) vllmAdapter(op adapterOp, done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, e := s.applyAdapterOp(w, r, op)
		if e != nil {
			writeError(w, e)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Success: LoRA adapter '%s' %s successfully.", req.LoraName, done)
	}
}

// sglangAnswer writes SGLang's LoRAUpdateOutput: 200 on success, 400 with
// success false otherwise.
func (s *Server) sglangAnswer(w http.ResponseWriter, e *apiError) {
	s.mu.Lock()
	loaded := map[string]string{}
	for _, a := range s.adapters {
		loaded[a.name] = a.path
	}
	s.mu.Unlock()
	body := engineapi.SGLangAdapterAnswer{Success: e == nil, LoadedAdapters: loaded}
	status := http.StatusOK
	if e != nil {
		body.ErrorMessage, status = &e.msg, http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// sglangAdapter is SGLang's load or unload endpoint: op applied to the
// decoded request, answered as sglangAnswer.
func (s *Server) sglangAdapter(op adapterOp) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, e := s.applyAdapterOp(w, r, op)
		s.sglangAnswer(w, e)
	}
}

// updateWeights is SGLang's /update_weights_from_disk: the base model is
// replaced by the one in model_path (requests in flight finish on the old
// one; merged adapters are merged again into the new one when next asked
// for). A weight_version "swerl-vN" is the version the new weights report.
// Weights holding a NaN or an infinity, or whose forward pass on a probe
// prompt does (Policy.Probe), are refused with 400 naming the tensor, and
// the old weights keep serving.
func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	var req engineapi.UpdateWeightsRequest
	answer := func(status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(engineapi.UpdateWeightsAnswer{Success: status == http.StatusOK, Message: msg})
	}
	if e := s.admin(w, r, &req); e != nil {
		answer(e.status, e.msg)
		return
	}
	if req.ModelPath == "" {
		answer(http.StatusBadRequest, "model_path is required")
		return
	}
	mp, err := modeldir.Load(req.ModelPath)
	if err != nil {
		answer(http.StatusBadRequest, fmt.Sprintf("Failed to load the weights in %s: %v", req.ModelPath, err))
		return
	}
	if v, ok := engineapi.ParseAdapter(req.WeightVersion); ok {
		mp.Version = v
	}
	pol, err := policy.FromLoaded(mp, s.PolicyOptions)
	if err == nil {
		// modeldir.Load refused NaN and infinite weights; the probe
		// refuses finite ones that overflow in the forward pass. Either
		// way the weights serving stay.
		if err = pol.Probe(r.Context()); err != nil {
			pol.Close()
		}
	}
	if err != nil {
		answer(http.StatusBadRequest, fmt.Sprintf("Failed to load the weights in %s: %v", req.ModelPath, err))
		return
	}
	s.mu.Lock()
	old := s.pol
	s.pol = pol
	for _, m := range s.merged {
		m.pol.Close()
	}
	s.merged = nil
	s.mu.Unlock()
	old.Close()
	answer(http.StatusOK, "Succeeded to update model weights.")
}

// models lists the base model and the loaded adapters, as vLLM does (root:
// the folder, parent: the base for an adapter), with swerl_version.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "use GET"})
		return
	}
	s.mu.Lock()
	base, adapters := s.pol, slices.Clone(s.adapters)
	s.mu.Unlock()
	if s.HideAdapters {
		adapters = nil
	}
	lb := base.Loaded()
	v := lb.Version
	list := engineapi.ModelList{Object: "list", Data: []engineapi.Model{{ID: s.Name, Object: "model", OwnedBy: "swerl", Root: lb.Dir,
		MaxModelLen: base.MaxSeq(), SwerlVersion: v}}}
	for _, a := range adapters {
		av := v
		if n, ok := engineapi.ParseAdapter(a.name); ok {
			av = n
		}
		list.Data = append(list.Data, engineapi.Model{ID: a.name, Object: "model", OwnedBy: "swerl", Root: a.path, Parent: &s.Name,
			SwerlVersion: av})
	}
	w.Header().Set(engineapi.VersionHeader, strconv.FormatInt(v, 10))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

// CopyModel returns a copy of m's weights, for a LoadAdapter that merges
// an adapter in place (the base must not change).
func CopyModel(m *gpu.Model) (*gpu.Model, error) {
	c, err := gpu.NewZeroModel(m.Config)
	if err != nil {
		return nil, err
	}
	src := m.Tensors()
	for i, t := range c.Tensors() {
		copy(t.Data, src[i].Data)
	}
	return c, nil
}

// MaxAdapterName bounds an adapter's name in bytes. swerl's names
// ("swerl-v000123") are short; a longer one is refused rather than kept,
// listed and echoed back.
const MaxAdapterName = 256

// checkAdapterName refuses a name that is too long to keep and echo, or
// that holds control characters (it goes back in plain-text answers and
// in /v1/models; JSON decoding already made it valid UTF-8); the error
// does not repeat a long name.
func checkAdapterName(name string) *apiError {
	switch {
	case len(name) > MaxAdapterName:
		return badRequest("lora_name", "lora_name of %d bytes: at most %d", len(name), MaxAdapterName)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return badRequest("lora_name", "lora_name %q holds a control character", name)
	}
	return nil
}

// Package serve is an OpenAI-compatible HTTP server over the in-process
// policy (gpu/policy): POST /v1/chat/completions, POST /v1/completions and
// GET /v1/models, so that the train pipeline's HTTP policy, or any OpenAI
// client, can sample from a swerl checkpoint. It also speaks the weight
// APIs of the inference engines swerl syncs (sinks/weightsync), so it can
// stand in for one:
//
//   - vLLM: POST /v1/load_lora_adapter {"lora_name","lora_path"} and
//     /v1/unload_lora_adapter {"lora_name"}: 200 with a text body, or an
//     error object; /v1/models lists the base model and the adapters
//     (root: the adapter's folder, parent: the base). A name that is the
//     base's id or a loaded adapter's, longer than MaxAdapterName or
//     holding a control character is refused with 400.
//   - SGLang: POST /load_lora_adapter and /unload_lora_adapter (same
//     fields; answer {"success","error_message","loaded_adapters"}), and
//     /update_weights_from_disk {"model_path"[, "weight_version"]} (answer
//     {"success","message","num_paused_requests"}), which replaces the base
//     model (a weight_version "swerl-vN" becomes the version reported).
//
// A request whose model names a loaded adapter ("swerl-v000123", or
// SGLang's "BASE:swerl-v000123") is served by the base model with that
// adapter merged (LoadAdapter, injected by the caller: swerl serve reads
// PEFT folders); the newest MaxMerged merged models stay in memory. Its
// response's model field is the name asked for and its version that of
// the adapter name (swerl-vN → N).
//
// It also speaks vLLM's dialect where clients rely on it (dialect.go):
// POST /tokenize and /detokenize; completions prompts as a string, a
// list of strings, token ids or a list of lists of token ids; echo with
// the prompt scored and max_tokens 0 (loglikelihood scorers); vLLM's
// prompt_logprobs; top log-probabilities (completions' logprobs N,
// chat's top_logprobs N) up to engineapi.MaxLogprobs; and max_model_len,
// on /v1/models and /tokenize, the context it enforces.
//
// Supported request fields: messages (chat) or prompt (completions), n,
// max_tokens (or max_completion_tokens), temperature, top_p, top_k, seed,
// stop (a string or a list; matched on the decoded text, the stop string
// excluded from the content as OpenAI does), logprobs, vLLM's
// return_token_ids (prompt_token_ids on the response, token_ids on each
// choice), and stream with stream_options.include_usage: server-sent
// events in OpenAI's chunk format ("data: {…}\n\n", then "data:
// [DONE]"), the usage in a last chunk with no choices when asked. A
// stream of one choice without logprobs or token ids goes out token by
// token as the policy samples it (live.go), holding back only the text a
// stop string could still cut and an incomplete UTF-8 character; other
// streams are generated whole and then sent in chunks of whole UTF-8
// characters (a token's bytes may split one). Log-probabilities are those of the
// model's raw distribution (temperature 1, untruncated), the quantity a
// GRPO learner needs.
//
// Every response names the weight version that produced it: the header
// X-Swerl-Policy-Version and system_fingerprint "swerl-vN" (N = -1 for a
// plain model directory).
//
// # Limits
//
// The server is meant to face clients it does not trust. HTTPServer sets
// read (header and body), write and idle timeouts, so a connection that
// stalls is closed. At most MaxConcurrent completions run at once and at
// most MaxQueue more wait; a request beyond that is answered 429 with
// Retry-After before its body is read, so memory is bounded by
// (MaxConcurrent+MaxQueue) bodies of at most MaxBody bytes. With APIKey
// set, every route but /health needs "Authorization: Bearer <key>" (401
// otherwise). A response that cannot be encoded (NaN log-probabilities)
// is a 500 with a JSON error, never a 200 with an empty body. A client
// that hangs up cancels its request's context, and the policy drops its
// completions before its next step: at most the step in flight is
// sampled for nobody (TestGenerationStopsWhenTheClientLeaves counts).
// Weights that make NaN are refused before they serve (see updateWeights
// and merge).
package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"swerl/gpu"
	"swerl/gpu/policy"
	"swerl/gpu/tokenizer"
	"swerl/internal/engineapi"
	"swerl/transforms/rollout"
)

// Server serves one policy. Set its fields before calling Handler or
// HTTPServer.
type Server struct {
	// Name is the model id of /v1/models (requests may name any model).
	Name string
	// LoadAdapter returns a copy of base with the LoRA adapter in folder
	// dir merged; base must not change. nil: the adapter endpoints answer
	// that adapters are not enabled.
	LoadAdapter func(base *gpu.Model, dir string) (*gpu.Model, error)
	// PolicyOptions configure the policies of merged models and of the
	// weights update_weights_from_disk loads (device, lengths, sampling
	// defaults).
	PolicyOptions policy.Options
	// MaxAdapters bounds the adapters loaded at once (400 beyond), and
	// MaxMerged the merged models kept in memory (each a copy of the
	// base; the least recently used goes). Defaults 16 and 2.
	MaxAdapters, MaxMerged int
	// HideAdapters lists only the base model on /v1/models, not the LoRA
	// adapters loaded (as older SGLang does); requests may name them all
	// the same. For testing clients that learn the adapters elsewhere.
	HideAdapters bool
	// MaxN bounds n per request. Default 16.
	MaxN int
	// MaxBody bounds a request body in bytes (413 beyond). Default 4 MiB:
	// a prompt the model can take is far smaller.
	MaxBody int64
	// MaxConcurrent bounds the completions computed at once (the backend
	// runs one at a time; a second one is tokenized and ready). Default 2.
	MaxConcurrent int
	// MaxQueue bounds the requests waiting for one of those; beyond it a
	// request is answered 429 with Retry-After. Default 16.
	MaxQueue int
	// APIKey, when not empty, is the bearer token every route but /health
	// requires.
	APIKey string
	// Timeouts of HTTPServer. ReadTimeout covers the headers and the body;
	// WriteTimeout runs from the end of the headers to the end of the
	// response, so it bounds queueing and generation too (the completion
	// is cancelled when it passes). Defaults 30s, 5m, 2m.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration

	seq     atomic.Int64
	once    sync.Once
	admit   chan struct{} // one token a request admitted (running or queued)
	compute chan struct{} // one token a completion running

	loading  sync.Mutex // one adapter load at a time: each merge copies the base
	mu       sync.Mutex // guards pol, adapters and merged
	pol      *policy.Policy
	adapters []adapter // in load order
	merged   []*merged // least recently used first
}

// The default limits of a Server (New), which swerl serve's flags share.
const (
	DefaultMaxConcurrent = 2
	DefaultMaxQueue      = 16
	DefaultReadTimeout   = 30 * time.Second
	DefaultWriteTimeout  = 5 * time.Minute
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultMaxAdapters   = 16
	DefaultMaxMerged     = 2
)

// New returns a server for pol named name, with the default limits.
func New(pol *policy.Policy, name string) *Server {
	return &Server{pol: pol, Name: name, MaxN: 16, MaxBody: 4 << 20, MaxConcurrent: DefaultMaxConcurrent, MaxQueue: DefaultMaxQueue,
		ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout, IdleTimeout: DefaultIdleTimeout,
		MaxAdapters: DefaultMaxAdapters, MaxMerged: DefaultMaxMerged}
}

func (s *Server) init() {
	s.once.Do(func() {
		s.MaxConcurrent = max(s.MaxConcurrent, 1)
		s.MaxQueue = max(s.MaxQueue, 0)
		s.MaxAdapters = max(s.MaxAdapters, 1)
		s.MaxMerged = max(s.MaxMerged, 1)
		s.admit = make(chan struct{}, s.MaxConcurrent+s.MaxQueue)
		s.compute = make(chan struct{}, s.MaxConcurrent)
	})
}

// HTTPServer returns an http.Server for Handler with the server's
// timeouts and a 64 KiB bound on request headers.
func (s *Server) HTTPServer() *http.Server {
	rh := 10 * time.Second
	if s.ReadTimeout > 0 {
		rh = min(rh, s.ReadTimeout)
	}
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: rh, ReadTimeout: s.ReadTimeout,
		WriteTimeout: s.WriteTimeout, IdleTimeout: s.IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// Handler returns the HTTP routes.
func (s *Server) Handler() http.Handler {
	s.init()
	mux := http.NewServeMux()
	mux.HandleFunc(engineapi.ChatCompletionsPath, s.auth(s.chat))
	mux.HandleFunc(engineapi.CompletionsPath, s.auth(s.completions))
	mux.HandleFunc(engineapi.ModelsPath, s.auth(s.models))
	mux.HandleFunc(engineapi.TokenizePath, s.auth(s.tokenize))
	mux.HandleFunc(engineapi.DetokenizePath, s.auth(s.detokenize))
	mux.HandleFunc(engineapi.LoadAdapterPath(engineapi.VLLM), s.auth(s.vllmAdapter(loadOp, "added")))
	mux.HandleFunc(engineapi.UnloadAdapterPath(engineapi.VLLM), s.auth(s.vllmAdapter(unloadOp, "removed")))
	mux.HandleFunc(engineapi.LoadAdapterPath(engineapi.SGLang), s.auth(s.sglangAdapter(loadOp)))
	mux.HandleFunc(engineapi.UnloadAdapterPath(engineapi.SGLang), s.auth(s.sglangAdapter(unloadOp)))
	mux.HandleFunc(engineapi.UpdateWeightsPath, s.auth(s.updateWeights))
	mux.HandleFunc(engineapi.HealthPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(engineapi.VersionHeader, strconv.FormatInt(s.base().Version(), 10))
		io.WriteString(w, "ok\n")
	})
	return mux
}

// auth requires the bearer token when APIKey is set. The comparison takes
// the same time whatever the token sent.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.APIKey == "" {
		return h
	}
	want := []byte(engineapi.Bearer(s.APIKey))
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="swerl"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, msg: "missing or wrong API key: send Authorization: Bearer <key>"})
			return
		}
		h(w, r)
	}
}

// chatAPI is a chat-completions request, answered by the server.
type chatAPI struct{ engineapi.ChatRequest }

// newHead starts an answer of type object from target t, its id
// "<prefix>-swerl-<unix nanoseconds>-<sequence number>"; version is the
// weight version that sampled it (-1 for none), for the fingerprint.
func (s *Server) newHead(t target, prefix, object string, version int64) engineapi.Head {
	now := time.Now()
	return engineapi.Head{ID: fmt.Sprintf("%s-swerl-%d-%d", prefix, now.UnixNano(), s.seq.Add(1)), Object: object,
		Created: now.Unix(), Model: t.name, SystemFingerprint: engineapi.Fingerprint(t.version(version))}
}

type apiError struct {
	status int
	msg    string
	param  string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...), param: param}
}

func writeError(w http.ResponseWriter, e *apiError) {
	typ := "invalid_request_error"
	if e.status >= 500 {
		typ = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": e.msg, "type": typ, "param": e.param, "code": nil}})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.serveAPI(w, r, &chatAPI{}, "a chat-completions")
}

func (req *chatAPI) modelName() string { return req.Model }

func (req *chatAPI) answer(ctx context.Context, s *Server, t target) (any, string, func(http.ResponseWriter), error) {
	if req.Stream && (req.N == nil || *req.N == 1) && !req.Logprobs && !req.ReturnTokenIDs {
		return nil, "", func(w http.ResponseWriter) { s.streamChatLive(ctx, w, t, req.ChatRequest) }, nil
	}
	resp, raw, stops, err := s.complete(ctx, t, req.ChatRequest, nil)
	if err != nil || !req.Stream {
		return resp, resp.SystemFingerprint, nil, err
	}
	return resp, resp.SystemFingerprint, func(w http.ResponseWriter) { streamChat(w, t.tok, resp, raw, stops, req.ChatRequest) }, nil
}

// completionAPI is the request of one completion API (chat or text).
type completionAPI interface {
	modelName() string
	// answer completes the request with t: the whole response and its
	// fingerprint, and, when the request asks to stream, a writer of the
	// same answer as server-sent events.
	answer(ctx context.Context, s *Server, t target) (resp any, fingerprint string, stream func(http.ResponseWriter), err error)
}

// serveAPI is the handler of a completion API: admission, the body
// decoded into req, the model it names resolved (the base or a merged
// adapter), the answer written whole or streamed.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, req completionAPI, what string) {
	ctx, release, ok := s.begin(w, r, req, what)
	if !ok {
		return
	}
	defer release()
	t, err := s.target(req.modelName())
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	resp, fingerprint, stream, err := req.answer(ctx, s, t)
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	if stream != nil {
		stream(w)
		return
	}
	s.writeJSON(w, resp, fingerprint)
}

// begin admits a completion request and decodes its body into v: before
// the body is read, beyond MaxConcurrent+MaxQueue a request costs nothing
// but a 429; then it waits for a compute slot. ok false: the answer is
// written. release frees the slots.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, v any, what string) (ctx context.Context, release func(), ok bool) {
	if r.Method != http.MethodPost {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "use POST"})
		return nil, nil, false
	}
	select {
	case s.admit <- struct{}{}:
	default:
		// The body is drained, not kept (up to MaxBody, within the read
		// timeout): a server that answers while the client is still
		// sending makes the client see a broken pipe, not this answer.
		io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.MaxBody))
		w.Header().Set("Retry-After", "1")
		writeError(w, &apiError{status: http.StatusTooManyRequests,
			msg: fmt.Sprintf("busy: %d requests running and %d queued; retry later", s.MaxConcurrent, s.MaxQueue)})
		return nil, nil, false
	}
	if err := s.decode(w, r, v, what); err != nil {
		<-s.admit
		writeError(w, err)
		return nil, nil, false
	}
	// Past the write timeout the response cannot be sent: stop working.
	timeout := s.WriteTimeout
	if timeout <= 0 {
		timeout = 1<<63 - 1
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	select {
	case s.compute <- struct{}{}:
		release = func() { <-s.compute; cancel(); <-s.admit }
	case <-ctx.Done():
		cancel()
		<-s.admit
		writeError(w, &apiError{status: http.StatusServiceUnavailable, msg: "timed out waiting in the queue"})
		return nil, nil, false
	}
	return ctx, release, true
}

// decode reads a JSON request body of at most MaxBody bytes into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, what string) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.MaxBody))
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body over %d bytes", s.MaxBody)}
		}
		return badRequest("", "request body is not %s JSON object: %v", what, err)
	}
	return nil
}

func asAPIError(err error) *apiError {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	return ae
}

// writeJSON encodes a completion before writing anything, so that one that
// cannot be encoded (NaN log-probabilities from a diverged model) is a 500
// that says so, not a 200 with an empty body.
func (s *Server) writeJSON(w http.ResponseWriter, resp any, fingerprint string) {
	body, err := json.Marshal(resp)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError,
			msg: fmt.Sprintf("the completion of weight version %s cannot be encoded as JSON: %v", strings.TrimPrefix(fingerprint, "swerl-v"), err)})
		return
	}
	w.Header().Set(engineapi.VersionHeader, strings.TrimPrefix(fingerprint, "swerl-v"))
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
}

// Complete answers one request (the handler without HTTP).
func (s *Server) Complete(ctx context.Context, req engineapi.ChatRequest) (engineapi.ChatResponse, error) {
	s.init()
	t, err := s.target(req.Model)
	if err != nil {
		return engineapi.ChatResponse{}, err
	}
	resp, _, _, err := s.complete(ctx, t, req, nil)
	return resp, err
}

// request checks the sampling parameters and turns them into the policy's.
func (s *Server) request(p engineapi.Sampling) (rollout.Request, policy.Params, []string, error) {
	var extra policy.Params
	rr := rollout.Request{InstanceID: "chat", N: 1}
	if p.N != nil {
		rr.N = *p.N
	}
	if rr.N < 1 || rr.N > s.MaxN {
		return rr, extra, nil, badRequest("n", "n %d outside 1..%d", rr.N, s.MaxN)
	}
	if p.MaxCompletionTokens != nil {
		p.MaxTokens = p.MaxCompletionTokens
	}
	if p.MaxTokens != nil {
		if *p.MaxTokens < 1 {
			return rr, extra, nil, badRequest("max_tokens", "max_tokens %d, want ≥ 1", *p.MaxTokens)
		}
		rr.MaxTokens = *p.MaxTokens
	}
	if p.Temperature != nil {
		if *p.Temperature < 0 || *p.Temperature > 2 {
			return rr, extra, nil, badRequest("temperature", "temperature %v outside [0, 2]", *p.Temperature)
		}
		// OpenAI's 0 is greedy; the policy's 0 means its default.
		rr.Temperature, rr.Greedy = *p.Temperature, *p.Temperature == 0
	}
	if p.TopP != nil {
		if *p.TopP <= 0 || *p.TopP > 1 {
			return rr, extra, nil, badRequest("top_p", "top_p %v outside (0, 1]", *p.TopP)
		}
		rr.TopP = *p.TopP
	}
	if p.TopK != nil {
		if *p.TopK < -1 {
			return rr, extra, nil, badRequest("top_k", "top_k %d, want ≥ -1", *p.TopK)
		}
		extra.TopK = max(*p.TopK, 0)
	}
	if p.Seed != nil {
		rr.Seed = *p.Seed
	} else {
		rr.Seed = rand.Int64()
	}
	stops, err := parseStop(p.Stop)
	return rr, extra, stops, err
}

// complete answers a chat request with the target's policy; it also
// returns the completions and stop strings the answer was made of.
func (s *Server) complete(ctx context.Context, t target, req engineapi.ChatRequest, onToken func(policy.Token)) (out engineapi.ChatResponse, raw []rollout.Completion, stops []string, err error) {
	if req.StreamOptions != nil && !req.Stream {
		return out, nil, nil, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	if e := checkMessages(req.Messages); e != nil {
		return out, nil, nil, e
	}
	if e := checkLogprobs("top_logprobs", req.TopLogprobs); e != nil {
		return out, nil, nil, e
	}
	topN := 0
	if req.TopLogprobs != nil {
		if !req.Logprobs {
			return out, nil, nil, badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		topN = *req.TopLogprobs
	}
	// The messages are encoded here, as CompleteMessages would, so that
	// a prompt too long is refused naming max_model_len.
	prompt, err := t.tok.EncodeMessages(messages(req.Messages))
	if err != nil {
		return out, nil, nil, fmt.Errorf("policy: instance %q: %w", "chat", err)
	}
	if maxLen := t.pol.MaxSeq(); len(prompt)+1 > maxLen {
		return out, nil, nil, promptTooLong("messages", len(prompt), 1, maxLen)
	}
	var top [][][]gpu.TokenLogProb
	resp, stops, usage, err := s.sample(req.Sampling, "messages", func(rr rollout.Request, extra policy.Params) (rollout.Response, error) {
		extra.OnToken = onToken
		extra.TopLogProbs = topN
		resp, raw, err := t.pol.CompleteTokensRaw(ctx, rr, prompt, extra)
		for _, c := range raw {
			top = append(top, c.Top)
		}
		return resp, err
	})
	if err != nil {
		return out, nil, nil, err
	}
	out = engineapi.ChatResponse{Head: s.newHead(t, "chatcmpl", "chat.completion", resp.PolicyVersion), Usage: usage}
	if req.ReturnTokenIDs {
		out.PromptTokenIDs = resp.Completions[0].PromptTokens
	}
	for i, c := range resp.Completions {
		ch := choiceOf(t.tok, i, c, stops, req.Logprobs, req.ReturnTokenIDs)
		if i < len(top) && ch.Logprobs != nil {
			for j := range ch.Logprobs.Content {
				if j < len(top[i]) {
					ch.Logprobs.Content[j].TopLogprobs = chatTop(t.tok, top[i][j], topN)
				}
			}
		}
		out.Choices = append(out.Choices, ch)
	}
	return out, resp.Completions, stops, nil
}

// sample checks a request's sampling parameters and runs generate with
// them: a prompt too long for the context is a 400 naming param. It
// returns the completions, the stop strings and the usage.
func (s *Server) sample(p engineapi.Sampling, param string, generate func(rollout.Request, policy.Params) (rollout.Response, error)) (rollout.Response, []string, engineapi.Usage, error) {
	var u engineapi.Usage
	rr, extra, stops, err := s.request(p)
	if err != nil {
		return rollout.Response{}, nil, u, err
	}
	resp, err := generate(rr, extra)
	if errors.Is(err, policy.ErrPromptTooLong) {
		return resp, nil, u, badRequest(param, "%v", err)
	}
	if err == nil && len(resp.Completions) == 0 {
		err = errors.New("the policy returned no completions")
	}
	if err != nil {
		return resp, nil, u, err
	}
	u.PromptTokens = len(resp.Completions[0].PromptTokens)
	for _, c := range resp.Completions {
		u.CompletionTokens += len(c.Tokens)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return resp, stops, u, nil
}

func parseStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or a list of strings")
	}
	if len(many) > 4 {
		return nil, badRequest("stop", "at most 4 stop sequences")
	}
	var out []string
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// cut is a completion cut at its first stop string: the per-token texts
// (special tokens such as the eos token are empty), how many tokens end
// before the stop, the content (valid UTF-8) and the finish reason.
type cut struct {
	texts   []string
	keep    int
	content string
	finish  string
}

func cutAtStop(tok *tokenizer.Tokenizer, c rollout.Completion, stops []string) cut {
	k := cut{texts: make([]string, len(c.Tokens)), keep: len(c.Tokens), finish: c.FinishReason}
	var full strings.Builder
	for i, t := range c.Tokens {
		b, err := tok.DecodeBytes(nil, []int32{t}, false)
		if err != nil {
			b = []byte("\uFFFD")
		}
		k.texts[i] = string(b)
		full.WriteString(k.texts[i])
	}
	content := full.String()
	if at := firstStop(content, stops); at >= 0 {
		content = content[:at]
		k.finish = "stop"
		n := 0
		k.keep = 0
		for i := range k.texts {
			if n+len(k.texts[i]) > at {
				break
			}
			n += len(k.texts[i])
			k.keep = i + 1
		}
	}
	k.content = strings.ToValidUTF8(content, "\uFFFD")
	return k
}

// tokenLogprob is the logprobs entry of token i of c.
func tokenLogprob(tok *tokenizer.Tokenizer, c rollout.Completion, text string, i int) engineapi.TokenLogprob {
	b := []byte(text)
	if text == "" && tok.IsSpecial(c.Tokens[i]) {
		sb, _ := tok.DecodeBytes(nil, c.Tokens[i:i+1], true)
		b = sb
	}
	bs := make([]int, len(b))
	for j, x := range b {
		bs[j] = int(x)
	}
	return engineapi.TokenLogprob{Token: strings.ToValidUTF8(string(b), "\uFFFD"), Logprob: float64(c.LogProbs[i]), Bytes: bs, TopLogprobs: []any{}}
}

// choiceOf builds one choice, cutting the completion at the first stop
// string: the content ends before it, and only tokens that end before it
// are reported.
func choiceOf(tok *tokenizer.Tokenizer, i int, c rollout.Completion, stops []string, logprobs, ids bool) engineapi.Choice {
	k := cutAtStop(tok, c, stops)
	ch := engineapi.Choice{Index: i, FinishReason: k.finish}
	ch.Message.Role = "assistant"
	ch.Message.Content = k.content
	if ids {
		ch.TokenIDs = c.Tokens[:k.keep]
	}
	if logprobs {
		ch.Logprobs = &engineapi.ChoiceLogprobs{Content: []engineapi.TokenLogprob{}}
		for j := 0; j < k.keep && j < len(c.LogProbs); j++ {
			ch.Logprobs.Content = append(ch.Logprobs.Content, tokenLogprob(tok, c, k.texts[j], j))
		}
	}
	return ch
}

func firstStop(s string, stops []string) int {
	best := -1
	for _, st := range stops {
		if i := strings.Index(s, st); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// messages are a request's chat messages as the chat template takes them.
func messages(ms []engineapi.Message) []tokenizer.Message {
	out := make([]tokenizer.Message, len(ms))
	for i, m := range ms {
		out[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

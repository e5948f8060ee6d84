// Package serve is an OpenAI-compatible HTTP server over the in-process
// policy (gpu/policy): POST /v1/chat/completions and GET /v1/models, so
// that the train pipeline's HTTP policy, or any OpenAI client, can sample
// from a swerl checkpoint.
//
// Supported request fields: messages, n, max_tokens (or
// max_completion_tokens), temperature, top_p, top_k, seed, stop (a string
// or a list; matched on the decoded text, the stop string excluded from
// the content as OpenAI does), logprobs, and vLLM's return_token_ids
// (prompt_token_ids on the response, token_ids on each choice). Log-
// probabilities are those of the model's raw distribution (temperature 1,
// untruncated), the quantity a GRPO learner needs.
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
// is a 500 with a JSON error, never a 200 with an empty body.
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

	"swerl/gpu/policy"
	"swerl/gpu/tokenizer"
	"swerl/transforms/rollout"
)

// VersionHeader carries the weight version of a response.
const VersionHeader = "X-Swerl-Policy-Version"

// Fingerprint returns the system_fingerprint of a weight version.
func Fingerprint(version int64) string { return "swerl-v" + strconv.FormatInt(version, 10) }

// Server serves one policy. Set its fields before calling Handler or
// HTTPServer.
type Server struct {
	pol *policy.Policy
	// Name is the model id of /v1/models (requests may name any model).
	Name string
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
}

// New returns a server for pol named name, with the default limits.
func New(pol *policy.Policy, name string) *Server {
	return &Server{pol: pol, Name: name, MaxN: 16, MaxBody: 4 << 20, MaxConcurrent: 2, MaxQueue: 16,
		ReadTimeout: 30 * time.Second, WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute}
}

func (s *Server) init() {
	s.once.Do(func() {
		s.MaxConcurrent = max(s.MaxConcurrent, 1)
		s.MaxQueue = max(s.MaxQueue, 0)
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
	mux.HandleFunc("/v1/chat/completions", s.auth(s.chat))
	mux.HandleFunc("/v1/models", s.auth(s.models))
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(VersionHeader, strconv.FormatInt(s.pol.Version(), 10))
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
	want := []byte("Bearer " + s.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="swerl"`)
			writeError(w, &apiError{status: http.StatusUnauthorized, msg: "missing or wrong API key: send Authorization: Bearer <key>"})
			return
		}
		h(w, r)
	}
}

// ChatRequest is the accepted subset of an OpenAI chat-completions request.
type ChatRequest struct {
	Model               string              `json:"model"`
	Messages            []tokenizer.Message `json:"messages"`
	N                   *int                `json:"n"`
	MaxTokens           *int                `json:"max_tokens"`
	MaxCompletionTokens *int                `json:"max_completion_tokens"`
	Temperature         *float64            `json:"temperature"`
	TopP                *float64            `json:"top_p"`
	TopK                *int                `json:"top_k"`
	Seed                *int64              `json:"seed"`
	Stop                json.RawMessage     `json:"stop"`
	Logprobs            bool                `json:"logprobs"`
	ReturnTokenIDs      bool                `json:"return_token_ids"`
	Stream              bool                `json:"stream"`
}

// TokenLogprob is one entry of choices[].logprobs.content.
type TokenLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []any   `json:"top_logprobs"`
}

// Choice is one completion of a ChatResponse.
type Choice struct {
	Index   int `json:"index"`
	Message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
	Logprobs     *struct {
		Content []TokenLogprob `json:"content"`
	} `json:"logprobs"`
	TokenIDs []int32 `json:"token_ids,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatResponse is an OpenAI chat.completion object.
type ChatResponse struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	SystemFingerprint string   `json:"system_fingerprint"`
	Choices           []Choice `json:"choices"`
	Usage             Usage    `json:"usage"`
	PromptTokenIDs    []int32  `json:"prompt_token_ids,omitempty"`
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

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "use GET"})
		return
	}
	v := s.pol.Version()
	w.Header().Set(VersionHeader, strconv.FormatInt(v, 10))
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.Name, "object": "model", "created": 0, "owned_by": "swerl", "swerl_version": v,
	}}})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "use POST"})
		return
	}
	// Admission before the body is read: beyond MaxConcurrent+MaxQueue a
	// request costs nothing but this answer.
	select {
	case s.admit <- struct{}{}:
		defer func() { <-s.admit }()
	default:
		// The body is drained, not kept (up to MaxBody, within the read
		// timeout): a server that answers while the client is still
		// sending makes the client see a broken pipe, not this answer.
		io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.MaxBody))
		w.Header().Set("Retry-After", "1")
		writeError(w, &apiError{status: http.StatusTooManyRequests,
			msg: fmt.Sprintf("busy: %d requests running and %d queued; retry later", s.MaxConcurrent, s.MaxQueue)})
		return
	}
	var req ChatRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.MaxBody))
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body over %d bytes", s.MaxBody)})
			return
		}
		writeError(w, badRequest("", "request body is not a chat-completions JSON object: %v", err))
		return
	}
	ctx := r.Context()
	if s.WriteTimeout > 0 {
		// Past the write timeout the response cannot be sent: stop working.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.WriteTimeout)
		defer cancel()
	}
	select {
	case s.compute <- struct{}{}:
		defer func() { <-s.compute }()
	case <-ctx.Done():
		writeError(w, &apiError{status: http.StatusServiceUnavailable, msg: "timed out waiting in the queue"})
		return
	}
	resp, err := s.Complete(ctx, req)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{status: http.StatusInternalServerError, msg: err.Error()}
		}
		writeError(w, ae)
		return
	}
	// Encode before writing anything, so that a response that cannot be
	// encoded (NaN log-probabilities from a diverged model) is a 500 that
	// says so, not a 200 with an empty body.
	body, err := json.Marshal(resp)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError,
			msg: fmt.Sprintf("the completion of weight version %d cannot be encoded as JSON: %v", s.pol.Version(), err)})
		return
	}
	w.Header().Set(VersionHeader, strings.TrimPrefix(resp.SystemFingerprint, "swerl-v"))
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
}

// Complete answers one request (the handler without HTTP).
func (s *Server) Complete(ctx context.Context, req ChatRequest) (ChatResponse, error) {
	var out ChatResponse
	if req.Stream {
		return out, badRequest("stream", "streaming is not supported")
	}
	if len(req.Messages) == 0 {
		return out, badRequest("messages", "messages is empty")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return out, badRequest("messages", "messages[%d].role %q: want system, user or assistant", i, m.Role)
		}
	}
	rr := rollout.Request{InstanceID: "chat", N: 1}
	if req.N != nil {
		rr.N = *req.N
	}
	if rr.N < 1 || rr.N > s.MaxN {
		return out, badRequest("n", "n %d outside 1..%d", rr.N, s.MaxN)
	}
	if req.MaxCompletionTokens != nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	if req.MaxTokens != nil {
		if *req.MaxTokens < 1 {
			return out, badRequest("max_tokens", "max_tokens %d, want ≥ 1", *req.MaxTokens)
		}
		rr.MaxTokens = *req.MaxTokens
	}
	if req.Temperature != nil {
		if *req.Temperature < 0 || *req.Temperature > 2 {
			return out, badRequest("temperature", "temperature %v outside [0, 2]", *req.Temperature)
		}
		// OpenAI's 0 is greedy; the policy's 0 means its default.
		rr.Temperature = max(*req.Temperature, 1e-9)
	}
	if req.TopP != nil {
		if *req.TopP <= 0 || *req.TopP > 1 {
			return out, badRequest("top_p", "top_p %v outside (0, 1]", *req.TopP)
		}
		rr.TopP = *req.TopP
	}
	var extra policy.Params
	if req.TopK != nil {
		if *req.TopK < -1 {
			return out, badRequest("top_k", "top_k %d, want ≥ -1", *req.TopK)
		}
		extra.TopK = max(*req.TopK, 0)
	}
	if req.Seed != nil {
		rr.Seed = *req.Seed
	} else {
		rr.Seed = rand.Int64()
	}
	stops, err := parseStop(req.Stop)
	if err != nil {
		return out, err
	}
	tok := s.pol.Tokenizer()
	resp, err := s.pol.CompleteMessages(ctx, req.Messages, rr, extra)
	if errors.Is(err, policy.ErrPromptTooLong) {
		return out, badRequest("messages", "%v", err)
	}
	if err != nil {
		return out, err
	}
	out = ChatResponse{
		ID: fmt.Sprintf("chatcmpl-swerl-%d-%d", time.Now().UnixNano(), s.seq.Add(1)), Object: "chat.completion",
		Created: time.Now().Unix(), Model: s.Name, SystemFingerprint: Fingerprint(resp.PolicyVersion),
	}
	if req.Model != "" {
		out.Model = req.Model
	}
	for i, c := range resp.Completions {
		if i == 0 {
			out.Usage.PromptTokens = len(c.PromptTokens)
			if req.ReturnTokenIDs {
				out.PromptTokenIDs = c.PromptTokens
			}
		}
		ch := choiceOf(tok, i, c, stops, req.Logprobs, req.ReturnTokenIDs)
		out.Usage.CompletionTokens += len(c.Tokens)
		out.Choices = append(out.Choices, ch)
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	return out, nil
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

// choiceOf builds one choice, cutting the completion at the first stop
// string: the content ends before it, and only tokens that end before it
// are reported.
func choiceOf(tok *tokenizer.Tokenizer, i int, c rollout.Completion, stops []string, logprobs, ids bool) Choice {
	ch := Choice{Index: i, FinishReason: c.FinishReason}
	ch.Message.Role = "assistant"
	// Per-token texts (special tokens such as the eos token are empty).
	texts := make([]string, len(c.Tokens))
	var full strings.Builder
	for k, t := range c.Tokens {
		b, err := tok.DecodeBytes(nil, []int32{t}, false)
		if err != nil {
			b = []byte("\uFFFD")
		}
		texts[k] = string(b)
		full.WriteString(texts[k])
	}
	content := full.String()
	keep := len(c.Tokens)
	if cut := firstStop(content, stops); cut >= 0 {
		content = content[:cut]
		ch.FinishReason = "stop"
		n := 0
		keep = 0
		for k := range texts {
			if n+len(texts[k]) > cut {
				break
			}
			n += len(texts[k])
			keep = k + 1
		}
	}
	ch.Message.Content = strings.ToValidUTF8(content, "\uFFFD")
	if ids {
		ch.TokenIDs = c.Tokens[:keep]
	}
	if logprobs {
		ch.Logprobs = &struct {
			Content []TokenLogprob `json:"content"`
		}{Content: []TokenLogprob{}}
		for k := 0; k < keep && k < len(c.LogProbs); k++ {
			b := []byte(texts[k])
			if texts[k] == "" && tok.IsSpecial(c.Tokens[k]) {
				sb, _ := tok.DecodeBytes(nil, c.Tokens[k:k+1], true)
				b = sb
			}
			bs := make([]int, len(b))
			for j, x := range b {
				bs[j] = int(x)
			}
			ch.Logprobs.Content = append(ch.Logprobs.Content, TokenLogprob{
				Token: strings.ToValidUTF8(string(b), "\uFFFD"), Logprob: float64(c.LogProbs[k]), Bytes: bs, TopLogprobs: []any{},
			})
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

package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"swerl/gpu"
	"swerl/gpu/policy"
	"swerl/gpu/tokenizer"
	"swerl/internal/engineapi"
	"swerl/transforms/rollout"
)

// textAPI is a (legacy) completions request, answered by the server.
type textAPI struct{ engineapi.CompletionRequest }

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	s.serveAPI(w, r, &textAPI{}, "a completions")
}

func (req *textAPI) modelName() string { return req.Model }

func (req *textAPI) answer(ctx context.Context, s *Server, t target) (any, string, func(http.ResponseWriter), error) {
	if req.Stream && (req.N == nil || *req.N == 1) && req.Logprobs == nil && !req.ReturnTokenIDs && !req.Echo &&
		req.PromptLogprobs == nil && !isBatch(req.Prompt) {
		return nil, "", func(w http.ResponseWriter) { s.streamTextLive(ctx, w, t, req.CompletionRequest) }, nil
	}
	resp, raw, stops, err := s.completeText(ctx, t, req.CompletionRequest, nil)
	if err != nil || !req.Stream {
		return resp, resp.SystemFingerprint, nil, err
	}
	if raw == nil {
		// Echo, several prompts, top or prompt log-probabilities: each
		// choice goes out whole in one chunk.
		return resp, resp.SystemFingerprint, func(w http.ResponseWriter) { streamWhole(w, resp, req.CompletionRequest) }, nil
	}
	return resp, resp.SystemFingerprint, func(w http.ResponseWriter) { streamCompletion(w, t.tok, resp, raw, stops, req.CompletionRequest) }, nil
}

// isBatch reports whether a completions prompt is a list of several
// prompts (strings or lists of token ids).
func isBatch(raw json.RawMessage) bool {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || len(list) < 2 {
		return false
	}
	var ids []int32
	return json.Unmarshal(raw, &ids) != nil
}

// textCompletion is one completion of a completions request: the
// generated tokens, the prompt's scores when it was scored, and the top
// log-probabilities of the generated tokens when asked.
type textCompletion struct {
	gen    rollout.Completion
	scores promptScores
	top    [][]gpu.TokenLogProb
}

// completeText answers a completions request. raw, the completions the
// answer was cut from, is nil when the answer must be streamed whole (see
// answer).
func (s *Server) completeText(ctx context.Context, t target, req engineapi.CompletionRequest, onToken func(policy.Token)) (out engineapi.CompletionResponse, raw []rollout.Completion, stops []string, err error) {
	if req.StreamOptions != nil && !req.Stream {
		return out, nil, nil, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	prompts, perr := parsePrompts(req.Prompt, t.tok, t.pol.Loaded().Model.Config.VocabSize)
	if perr != nil {
		return out, nil, nil, perr
	}
	if e := checkLogprobs("logprobs", req.Logprobs); e != nil {
		return out, nil, nil, e
	}
	if e := checkLogprobs("prompt_logprobs", req.PromptLogprobs); e != nil {
		return out, nil, nil, e
	}
	p := req.Sampling
	mt := p.MaxTokens
	if p.MaxCompletionTokens != nil {
		mt = p.MaxCompletionTokens
	}
	scoreOnly := mt != nil && *mt == 0
	if scoreOnly {
		if !req.Echo {
			return out, nil, nil, badRequest("max_tokens", "max_tokens 0, want ≥ 1 (0 only with echo: the prompt alone, scored)")
		}
		p.MaxTokens, p.MaxCompletionTokens = nil, nil
	}
	rr, extra, stops, err := s.request(p)
	if err != nil {
		return out, nil, nil, err
	}
	if len(prompts)*rr.N > s.MaxN {
		return out, nil, nil, badRequest("n", "%d prompts × n %d = %d completions, at most %d a request", len(prompts), rr.N, len(prompts)*rr.N, s.MaxN)
	}
	maxLen := t.pol.MaxSeq()
	need := 1
	if scoreOnly {
		need = 0
	}
	for i, pr := range prompts {
		if len(pr.ids)+need > maxLen {
			e := promptTooLong("prompt", len(pr.ids), need, maxLen)
			if len(prompts) > 1 {
				e.msg = fmt.Sprintf("prompt[%d]: %s", i, e.msg)
			}
			return out, nil, nil, e
		}
	}
	// Scoring forces the prompt through the sampler: asked for by echo
	// with logprobs and by prompt_logprobs.
	score := req.Echo && req.Logprobs != nil || req.PromptLogprobs != nil
	genTop := 0
	if req.Logprobs != nil {
		genTop = *req.Logprobs
	}
	scoreTop := genTop
	if req.PromptLogprobs != nil {
		scoreTop = max(scoreTop, *req.PromptLogprobs, 1) // ranks come with the top list
	}
	// The prompts run at once: the policy batches their completions.
	results := make([][]textCompletion, len(prompts))
	errs := make([]error, len(prompts))
	versions := make([]int64, len(prompts))
	var wg sync.WaitGroup
	for pi, pr := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[pi], versions[pi], errs[pi] = s.textCompletions(ctx, t, pr.ids, rr, extra, onToken, score, scoreOnly, genTop, scoreTop)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return out, nil, nil, err
		}
	}
	version := versions[0]
	out = engineapi.CompletionResponse{Head: s.newHead(t, "cmpl", "text_completion", version)}
	simple := len(prompts) == 1 && !req.Echo && !score && genTop == 0
	for pi, pr := range prompts {
		out.Usage.PromptTokens += len(pr.ids)
		for i, tc := range results[pi] {
			out.Usage.CompletionTokens += len(tc.gen.Tokens)
			out.Choices = append(out.Choices, textChoice(t.tok, pi*rr.N+i, pr, tc, stops, req))
			if simple {
				raw = append(raw, tc.gen)
			}
		}
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens + out.Usage.CompletionTokens
	return out, raw, stops, nil
}

// textCompletions samples rr.N completions of prompt (none when scoreOnly
// is set), each token with its genTop most likely ones, and, when score
// is set, scores the prompt once beside them, with its scoreTop most
// likely tokens a position. The completions are those of the same request
// without scoring. It returns the version that sampled.
func (s *Server) textCompletions(ctx context.Context, t target, prompt []int32, rr rollout.Request, extra policy.Params, onToken func(policy.Token),
	score, scoreOnly bool, genTop, scoreTop int) ([]textCompletion, int64, error) {
	out := make([]textCompletion, rr.N)
	for i := range out {
		out[i].gen = rollout.Completion{Tokens: []int32{}, LogProbs: []float32{}, PromptTokens: prompt, FinishReason: "length"}
	}
	version := t.pol.Version()
	var sc promptScores
	var scoreErr error
	var wg sync.WaitGroup
	if score && len(prompt) > 1 {
		// The prompt's first token is the prompt, the others are forced:
		// one score-only completion whatever n.
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := rr
			one.N, one.Temperature = 1, 1e-9
			ex := policy.Params{Forced: prompt[1:], ScoreOnly: true, TopLogProbs: scoreTop}
			_, raw, err := t.pol.CompleteTokensRaw(ctx, one, prompt[:1], ex)
			nf := len(prompt) - 1
			switch {
			case err != nil:
				scoreErr = err
			case len(raw) != 1 || len(raw[0].Tokens) != nf || len(raw[0].LogProbs) != nf:
				scoreErr = fmt.Errorf("the policy scored %d prompts, want 1 of %d tokens", len(raw), nf)
			default:
				sc.logprobs = raw[0].LogProbs
				if len(raw[0].Top) == nf && len(raw[0].Ranks) == nf {
					sc.top, sc.ranks = raw[0].Top, raw[0].Ranks
				}
			}
		}()
	}
	var genErr error
	if !scoreOnly {
		extra.OnToken, extra.TopLogProbs = onToken, genTop
		resp, raw, err := t.pol.CompleteTokensRaw(ctx, rr, prompt, extra)
		if err == nil && (len(resp.Completions) != rr.N || len(raw) != rr.N) {
			err = fmt.Errorf("the policy returned %d completions, want %d", len(resp.Completions), rr.N)
		}
		genErr = err
		if err == nil {
			version = resp.PolicyVersion
			for i, c := range resp.Completions {
				out[i].gen = c
				if len(raw[i].Top) == len(c.Tokens) {
					out[i].top = raw[i].Top
				}
			}
		}
	}
	wg.Wait()
	for _, err := range []error{genErr, scoreErr} {
		if errors.Is(err, policy.ErrPromptTooLong) {
			return nil, version, badRequest("prompt", "%v", err)
		}
		if err != nil {
			return nil, version, err
		}
	}
	for i := range out {
		out[i].scores = sc
	}
	return out, version, nil
}

// textChoice builds choice index of prompt pr from its completion tc,
// cut at the first stop string: the echoed prompt first when asked, the
// logprobs and prompt_logprobs asked for.
func textChoice(tok *tokenizer.Tokenizer, index int, pr textPrompt, tc textCompletion, stops []string, req engineapi.CompletionRequest) engineapi.CompletionChoice {
	k := cutAtStop(tok, tc.gen, stops)
	ch := engineapi.CompletionChoice{Index: index, Text: k.content, FinishReason: k.finish}
	if req.Echo {
		ch.Text = pr.text + k.content
	}
	if req.ReturnTokenIDs {
		ch.TokenIDs, ch.PromptTokenIDs = tc.gen.Tokens[:k.keep], pr.ids
	}
	if req.Logprobs != nil {
		n := *req.Logprobs
		lp := &engineapi.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TextOffset: []int{}}
		off := 0
		if req.Echo {
			echoLogprobs(tok, lp, pr.ids, tc.scores, n)
			off = len(pr.text) // the completion's offsets count from the echoed prompt
		}
		for j := 0; j < k.keep && j < len(tc.gen.LogProbs); j++ {
			e := tokenLogprob(tok, tc.gen, k.texts[j], j)
			v := e.Logprob
			lp.Tokens = append(lp.Tokens, e.Token)
			lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
			lp.TextOffset = append(lp.TextOffset, off)
			off += len(k.texts[j])
			if n > 0 && j < len(tc.top) {
				lp.TopLogprobs = append(lp.TopLogprobs, topMap(tok, tc.top[j], n, tc.gen.Tokens[j], tc.gen.LogProbs[j]))
			}
		}
		if n > 0 && lp.TopLogprobs == nil {
			lp.TopLogprobs = []any{}
		}
		ch.Logprobs = lp
	}
	if req.PromptLogprobs != nil {
		ch.PromptLogprobs = promptLogprobs(tok, pr.ids, tc.scores, *req.PromptLogprobs)
	}
	return ch
}

// textLogprobs is the completions API's logprobs of tokens [from, to).
func textLogprobs(tok *tokenizer.Tokenizer, c rollout.Completion, k cut, from, to int) *engineapi.CompletionLogprobs {
	lp := &engineapi.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TextOffset: []int{}}
	off := 0
	for j := 0; j < from; j++ {
		off += len(k.texts[j])
	}
	for j := from; j < to && j < len(c.LogProbs); j++ {
		e := tokenLogprob(tok, c, k.texts[j], j)
		v := e.Logprob
		lp.Tokens = append(lp.Tokens, e.Token)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TextOffset = append(lp.TextOffset, off)
		off += len(k.texts[j])
	}
	return lp
}

// streamWhole sends a completions answer as one text_completion event a
// choice, holding its whole text, logprobs and finish reason; then the
// usage when asked; then [DONE].
func streamWhole(w http.ResponseWriter, resp engineapi.CompletionResponse, req engineapi.CompletionRequest) {
	stream(w, resp.Head, usageIf(req.StreamOptions, resp.Usage), func(emit func(textChunkChoice) bool) bool {
		for _, c := range resp.Choices {
			finish := c.FinishReason
			if !emit(textChunkChoice{Index: c.Index, Text: c.Text, Logprobs: c.Logprobs, FinishReason: &finish, TokenIDs: c.TokenIDs,
				PromptLogprobs: c.PromptLogprobs}) {
				return false
			}
		}
		return true
	})
}

// piece is a run of tokens [from, to) sent in one chunk, and its text.
type piece struct {
	from, to int
	text     string
}

// pieces splits a cut completion into chunks whose texts are whole UTF-8
// characters and add up to its content exactly: tokens are grouped until
// their bytes are valid UTF-8 and a prefix of what is left of the
// content; what the stop cut inside a token (or a replacement character)
// is the last piece.
func pieces(k cut) []piece {
	var out []piece
	sent, from := 0, 0
	var pending strings.Builder
	for i := 0; i < k.keep; i++ {
		pending.WriteString(k.texts[i])
		p := pending.String()
		if p == "" || !utf8.ValidString(p) || !strings.HasPrefix(k.content[sent:], p) {
			continue
		}
		out = append(out, piece{from, i + 1, p})
		sent += len(p)
		from = i + 1
		pending.Reset()
	}
	if sent < len(k.content) || from < k.keep {
		out = append(out, piece{from, k.keep, k.content[sent:]})
	}
	return out
}

// sse writes server-sent events and flushes each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter, fingerprint string) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set(engineapi.VersionHeader, strings.TrimPrefix(fingerprint, "swerl-v"))
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// event writes one "data: JSON" event. A value that cannot be encoded
// (NaN log-probabilities) ends the stream with an error event, as OpenAI's
// streams report errors after the status is sent.
func (e *sse) event(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": "a chunk cannot be encoded as JSON: " + err.Error(), "type": "server_error"}})
		fmt.Fprintf(e.w, "data: %s\n\n", b)
		e.rc.Flush()
		return false
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	e.rc.Flush()
	return true
}

// error ends the stream with an error event.
func (e *sse) error(err error) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": err.Error(), "type": "server_error"}})
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	e.rc.Flush()
}

func (e *sse) done() {
	fmt.Fprint(e.w, "data: [DONE]\n\n")
	e.rc.Flush()
}

// chunk is one streamed event of an answer: the answer's head repeated,
// one choice's part (C: the chat or completions chunk choice), or no
// choice and the usage.
type chunk[C any] struct {
	engineapi.Head
	Choices []C              `json:"choices"`
	Usage   *engineapi.Usage `json:"usage,omitempty"`
}

// chunks writes the events of one streamed answer, each starting with h.
type chunks[C any] struct {
	e *sse
	h engineapi.Head
}

// startChunks sends the event stream's response header.
func startChunks[C any](w http.ResponseWriter, h engineapi.Head) chunks[C] {
	return chunks[C]{e: newSSE(w, h.SystemFingerprint), h: h}
}

// emit sends a chunk of choice part c; false when the stream ended in an
// error event instead.
func (k chunks[C]) emit(c C) bool {
	return k.e.event(chunk[C]{Head: k.h, Choices: []C{c}})
}

// end sends a chunk with the usage and no choices when usage is not nil,
// then [DONE].
func (k chunks[C]) end(usage *engineapi.Usage) {
	if usage != nil && !k.e.event(chunk[C]{Head: k.h, Choices: []C{}, Usage: usage}) {
		return
	}
	k.e.done()
}

// stream writes an answer as server-sent events headed h: the choice
// parts parts emits (emit returns false once the stream ended in an error
// event), then the usage when it is not nil, then [DONE].
func stream[C any](w http.ResponseWriter, h engineapi.Head, usage *engineapi.Usage, parts func(emit func(C) bool) bool) {
	k := startChunks[C](w, h)
	if parts(k.emit) {
		k.end(usage)
	}
}

// usageIf is the usage when the stream options ask for it, else nil.
func usageIf(o *engineapi.StreamOptions, u engineapi.Usage) *engineapi.Usage {
	if o == nil || !o.IncludeUsage {
		return nil
	}
	return &u
}

type chunkChoice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     any            `json:"logprobs"`
	FinishReason *string        `json:"finish_reason"`
	TokenIDs     []int32        `json:"token_ids,omitempty"`
}

// streamChat sends a chat answer as chat.completion.chunk events: for each
// choice its role, its content in pieces (with their logprobs and token
// ids when asked), its finish reason; then the usage when asked; then
// [DONE].
func streamChat(w http.ResponseWriter, tok *tokenizer.Tokenizer, resp engineapi.ChatResponse, raw []rollout.Completion, stops []string, req engineapi.ChatRequest) {
	h := resp.Head
	h.Object = "chat.completion.chunk"
	stream(w, h, usageIf(req.StreamOptions, resp.Usage), func(emit func(chunkChoice) bool) bool {
		for i, c := range raw {
			k := cutAtStop(tok, c, stops)
			if !emit(chunkChoice{Index: i, Delta: map[string]any{"role": "assistant", "content": ""}}) {
				return false
			}
			for _, p := range pieces(k) {
				ch := chunkChoice{Index: i, Delta: map[string]any{"content": p.text}}
				if req.Logprobs {
					lp := []engineapi.TokenLogprob{}
					for j := p.from; j < p.to && j < len(c.LogProbs); j++ {
						if l := resp.Choices[i].Logprobs; l != nil && j < len(l.Content) {
							lp = append(lp, l.Content[j]) // with its top_logprobs
						} else {
							lp = append(lp, tokenLogprob(tok, c, k.texts[j], j))
						}
					}
					ch.Logprobs = map[string]any{"content": lp}
				}
				if req.ReturnTokenIDs {
					ch.TokenIDs = c.Tokens[p.from:p.to]
				}
				if !emit(ch) {
					return false
				}
			}
			finish := k.finish
			if !emit(chunkChoice{Index: i, Delta: map[string]any{}, FinishReason: &finish}) {
				return false
			}
		}
		return true
	})
}

type textChunkChoice struct {
	Index          int                                  `json:"index"`
	Text           string                               `json:"text"`
	Logprobs       *engineapi.CompletionLogprobs        `json:"logprobs"`
	FinishReason   *string                              `json:"finish_reason"`
	TokenIDs       []int32                              `json:"token_ids,omitempty"`
	PromptLogprobs []map[string]engineapi.PromptLogprob `json:"prompt_logprobs,omitempty"`
}

// streamCompletion sends a completions answer as text_completion events of
// text pieces, the last of each choice carrying its finish reason; then
// the usage when asked; then [DONE].
func streamCompletion(w http.ResponseWriter, tok *tokenizer.Tokenizer, resp engineapi.CompletionResponse, raw []rollout.Completion, stops []string, req engineapi.CompletionRequest) {
	stream(w, resp.Head, usageIf(req.StreamOptions, resp.Usage), func(emit func(textChunkChoice) bool) bool {
		for i, c := range raw {
			k := cutAtStop(tok, c, stops)
			ps := pieces(k)
			if len(ps) == 0 {
				ps = []piece{{}}
			}
			for n, p := range ps {
				ch := textChunkChoice{Index: i, Text: p.text}
				if req.Logprobs != nil {
					ch.Logprobs = textLogprobs(tok, c, k, p.from, p.to)
				}
				if req.ReturnTokenIDs {
					ch.TokenIDs = c.Tokens[p.from:p.to]
				}
				if n == len(ps)-1 {
					finish := k.finish
					ch.FinishReason = &finish
				}
				if !emit(ch) {
					return false
				}
			}
		}
		return true
	})
}

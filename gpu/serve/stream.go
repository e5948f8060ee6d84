package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

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
	if req.Stream && (req.N == nil || *req.N == 1) && req.Logprobs == nil && !req.ReturnTokenIDs {
		return nil, "", func(w http.ResponseWriter) { s.streamTextLive(ctx, w, t, req.CompletionRequest) }, nil
	}
	resp, raw, stops, err := s.completeText(ctx, t, req.CompletionRequest, nil)
	if err != nil || !req.Stream {
		return resp, resp.SystemFingerprint, nil, err
	}
	return resp, resp.SystemFingerprint, func(w http.ResponseWriter) { streamCompletion(w, t.tok, resp, raw, stops, req.CompletionRequest) }, nil
}

// completeText answers a completions request.
func (s *Server) completeText(ctx context.Context, t target, req engineapi.CompletionRequest, onToken func(policy.Token)) (out engineapi.CompletionResponse, raw []rollout.Completion, stops []string, err error) {
	if req.StreamOptions != nil && !req.Stream {
		return out, nil, nil, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	if req.Echo {
		return out, nil, nil, badRequest("echo", "echo is not supported")
	}
	var prompt string
	if err := json.Unmarshal(req.Prompt, &prompt); err != nil {
		var one []string
		if json.Unmarshal(req.Prompt, &one) != nil || len(one) != 1 {
			return out, nil, nil, badRequest("prompt", "prompt must be a string (or a list of one)")
		}
		prompt = one[0]
	}
	if prompt == "" {
		return out, nil, nil, badRequest("prompt", "prompt is empty")
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > 5) {
		return out, nil, nil, badRequest("logprobs", "logprobs %d outside 0..5", *req.Logprobs)
	}
	resp, stops, usage, err := s.sample(req.Sampling, "prompt", func(rr rollout.Request, extra policy.Params) (rollout.Response, error) {
		extra.OnToken = onToken
		return t.pol.CompleteTokens(ctx, rr, t.tok.Encode(prompt), extra)
	})
	if err != nil {
		return out, nil, nil, err
	}
	out = engineapi.CompletionResponse{Head: s.newHead(t, "cmpl", "text_completion", resp.PolicyVersion), Usage: usage}
	if req.ReturnTokenIDs {
		out.PromptTokenIDs = resp.Completions[0].PromptTokens
	}
	for i, c := range resp.Completions {
		k := cutAtStop(t.tok, c, stops)
		ch := engineapi.CompletionChoice{Index: i, Text: k.content, FinishReason: k.finish}
		if req.ReturnTokenIDs {
			ch.TokenIDs = c.Tokens[:k.keep]
		}
		if req.Logprobs != nil {
			ch.Logprobs = textLogprobs(t.tok, c, k, 0, k.keep)
		}
		out.Choices = append(out.Choices, ch)
	}
	return out, resp.Completions, stops, nil
}

// textLogprobs is the completions API's logprobs of tokens [from, to).
func textLogprobs(tok *tokenizer.Tokenizer, c rollout.Completion, k cut, from, to int) *engineapi.CompletionLogprobs {
	lp := &engineapi.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TextOffset: []int{}}
	off := 0
	for j := 0; j < from; j++ {
		off += len(k.texts[j])
	}
	for j := from; j < to && j < len(c.LogProbs); j++ {
		e := tokenLogprob(tok, c, k.texts[j], j)
		lp.Tokens = append(lp.Tokens, e.Token)
		lp.TokenLogprobs = append(lp.TokenLogprobs, e.Logprob)
		lp.TextOffset = append(lp.TextOffset, off)
		off += len(k.texts[j])
	}
	return lp
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
						lp = append(lp, tokenLogprob(tok, c, k.texts[j], j))
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
	Index        int                           `json:"index"`
	Text         string                        `json:"text"`
	Logprobs     *engineapi.CompletionLogprobs `json:"logprobs"`
	FinishReason *string                       `json:"finish_reason"`
	TokenIDs     []int32                       `json:"token_ids,omitempty"`
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

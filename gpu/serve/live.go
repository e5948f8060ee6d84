package serve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"swerl/gpu/policy"
	"swerl/gpu/tokenizer"
	"swerl/internal/engineapi"
	"swerl/transforms/rollout"
)

// A streamed request for one choice without logprobs or token ids is sent
// token by token: the policy reports each sampled token (policy.Params
// OnToken), and the text that no stop string can still cut goes out as a
// chunk at once. Other streamed requests are answered whole, then sent in
// pieces (streamChat, streamCompletion).

// live collects the tokens of one completion as the policy samples them.
type live struct {
	mu      sync.Mutex
	toks    []int32
	version int64
	wake    chan struct{} // one pending wake-up at most
}

func newLive() *live { return &live{wake: make(chan struct{}, 1)} }

// liveTokenHook, set by tests only, runs in onToken after each token (and
// its wake-up) with the number collected so far: a test holds the policy there to see what
// the client has received by then.
var liveTokenHook atomic.Pointer[func(n int)]

// onToken is the policy's OnToken: it must not block.
func (l *live) onToken(t policy.Token) {
	l.mu.Lock()
	l.toks = append(l.toks, t.ID)
	l.version = t.Version
	n := len(l.toks)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	// After the wake-up: a hook that holds the policy must not also hold
	// back the news of the tokens collected so far.
	if h := liveTokenHook.Load(); h != nil {
		(*h)(n)
	}
}

func (l *live) snapshot() ([]int32, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.toks, l.version
}

// liveAnswer is a finished completion of a live stream.
type liveAnswer struct {
	raw   rollout.Completion
	stops []string
	usage engineapi.Usage
	err   error
}

// safeText is the part of the tokens' text that the final content starts
// with whatever is sampled next: up to the first stop string, else all
// but the last (longest stop − 1) bytes, which a stop string could still
// begin in; never an incomplete UTF-8 character at the end.
func safeText(tok *tokenizer.Tokenizer, toks []int32, stops []string) string {
	var b []byte
	for _, t := range toks {
		d, err := tok.DecodeBytes(nil, []int32{t}, false)
		if err != nil {
			d = []byte("\uFFFD")
		}
		b = append(b, d...)
	}
	text := string(b)
	if at := firstStop(text, stops); at >= 0 {
		text = text[:at]
	} else {
		hold := 0
		for _, s := range stops {
			hold = max(hold, len(s)-1)
		}
		text = text[:max(0, len(text)-hold)]
	}
	for len(text) > 0 {
		if r, size := utf8.DecodeLastRuneInString(text); r != utf8.RuneError || size > 1 {
			break
		}
		text = text[:len(text)-1]
	}
	return strings.ToValidUTF8(text, "\uFFFD")
}

// streamLive runs generate (which passes its onToken to the policy) and
// streams its one choice as it is sampled, each event headed h (its
// fingerprint set from the version sampling it): open's chunk when open
// is set, then a chunk of text from each step that adds safe text, then
// the rest of the content with the finish reason, the usage when asked,
// and [DONE]. An
// error before the first token is an ordinary error answer; one after it
// ends the stream with an error event.
func streamLive[C any](w http.ResponseWriter, t target, stops []string, h engineapi.Head, o *engineapi.StreamOptions, open *C, part func(text string, finish *string) C,
	generate func(onToken func(policy.Token)) liveAnswer) {
	l := newLive()
	done := make(chan liveAnswer, 1)
	go func() { done <- generate(l.onToken) }()
	var ans *liveAnswer
	select {
	case <-l.wake:
	case a := <-done:
		ans = &a
	}
	if ans != nil && ans.err != nil {
		writeError(w, asAPIError(ans.err))
		return
	}
	// The policy reports every completion's tokens before it returns, so
	// the version is known here.
	_, version := l.snapshot()
	h.SystemFingerprint = engineapi.Fingerprint(t.version(version))
	k := startChunks[C](w, h)
	emit := k.emit
	ok := open == nil || emit(*open)
	sent := ""
	for ans == nil {
		select {
		case <-l.wake:
		case a := <-done:
			ans = &a
			continue
		}
		if !ok {
			continue // the client is gone or a chunk failed: wait for the end
		}
		toks, _ := l.snapshot()
		if text := safeText(t.tok, toks, stops); len(text) > len(sent) && strings.HasPrefix(text, sent) {
			ok = emit(part(text[len(sent):], nil))
			sent = text
		}
	}
	if !ok {
		return
	}
	if ans.err != nil {
		k.e.error(ans.err)
		return
	}
	c := cutAtStop(t.tok, ans.raw, ans.stops)
	if !strings.HasPrefix(c.content, sent) {
		k.e.error(fmt.Errorf("the streamed text %q is not a prefix of the completion %q", sent, c.content))
		return
	}
	if rest := c.content[len(sent):]; rest != "" && !emit(part(rest, nil)) {
		return
	}
	finish := c.finish
	if emit(part("", &finish)) {
		k.end(usageIf(o, ans.usage))
	}
}

// streamChatLive streams a chat answer of one choice token by token.
func (s *Server) streamChatLive(ctx context.Context, w http.ResponseWriter, t target, req engineapi.ChatRequest) {
	stops, _ := parseStop(req.Stop) // a bad stop is the error generate returns
	h := s.newHead(t, "chatcmpl", "chat.completion.chunk", -1)
	open := chunkChoice{Delta: map[string]any{"role": "assistant", "content": ""}}
	part := func(text string, finish *string) chunkChoice {
		if finish != nil {
			return chunkChoice{Delta: map[string]any{}, FinishReason: finish}
		}
		return chunkChoice{Delta: map[string]any{"content": text}}
	}
	streamLive(w, t, stops, h, req.StreamOptions, &open, part, func(onToken func(policy.Token)) liveAnswer {
		resp, raw, stops, err := s.complete(ctx, t, req, onToken)
		return answerOf(resp.Usage, raw, stops, err)
	})
}

// streamTextLive streams a completions answer of one choice token by
// token.
func (s *Server) streamTextLive(ctx context.Context, w http.ResponseWriter, t target, req engineapi.CompletionRequest) {
	stops, _ := parseStop(req.Stop)
	h := s.newHead(t, "cmpl", "text_completion", -1)
	part := func(text string, finish *string) textChunkChoice {
		return textChunkChoice{Text: text, FinishReason: finish}
	}
	streamLive(w, t, stops, h, req.StreamOptions, nil, part, func(onToken func(policy.Token)) liveAnswer {
		resp, raw, stops, err := s.completeText(ctx, t, req, onToken)
		return answerOf(resp.Usage, raw, stops, err)
	})
}

// answerOf is the liveAnswer of a one-choice answer.
func answerOf(u engineapi.Usage, raw []rollout.Completion, stops []string, err error) liveAnswer {
	a := liveAnswer{stops: stops, usage: u, err: err}
	if err == nil {
		a.raw = raw[0]
	}
	return a
}

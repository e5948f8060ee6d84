package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"swerl/gpu/modeldir"
	"swerl/internal/engineapi"
)

// liveEvent is one streamed event and when it arrived.
type liveEvent struct {
	data string
	at   time.Duration
}

// streamTimed posts req and returns its events with their arrival times;
// onEvent, when not nil, sees each event as it arrives.
func streamTimed(t *testing.T, url string, req map[string]any, onEvent func(liveEvent)) []liveEvent {
	t.Helper()
	b, _ := json.Marshal(req)
	t0 := time.Now()
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []liveEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, liveEvent{d, time.Since(t0)})
			if onEvent != nil {
				onEvent(out[len(out)-1])
			}
		}
	}
	return out
}

// One streamed choice goes out token by token: the first text reaches the
// client while the policy is still sampling, and the chunks add up to the
// answer the same request gets whole (a stop string cut included); the
// finish reason and usage are the whole answer's.
func TestStreamTokenByToken(t *testing.T) {
	srv, _, _ := startAdapters(t) // a 256-token context
	for _, api := range []string{"chat", "completions"} {
		req := map[string]any{"max_tokens": 200, "seed": 5}
		path := "/v1/chat/completions"
		if api == "chat" {
			req["messages"] = []map[string]string{{"role": "user", "content": "hello"}}
		} else {
			path, req["prompt"] = "/v1/completions", "func main() {"
		}
		whole := func() (string, string, engineapi.Usage) {
			r := postWhole(t, srv.URL+path, req)
			return r.Choices[0].content(), r.Choices[0].FinishReason, r.Usage
		}
		streamed := func(onPiece func()) (text, finish string, usage engineapi.Usage, chunks int) {
			sreq := map[string]any{"stream": true, "stream_options": map[string]bool{"include_usage": true}}
			for k, v := range req {
				sreq[k] = v
			}
			events := streamTimed(t, srv.URL+path, sreq, func(ev liveEvent) {
				if c, err := parseChunk(ev.data); err == nil && onPiece != nil && c.piece != "" {
					onPiece()
				}
			})
			if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
				t.Fatalf("%s: events %v", api, events)
			}
			for _, ev := range events[:len(events)-1] {
				c, err := parseChunk(ev.data)
				if err != nil {
					t.Fatalf("%s: event %q: %v", api, ev.data, err)
				}
				if c.usage != nil {
					usage = *c.usage
				}
				if !utf8.ValidString(c.piece) {
					t.Errorf("%s: chunk %q is not valid UTF-8", api, c.piece)
				}
				if c.piece != "" {
					chunks++
				}
				text += c.piece
				if c.finish != "" {
					finish = c.finish
				}
			}
			return text, finish, usage, chunks
		}
		// The random model often samples its eos early: take the first
		// seed whose answer is long.
		var want, wantFinish string
		var wantUsage engineapi.Usage
		for seed := range 100 {
			req["seed"] = seed
			if want, wantFinish, wantUsage = whole(); wantUsage.CompletionTokens >= 100 {
				break
			}
		}
		if wantUsage.CompletionTokens < 100 {
			t.Fatalf("%s: no seed gave an answer of 100 tokens", api)
		}
		// Token by token, shown without timing: the policy is held after
		// its 20th token until the client has its first piece of text. An
		// answer sent only once complete would keep the client waiting
		// there; after 30 s the policy goes on and the test fails.
		seen := make(chan struct{})
		var once sync.Once
		var starved atomic.Bool
		hook := func(n int) {
			if n == 20 {
				select {
				case <-seen:
				case <-time.After(30 * time.Second):
					starved.Store(true)
				}
			}
		}
		liveTokenHook.Store(&hook)
		got, finish, usage, chunks := streamed(func() { once.Do(func() { close(seen) }) })
		liveTokenHook.Store(nil)
		t.Logf("%s: %d tokens in %d chunks", api, usage.CompletionTokens, chunks)
		if got != want || finish != wantFinish || usage != wantUsage {
			t.Fatalf("%s: streamed %q (%s, %+v), whole %q (%s, %+v)", api, got, finish, usage, want, wantFinish, wantUsage)
		}
		if starved.Load() || chunks < 2 {
			t.Errorf("%s: %d chunks; the first had not arrived when the policy had sampled 20 tokens: not token by token", api, chunks)
		}
		// A stop string from the middle of the answer: the stream stops
		// where the whole answer is cut, and sends nothing past it.
		runes := []rune(want)
		req["stop"] = []string{string(runes[len(runes)/2 : len(runes)/2+2])}
		want, wantFinish, wantUsage = whole()
		got, finish, usage, _ = streamed(nil)
		if got != want || finish != "stop" || wantFinish != "stop" || usage != wantUsage {
			t.Fatalf("%s with stop %q: streamed %q (%s), whole %q (%s)", api, req["stop"], got, finish, want, wantFinish)
		}
	}
}

func TestSafeText(t *testing.T) {
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok := mp.Tokenizer
	ids := tok.Encode("héllo wörld")
	for _, tc := range []struct {
		stops []string
		want  string
	}{
		{nil, "héllo wörld"},
		{[]string{"wo"}, "héllo wörl"}, // the last byte could begin "wo"
		{[]string{"lo"}, "hél"},        // a stop found is a cut
		{[]string{"xyz"}, "héllo wör"},
	} {
		if got := safeText(tok, ids, tc.stops); got != tc.want {
			t.Errorf("stops %q: %q, want %q", tc.stops, got, tc.want)
		}
	}
}

// A client that goes away in the middle of a live stream frees its slot:
// the generation is cancelled and the next request is answered.
func TestLiveStreamClientGone(t *testing.T) {
	srv, _, _ := startAdapters(t) // 2 compute slots: a leaked one shows by the 3rd stream
	client := &http.Client{Timeout: 20 * time.Second}
	b, _ := json.Marshal(map[string]any{"prompt": "func main() {", "max_tokens": 200, "seed": 1, "stream": true})
	for range 3 {
		resp, err := client.Post(srv.URL+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("first line %q, %v", line, err)
		}
		resp.Body.Close()
	}
	code, body := postJSON(t, srv.URL+"/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
	if code != 200 {
		t.Fatalf("after clients left: %d %s", code, body)
	}
}

// liveChunk is what one streamed event carries of a choice: its text
// (completions) or content (chat), its finish reason, and the usage.
type liveChunk struct {
	piece, finish string
	usage         *engineapi.Usage
}

func parseChunk(data string) (liveChunk, error) {
	var c struct {
		Choices []struct {
			Text         string
			Delta        struct{ Content string }
			FinishReason *string `json:"finish_reason"`
		}
		Usage *engineapi.Usage
	}
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return liveChunk{}, err
	}
	out := liveChunk{usage: c.Usage}
	for _, ch := range c.Choices {
		out.piece += ch.Text + ch.Delta.Content
		if ch.FinishReason != nil {
			out.finish = *ch.FinishReason
		}
	}
	return out, nil
}

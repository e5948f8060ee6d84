package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"swerl/gpu/modeldir"
)

// liveEvent is one streamed event and when it arrived.
type liveEvent struct {
	data string
	at   time.Duration
}

// streamTimed posts req and returns its events with their arrival times.
func streamTimed(t *testing.T, url string, req map[string]any) []liveEvent {
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
		}
	}
	return out
}

// One streamed choice goes out token by token: the text arrives in many
// chunks, the first long before the answer ends, and adds up to the answer
// the same request gets whole (a stop string cut included); the finish
// reason and usage are the whole answer's.
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
		whole := func() (string, string, Usage) {
			r := postWhole(t, srv.URL+path, req)
			return r.Choices[0].content(), r.Choices[0].FinishReason, r.Usage
		}
		streamed := func() (text, finish string, usage Usage, chunks int, first, total time.Duration) {
			sreq := map[string]any{"stream": true, "stream_options": map[string]bool{"include_usage": true}}
			for k, v := range req {
				sreq[k] = v
			}
			events := streamTimed(t, srv.URL+path, sreq)
			if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
				t.Fatalf("%s: events %v", api, events)
			}
			total = events[len(events)-1].at
			for _, ev := range events[:len(events)-1] {
				var c struct {
					Choices []struct {
						Text         string
						Delta        struct{ Content string }
						FinishReason *string `json:"finish_reason"`
					}
					Usage *Usage
				}
				if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
					t.Fatalf("%s: event %q: %v", api, ev.data, err)
				}
				if c.Usage != nil {
					usage = *c.Usage
				}
				for _, ch := range c.Choices {
					piece := ch.Text + ch.Delta.Content
					if !utf8.ValidString(piece) {
						t.Errorf("%s: chunk %q is not valid UTF-8", api, piece)
					}
					if piece != "" {
						if chunks == 0 {
							first = ev.at
						}
						chunks++
					}
					text += piece
					if ch.FinishReason != nil {
						finish = *ch.FinishReason
					}
				}
			}
			return text, finish, usage, chunks, first, total
		}
		// The random model often samples its eos early: take the first
		// seed whose answer is long.
		var want, wantFinish string
		var wantUsage Usage
		for seed := range 100 {
			req["seed"] = seed
			if want, wantFinish, wantUsage = whole(); wantUsage.CompletionTokens >= 100 {
				break
			}
		}
		if wantUsage.CompletionTokens < 100 {
			t.Fatalf("%s: no seed gave an answer of 100 tokens", api)
		}
		// Token by token: the first chunk arrives in the first half of the
		// stream (a stream written after the whole answer has its first
		// and last chunks together at the end). A loaded machine can
		// starve the client for a while, so three tries before failing.
		for try := 1; ; try++ {
			got, finish, usage, chunks, first, total := streamed()
			t.Logf("%s: %d tokens in %d chunks; first chunk after %v, the end after %v", api, usage.CompletionTokens, chunks, first, total)
			if got != want || finish != wantFinish || usage != wantUsage {
				t.Fatalf("%s: streamed %q (%s, %+v), whole %q (%s, %+v)", api, got, finish, usage, want, wantFinish, wantUsage)
			}
			if chunks >= 10 && first <= total/2 {
				break
			}
			if try == 3 {
				t.Errorf("%s: %d chunks, the first after %v of %v: not token by token", api, chunks, first, total)
				break
			}
		}
		// A stop string from the middle of the answer: the stream stops
		// where the whole answer is cut, and sends nothing past it.
		runes := []rune(want)
		req["stop"] = []string{string(runes[len(runes)/2 : len(runes)/2+2])}
		want, wantFinish, wantUsage = whole()
		got, finish, usage, _, _, _ := streamed()
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

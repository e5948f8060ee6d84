package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/internal/engineapi"
	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, path string, poll time.Duration) *httptest.Server {
	t.Helper()
	pol, err := policy.Open(path, policy.Options{MaxSeq: 256, MaxTokens: 16, Poll: poll, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(pol, "tiny").Handler())
	t.Cleanup(func() { srv.Close(); pol.Close() })
	return srv
}

func post(t *testing.T, url string, body any) (*http.Response, engineapi.ChatResponse, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, raw := postRaw(t, url+"/v1/chat/completions", string(b))
	var cr engineapi.ChatResponse
	var m map[string]any
	json.Unmarshal(raw, &cr)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("response %q is not JSON: %v", raw, err)
	}
	return resp, cr, m
}

func TestChatCompletions(t *testing.T) {
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 9); err != nil {
		t.Fatal(err)
	}
	srv := start(t, dir, 0)
	req := map[string]any{
		"model":    "whatever",
		"messages": []map[string]string{{"role": "system", "content": "be terse"}, {"role": "user", "content": "hello"}},
		"n":        2, "max_tokens": 12, "temperature": 1.0, "seed": 42, "logprobs": true, "return_token_ids": true,
	}
	resp, cr, _ := post(t, srv.URL, req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp.Header.Get(engineapi.VersionHeader) != "-1" || cr.SystemFingerprint != "swerl-v-1" || cr.Object != "chat.completion" {
		t.Errorf("version header %q fingerprint %q object %q", resp.Header.Get(engineapi.VersionHeader), cr.SystemFingerprint, cr.Object)
	}
	if len(cr.Choices) != 2 || len(cr.PromptTokenIDs) == 0 || cr.Usage.PromptTokens != len(cr.PromptTokenIDs) {
		t.Fatalf("response %+v", cr)
	}
	mp, _ := modeldir.Load(dir)
	total := 0
	for _, ch := range cr.Choices {
		if len(ch.TokenIDs) == 0 || len(ch.TokenIDs) > 12 || ch.Logprobs == nil || len(ch.Logprobs.Content) != len(ch.TokenIDs) {
			t.Fatalf("choice %d: %d tokens, logprobs %+v", ch.Index, len(ch.TokenIDs), ch.Logprobs)
		}
		total += len(ch.TokenIDs)
		want := policy.DecodeLenient(mp.Tokenizer, ch.TokenIDs)
		if ch.Message.Content != want || ch.Message.Role != "assistant" {
			t.Errorf("content %q, tokens decode to %q", ch.Message.Content, want)
		}
		for _, lp := range ch.Logprobs.Content {
			if lp.Logprob > 0 {
				t.Errorf("log-prob %v > 0", lp.Logprob)
			}
		}
	}
	if cr.Usage.CompletionTokens != total || cr.Usage.TotalTokens != total+cr.Usage.PromptTokens {
		t.Errorf("usage %+v, %d completion tokens", cr.Usage, total)
	}
	// The same seed reproduces; a stop string cuts the content before it.
	_, again, _ := post(t, srv.URL, req)
	if again.Choices[0].Message.Content != cr.Choices[0].Message.Content {
		t.Errorf("same seed: %q vs %q", again.Choices[0].Message.Content, cr.Choices[0].Message.Content)
	}
	c0 := cr.Choices[0].Message.Content
	if len(c0) >= 4 && cr.Choices[0].FinishReason == "length" {
		stop := c0[2:4]
		req["stop"] = stop
		req["n"] = 1
		_, cut, _ := post(t, srv.URL, req)
		want := c0[:strings.Index(c0, stop)]
		if got := cut.Choices[0]; got.Message.Content != want || got.FinishReason != "stop" {
			t.Errorf("stop %q: content %q finish %q, want %q and stop", stop, got.Message.Content, got.FinishReason, want)
		}
	}
	// /v1/models
	mr, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	json.NewDecoder(mr.Body).Decode(&models)
	mr.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != "tiny" {
		t.Errorf("models %+v", models)
	}
}

func TestChatErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 9); err != nil {
		t.Fatal(err)
	}
	srv := start(t, dir, 0)
	for name, body := range map[string]any{
		"no messages": map[string]any{"messages": []any{}},
		"bad role":    map[string]any{"messages": []map[string]string{{"role": "robot", "content": "x"}}},
		"n zero":      map[string]any{"n": 0, "messages": []map[string]string{{"role": "user", "content": "x"}}},
		"bad stop":    map[string]any{"stop": 3, "messages": []map[string]string{{"role": "user", "content": "x"}}},
		"too long":    map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("zq ", 200)}}},
		"not json":    "{",
	} {
		resp, _, m := post(t, srv.URL, body)
		e, _ := m["error"].(map[string]any)
		if resp.StatusCode != 400 || e == nil || e["message"] == "" {
			t.Errorf("%s: status %d body %v", name, resp.StatusCode, m)
		}
	}
}

// Against an output root the server reports the version it sampled with,
// and moves to a newly published one.
func TestServeFollowsVersions(t *testing.T) {
	root := t.TempDir()
	st, err := checkpoint.Open(checkpoint.Config{Dir: root, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	pub := func(v int64) {
		if _, err := st.Publish(schemas.WeightVersion{Version: v}, func(d string) error {
			_, err := modeldir.Init(d, "tiny", uint64(v))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	pub(0)
	srv := start(t, root, 10*time.Millisecond)
	req := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2}
	resp, cr, _ := post(t, srv.URL, req)
	if resp.Header.Get(engineapi.VersionHeader) != "0" || cr.SystemFingerprint != "swerl-v0" {
		t.Fatalf("v0: header %q fingerprint %q", resp.Header.Get(engineapi.VersionHeader), cr.SystemFingerprint)
	}
	pub(1)
	testenv.Eventually(t, time.Minute, "the server serving v1", func() bool {
		resp, cr, _ = post(t, srv.URL, req)
		return cr.SystemFingerprint == "swerl-v1"
	})
	if resp.Header.Get(engineapi.VersionHeader) != strconv.Itoa(1) {
		t.Errorf("header %q with fingerprint v1", resp.Header.Get(engineapi.VersionHeader))
	}
}

// FuzzChatRequest: any request body gets a JSON answer, 200 or a 4xx
// error object, never a panic or a 5xx.
func FuzzChatRequest(f *testing.F) {
	pol, _ := tinyPolicy(f, 1, policy.Options{MaxSeq: 128, MaxTokens: 4, Log: quiet()})
	h := New(pol, "tiny").Handler()
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"seed":1}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stop":["a","b"],"logprobs":true,"n":2}`,
		`{"messages":[{"role":"assistant","content":""}],"max_tokens":1,"temperature":0,"top_p":0.5,"top_k":3}`,
		`{"messages":null}`, `[]`, `{"n":"x"}`, `{"messages":[{"role":"user","content":"x"}],"stream":true}`,
		`{"messages":[{"role":"user","content":"x"}],"stream":true,"max_tokens":3,"n":2,"logprobs":true,"stream_options":{"include_usage":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var probe struct {
			MaxTokens *int `json:"max_tokens"`
			N         *int `json:"n"`
		}
		if json.Unmarshal(body, &probe) == nil && (probe.MaxTokens == nil || *probe.MaxTokens > 8 || (probe.N != nil && *probe.N > 2)) {
			return // keep each case fast: bounded work only
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body)))
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
		if rec.Header().Get("Content-Type") == "text/event-stream" {
			// A stream: JSON events, then [DONE].
			events := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
			for i, ev := range events {
				d, ok := strings.CutPrefix(ev, "data: ")
				if !ok || (i == len(events)-1) != (d == "[DONE]") || (d != "[DONE]" && !json.Valid([]byte(d))) {
					t.Fatalf("event %d of %q: %q", i, body, ev)
				}
			}
			return
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON answer %q", rec.Body.String())
		}
	})
}

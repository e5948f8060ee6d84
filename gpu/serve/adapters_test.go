package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/internal/engineapi"
	"swerl/sinks/weightsync"
	"swerl/transforms/rollout"
)

// scaleAdapter is a test adapter loader: the folder holds scale.txt, a
// number every weight of the copied base is multiplied by (a stand-in for
// W += alpha/r·B·A that changes every logit). A folder without it does not
// exist as an adapter.
func scaleAdapter(base *gpu.Model, dir string) (*gpu.Model, error) {
	b, err := os.ReadFile(filepath.Join(dir, "scale.txt"))
	if err != nil {
		return nil, err
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 32)
	if err != nil {
		return nil, fmt.Errorf("scale.txt: %v", err)
	}
	m, err := CopyModel(base)
	if err != nil {
		return nil, err
	}
	for _, t := range m.Tensors() {
		if strings.Contains(t.Name, "mlp") {
			for i := range t.Data {
				t.Data[i] *= float32(f)
			}
		}
	}
	return m, nil
}

func adapterDir(t *testing.T, scale string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "scale.txt"), []byte(scale), 0o644)
	os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(`{"peft_type":"LORA"}`), 0o644)
	return dir
}

// startAdapters serves a fresh tiny model with the test loader.
func startAdapters(t *testing.T) (*httptest.Server, *Server, string) {
	t.Helper()
	opts := policy.Options{MaxSeq: 256, MaxTokens: 8, Log: quiet()}
	pol, dir := tinyPolicy(t, 9, opts)
	sv := New(pol, "tiny")
	sv.LoadAdapter, sv.PolicyOptions = scaleAdapter, opts
	srv := httptest.NewServer(sv.Handler())
	t.Cleanup(srv.Close)
	return srv, sv, dir
}

// postJSON posts body as JSON to url and returns the status and the
// answer's body.
func postJSON(t *testing.T, url string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, raw := postRaw(t, url, string(b))
	return resp.StatusCode, string(raw)
}

// postRaw posts the JSON text body to url and returns the response, its
// body already read and closed, and that body.
func postRaw(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw
}

// answer is what the tests read from a chat or completions answer.
type answer struct {
	Choices []answerChoice
	Usage   engineapi.Usage
}

type answerChoice struct {
	Text         string
	Message      struct{ Content string }
	FinishReason string  `json:"finish_reason"`
	TokenIDs     []int32 `json:"token_ids"`
}

// content is a chat choice's message or a completions choice's text.
func (c answerChoice) content() string { return c.Message.Content + c.Text }

// postWhole posts body to url and decodes the answer; a status other than
// 200 or a body that is no answer fails the test.
func postWhole(t *testing.T, url string, body any) answer {
	t.Helper()
	code, raw := postJSON(t, url, body)
	var a answer
	if err := json.Unmarshal([]byte(raw), &a); code != 200 || err != nil || len(a.Choices) == 0 {
		t.Fatalf("%s: %d %s (%v)", url, code, raw, err)
	}
	return a
}

func logprobsOf(cr engineapi.ChatResponse) []float64 {
	var out []float64
	for _, lp := range cr.Choices[0].Logprobs.Content {
		out = append(out, lp.Logprob)
	}
	return out
}

// vLLM's adapter API: load, the merged model answering requests that name
// it with its version, /v1/models, the errors vLLM gives, unload.
func TestVLLMAdapterAPI(t *testing.T) {
	srv, _, _ := startAdapters(t)
	a := adapterDir(t, "1.5")
	req := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 6, "seed": 3, "logprobs": true}
	_, base, _ := post(t, srv.URL, req)

	code, body := postJSON(t, srv.URL+"/v1/load_lora_adapter", map[string]string{"lora_name": "swerl-v000123", "lora_path": a})
	if code != 200 || body != "Success: LoRA adapter 'swerl-v000123' added successfully." {
		t.Fatalf("load: %d %s", code, body)
	}
	req["model"] = "swerl-v000123"
	resp, ad, _ := post(t, srv.URL, req)
	if resp.StatusCode != 200 || ad.Model != "swerl-v000123" || ad.SystemFingerprint != "swerl-v123" || resp.Header.Get(engineapi.VersionHeader) != "123" {
		t.Fatalf("adapter answer: %d model %q fingerprint %q header %q", resp.StatusCode, ad.Model, ad.SystemFingerprint, resp.Header.Get(engineapi.VersionHeader))
	}
	if slices.Equal(logprobsOf(ad), logprobsOf(base)) {
		t.Fatal("the adapter's answer has the base model's log-probabilities: not merged")
	}
	// SGLang's BASE:adapter names the same merged model.
	req["model"] = "tiny:swerl-v000123"
	_, ad2, _ := post(t, srv.URL, req)
	if ad2.Model != "tiny:swerl-v000123" || ad2.SystemFingerprint != "swerl-v123" || !slices.Equal(logprobsOf(ad2), logprobsOf(ad)) {
		t.Fatalf("BASE:adapter: model %q fingerprint %q", ad2.Model, ad2.SystemFingerprint)
	}
	// The rollout policy reads the version from the model field.
	cs, v, model, err := decodeChatForTest(t, srv.URL, "swerl-v000123")
	if err != nil || v != 123 || model != "swerl-v000123" || len(cs) != 1 {
		t.Fatalf("rollout decode: %v %d %q", err, v, model)
	}

	var models struct {
		Data []struct {
			ID, Root string
			Parent   *string
			Version  int64 `json:"swerl_version"`
		} `json:"data"`
	}
	mr, _ := http.Get(srv.URL + "/v1/models")
	json.NewDecoder(mr.Body).Decode(&models)
	mr.Body.Close()
	if len(models.Data) != 2 || models.Data[0].ID != "tiny" || models.Data[0].Parent != nil || models.Data[1].ID != "swerl-v000123" ||
		models.Data[1].Root != a || *models.Data[1].Parent != "tiny" || models.Data[1].Version != 123 {
		t.Fatalf("models %+v", models)
	}
	for _, tc := range []struct {
		path string
		body map[string]string
		code int
		msg  string
	}{
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "swerl-v000123", "lora_path": a}, 400, "has already been loaded"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x"}, 400, "Both 'lora_name' and 'lora_path'"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x", "lora_path": filepath.Join(a, "nope")}, 404, "No adapter found"},
		{"/v1/load_lora_adapter", map[string]string{"lora_name": "x", "lora_path": t.TempDir()}, 404, "No adapter found"},
		{"/v1/unload_lora_adapter", map[string]string{"lora_name": "swerl-v000999"}, 404, "cannot be found"},
	} {
		code, body := postJSON(t, srv.URL+tc.path, tc.body)
		msg := weightsync.Message([]byte(body))
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s %v: %d %s; want %d %q", tc.path, tc.body, code, body, tc.code, tc.msg)
		}
	}
	code, body = postJSON(t, srv.URL+"/v1/unload_lora_adapter", map[string]string{"lora_name": "swerl-v000123"})
	if code != 200 || !strings.Contains(body, "removed successfully") {
		t.Fatalf("unload: %d %s", code, body)
	}
	// Unloaded, the name is refused with 404, as vLLM refuses it: answered
	// by the base under the adapter's name, the answer would claim the
	// adapter's version (the rollout policy reads it from the model field)
	// for the base's tokens. A name that claims no version is the base.
	req["model"] = "swerl-v000123"
	resp, _, raw := post(t, srv.URL, req)
	if msg := fmt.Sprint(raw["error"]); resp.StatusCode != http.StatusNotFound || !strings.Contains(msg, "does not exist") {
		t.Fatalf("after unload: %d %s; want 404 naming the model", resp.StatusCode, msg)
	}
	req["model"] = "tiny:swerl-v000123"
	if resp, _, _ := post(t, srv.URL, req); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("BASE:adapter after unload: %d; want 404", resp.StatusCode)
	}
	req["model"] = "some-client-name"
	_, after, _ := post(t, srv.URL, req)
	if after.SystemFingerprint != "swerl-v-1" || !slices.Equal(logprobsOf(after), logprobsOf(base)) {
		t.Fatalf("a name that claims no version: fingerprint %q", after.SystemFingerprint)
	}
}

// decodeChatForTest asks for one completion naming model and decodes the
// answer as the HTTP rollout policy does.
func decodeChatForTest(t *testing.T, url, model string) ([]rollout.Completion, int64, string, error) {
	t.Helper()
	served := weightsync.NewTable()
	served.Set(url, engineapi.ServedVersion{Version: 0, Adapter: model})
	p, err := rollout.Open(url+"/v1?model=tiny", rollout.WithTable(served))
	if err != nil {
		return nil, 0, "", err
	}
	defer p.Close()
	r, err := p.Complete(context.Background(), rollout.Request{InstanceID: "t", Prompt: "hi", N: 1, MaxTokens: 4, Seed: 1})
	return r.Completions, r.PolicyVersion, model, err
}

// SGLang's API: the LoRAUpdateOutput answers, and update_weights_from_disk
// replacing the base (its weight_version becoming the version reported).
func TestSGLangAPI(t *testing.T) {
	srv, _, _ := startAdapters(t)
	a := adapterDir(t, "0.5")
	var out struct {
		Success        bool              `json:"success"`
		ErrorMessage   *string           `json:"error_message"`
		LoadedAdapters map[string]string `json:"loaded_adapters"`
	}
	code, body := postJSON(t, srv.URL+"/load_lora_adapter", map[string]any{"lora_name": "swerl-v000007", "lora_path": a, "pinned": false})
	json.Unmarshal([]byte(body), &out)
	if code != 200 || !out.Success || out.ErrorMessage != nil || out.LoadedAdapters["swerl-v000007"] != a {
		t.Fatalf("load: %d %s", code, body)
	}
	code, body = postJSON(t, srv.URL+"/load_lora_adapter", map[string]any{"lora_name": "bad", "lora_path": adapterDir(t, "x")})
	out.ErrorMessage = nil
	json.Unmarshal([]byte(body), &out)
	if code != 400 || out.Success || out.ErrorMessage == nil || !strings.Contains(*out.ErrorMessage, "scale.txt") {
		t.Fatalf("bad adapter: %d %s", code, body)
	}
	code, body = postJSON(t, srv.URL+"/unload_lora_adapter", map[string]any{"lora_name": "swerl-v000007"})
	if code != 200 || !strings.Contains(body, `"success":true`) || !strings.Contains(body, `"loaded_adapters":{}`) {
		t.Fatalf("unload: %d %s", code, body)
	}

	req := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 6, "seed": 3, "logprobs": true}
	_, before, _ := post(t, srv.URL, req)
	other := t.TempDir()
	if _, err := modeldir.Init(other, "tiny", 77); err != nil {
		t.Fatal(err)
	}
	code, body = postJSON(t, srv.URL+"/update_weights_from_disk", map[string]any{"model_path": other, "weight_version": "swerl-v000042", "flush_cache": true})
	if code != 200 || !strings.Contains(body, `"success":true`) || !strings.Contains(body, `"num_paused_requests":0`) {
		t.Fatalf("update: %d %s", code, body)
	}
	resp, after, _ := post(t, srv.URL, req)
	if after.SystemFingerprint != "swerl-v42" || resp.Header.Get(engineapi.VersionHeader) != "42" || slices.Equal(logprobsOf(after), logprobsOf(before)) {
		t.Fatalf("after update: fingerprint %q", after.SystemFingerprint)
	}
	code, body = postJSON(t, srv.URL+"/update_weights_from_disk", map[string]any{"model_path": t.TempDir()})
	if code != 400 || !strings.Contains(body, `"success":false`) || !strings.Contains(weightsync.Message([]byte(body)), "Failed to load") {
		t.Fatalf("bad update: %d %s", code, body)
	}
}

// The syncer and swerl serve agree on both engines' APIs: versions pushed
// by sinks/weightsync are served, merged, under their adapter names.
func TestSyncerAgainstServe(t *testing.T) {
	for _, kind := range []engineapi.Kind{engineapi.VLLM, engineapi.SGLang} {
		srv, sv, _ := startAdapters(t)
		var held []int64
		s, err := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: srv.URL + "/v1", Kind: kind}}, Keep: 2, Backoff: 1,
			OnHeld: func(_ weightsync.Engine, v engineapi.ServedVersion) { held = append(held, v.Version) }})
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(1); v <= 3; v++ {
			if err := s.Push(context.Background(), v, adapterDir(t, strconv.FormatFloat(1+float64(v)/10, 'f', 2, 64))); err != nil {
				t.Fatalf("%s: push %d: %v", kind, v, err)
			}
		}
		sv.mu.Lock()
		var names []string
		for _, a := range sv.adapters {
			names = append(names, a.name)
		}
		sv.mu.Unlock()
		if !slices.Equal(names, []string{"swerl-v000002", "swerl-v000003"}) || !slices.Equal(held, []int64{1, 2, 3}) {
			t.Fatalf("%s: adapters %v, held %v", kind, names, held)
		}
	}
}

// sseEvents reads a server-sent-events body into its data payloads.
func sseEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line", line)
		}
		out = append(out, d)
	}
	return out
}

// Streaming chat and completions: the chunks add up to the answer the
// same request gets without streaming, the usage comes last when asked,
// and [DONE] ends the stream.
func TestStreaming(t *testing.T) {
	srv, _, _ := startAdapters(t)
	for _, api := range []string{"chat", "completions"} {
		req := map[string]any{"max_tokens": 8, "seed": 5, "n": 2, "logprobs": true, "return_token_ids": true}
		path := "/v1/chat/completions"
		if api == "chat" {
			req["messages"] = []map[string]string{{"role": "user", "content": "hello"}}
		} else {
			path, req["prompt"], req["logprobs"] = "/v1/completions", "func main() {", 0
		}
		whole := postWhole(t, srv.URL+path, req)
		req["stream"] = true
		req["stream_options"] = map[string]bool{"include_usage": true}
		b, _ := json.Marshal(req)
		resp, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d content type %q", api, resp.StatusCode, ct)
		}
		events := sseEvents(t, resp.Body)
		resp.Body.Close()
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("%s: last event %q", api, events[len(events)-1])
		}
		text := make([]string, 2)
		ids := make([][]int32, 2)
		finished := 0
		var usage *engineapi.Usage
		for n, ev := range events[:len(events)-1] {
			var c struct {
				Object  string
				Choices []struct {
					Index        int
					Text         *string
					Delta        struct{ Role, Content string }
					FinishReason *string `json:"finish_reason"`
					TokenIDs     []int32 `json:"token_ids"`
				}
				Usage *engineapi.Usage
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatalf("%s: event %q: %v", api, ev, err)
			}
			want := map[string]string{"chat": "chat.completion.chunk", "completions": "text_completion"}[api]
			if c.Object != want {
				t.Fatalf("%s: object %q", api, c.Object)
			}
			if c.Usage != nil {
				if n != len(events)-2 || len(c.Choices) != 0 {
					t.Fatalf("%s: usage in chunk %d of %d with %d choices", api, n, len(events)-1, len(c.Choices))
				}
				usage = c.Usage
			}
			for _, ch := range c.Choices {
				if api == "chat" {
					text[ch.Index] += ch.Delta.Content
				} else {
					text[ch.Index] += *ch.Text
				}
				ids[ch.Index] = append(ids[ch.Index], ch.TokenIDs...)
				if ch.FinishReason != nil {
					finished++
				}
			}
		}
		for i, ch := range whole.Choices {
			got := ch.content()
			if text[i] != got || !slices.Equal(ids[i], ch.TokenIDs) {
				t.Errorf("%s choice %d: streamed %q %v, whole %q %v", api, i, text[i], ids[i], got, ch.TokenIDs)
			}
		}
		if finished != 2 || usage == nil || *usage != whole.Usage {
			t.Errorf("%s: %d finish reasons, usage %+v vs %+v", api, finished, usage, whole.Usage)
		}
	}
	// stream_options without stream is refused, as OpenAI does.
	code, body := postJSON(t, srv.URL+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "x"}},
		"stream_options": map[string]bool{"include_usage": true}})
	if code != 400 || !strings.Contains(body, "stream_options") {
		t.Errorf("stream_options alone: %d %s", code, body)
	}
}

// pieces add up to the content and split no UTF-8 character, whatever the
// token boundaries and stop cut.
func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		texts   []string
		keep    int
		content string
	}{
		{[]string{"a", "\xe2", "\x82", "\xac", "b"}, 5, "a€b"},
		{[]string{"ab", "cd", ""}, 3, "abc"},    // the stop cut inside "cd"
		{[]string{"ab", "\xe2"}, 2, "ab\uFFFD"}, // a character the completion never finished
		{nil, 0, ""},
	} {
		ps := pieces(cut{texts: tc.texts, keep: tc.keep, content: tc.content})
		var all strings.Builder
		next := 0
		for _, p := range ps {
			if p.from != next || p.to < p.from {
				t.Fatalf("%q: pieces %+v not contiguous", tc.texts, ps)
			}
			next = p.to
			if !strings.HasPrefix(tc.content[all.Len():], p.text) {
				t.Fatalf("%q: piece %q", tc.texts, p.text)
			}
			all.WriteString(p.text)
		}
		if all.String() != tc.content || next != tc.keep {
			t.Errorf("%q: pieces %+v add up to %q (tokens to %d)", tc.texts, ps, all.String(), next)
		}
	}
}

// FuzzWeightEndpoints: any body sent to the adapter and weight endpoints
// gets a JSON or text answer with a 2xx or 4xx status, never a panic.
func FuzzWeightEndpoints(f *testing.F) {
	opts := policy.Options{MaxSeq: 128, MaxTokens: 4, Log: quiet()}
	pol, _ := tinyPolicy(f, 1, opts)
	sv := New(pol, "tiny")
	sv.LoadAdapter, sv.PolicyOptions = scaleAdapter, opts
	h := sv.Handler()
	paths := []string{"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/load_lora_adapter", "/unload_lora_adapter", "/update_weights_from_disk", "/v1/completions"}
	for i, s := range []string{`{"lora_name":"a","lora_path":"/nonexistent"}`, `{"lora_name":""}`, `{"lora_name":"a","lora_path":"/"}`,
		`{"lora_name":1}`, `{"model_path":"/nonexistent","weight_version":"swerl-v1"}`, `{"prompt":"x","max_tokens":2,"stream":true}`, `[`} {
		f.Add(uint8(i), []byte(s))
	}
	fuzzEndpoints(f, h, paths)
}

// fuzzEndpoints posts each fuzzed body to one of paths on h: the answer
// must be 2xx or 4xx, never a panic or a 5xx. A completions body whose
// work is not bounded (more than 4 tokens or 2 choices) is skipped.
func fuzzEndpoints(f *testing.F, h http.Handler, paths []string) {
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		if path == engineapi.CompletionsPath {
			var probe struct {
				MaxTokens *int `json:"max_tokens"`
				N         *int `json:"n"`
			}
			if json.Unmarshal(body, &probe) == nil && (probe.MaxTokens == nil || *probe.MaxTokens > 4 || (probe.N != nil && *probe.N > 2)) {
				return // bounded work only
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		if rec.Code >= 500 {
			t.Fatalf("%s %q: status %d %s", path, body, rec.Code, rec.Body.String())
		}
	})
}

// With an API key, the weight endpoints and completions need it too: an
// engine that loads whatever folder a stranger names is not a choice.
func TestWeightEndpointsNeedTheKey(t *testing.T) {
	_, sv, _ := startAdapters(t)
	sv2 := New(sv.base(), "tiny")
	sv2.APIKey, sv2.LoadAdapter, sv2.PolicyOptions = "k", scaleAdapter, sv.PolicyOptions
	ts := httptest.NewServer(sv2.Handler())
	defer ts.Close()
	a := adapterDir(t, "2")
	for _, path := range []string{"/v1/load_lora_adapter", "/load_lora_adapter", "/v1/unload_lora_adapter", "/unload_lora_adapter", "/update_weights_from_disk", "/v1/completions"} {
		if code, body := postJSON(t, ts.URL+path, map[string]string{"lora_name": "swerl-v000001", "lora_path": a, "model_path": a}); code != 401 {
			t.Errorf("%s without the key: %d %s", path, code, body)
		}
	}
	s, _ := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: ts.URL, Kind: engineapi.VLLM}}, APIKey: "k", Backoff: 1})
	if err := s.Push(context.Background(), 1, a); err != nil {
		t.Fatalf("the syncer sends the key: %v", err)
	}
}

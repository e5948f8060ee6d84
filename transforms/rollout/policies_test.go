package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"swerl/internal/engineapi"
	"swerl/internal/jsonscan/jsonscantest"
	"swerl/sinks/weightsync"
)

func TestFilePolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(path, []byte(`{"instance_id":"a#1","completions":["x","y",{"text":"z","logprobs":[-0.5],"finish_reason":"length"}]}

{"instance_id":"a#2","completions":["only"],"policy_version":7}
`), 0o644)
	p, err := Open("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Complete(context.Background(), Request{InstanceID: "a#1", N: 3})
	if err != nil || len(r.Completions) != 3 || r.Completions[2].Text != "z" || r.Completions[2].FinishReason != "length" ||
		len(r.Completions[2].LogProbs) != 1 || r.Completions[0].FinishReason != "stop" || r.PolicyVersion != -1 {
		t.Fatalf("%+v %v", r, err)
	}
	if r, _ := p.Complete(context.Background(), Request{InstanceID: "a#2", N: 1}); r.PolicyVersion != 7 {
		t.Fatalf("version %d", r.PolicyVersion)
	}
	if _, err := p.Complete(context.Background(), Request{InstanceID: "nope", N: 1}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("missing instance: %v", err)
	}
	if _, err := p.Complete(context.Background(), Request{InstanceID: "a#2", N: 2}); err == nil || !strings.Contains(err.Error(), "has 1 completions") {
		t.Fatalf("short: %v", err)
	}
	for name, body := range map[string]string{"bad json": "{\n", "dup": `{"instance_id":"a","completions":[]}` + "\n" + `{"instance_id":"a","completions":[]}`,
		"bad completion": `{"instance_id":"a","completions":[3]}`, "no id": `{"completions":["x"]}`} {
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := Open("file:" + path); err == nil || !strings.Contains(err.Error(), "c.jsonl:") {
			t.Errorf("%s: error %v should name file and line", name, err)
		}
	}
}

// openAI is a loopback server speaking the OpenAI chat-completions wire format.
type openAI struct {
	mu       sync.Mutex
	requests []engineapi.ChatRequest
	auth     []string
	fail     func(n int) int // status to fail the n-th request with (0: serve)
	maxN     int             // choices per response at most (0: n)
	delay    time.Duration
	model    string // the model field of responses ("": the request's, as vLLM and SGLang answer)
	inFlight atomic.Int64
	peak     atomic.Int64
}

func (s *openAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cur := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		p := s.peak.Load()
		if cur <= p || s.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", 404)
		return
	}
	req, ok := readChatRequest(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	n := len(s.requests)
	s.mu.Unlock()
	if s.fail != nil {
		if code := s.fail(n); code != 0 {
			if code == -1 { // hang past the client's timeout
				select {
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
				}
				return
			}
			http.Error(w, `{"error":{"message":"busy"}}`, code)
			return
		}
	}
	time.Sleep(s.delay) // a slow server on purpose
	k := *req.N
	if s.maxN > 0 && k > s.maxN {
		k = s.maxN
	}
	type lp struct {
		Token   string  `json:"token"`
		LogProb float64 `json:"logprob"`
	}
	var choices []map[string]any
	for i := range k {
		choices = append(choices, map[string]any{"index": i, "finish_reason": "stop",
			"message":  map[string]string{"role": "assistant", "content": fmt.Sprintf("answer %d to %s", i, req.Messages[len(req.Messages)-1].Content)},
			"logprobs": map[string]any{"content": []lp{{"answer", -0.25}, {" ", -1.5}}}})
	}
	w.Header().Set(engineapi.VersionHeader, "12")
	model := req.Model
	if s.model != "" {
		model = s.model
	}
	json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": model,
		"system_fingerprint": "fp_other", "choices": choices})
}

func TestHTTPPolicy(t *testing.T) {
	srv := &openAI{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	t.Setenv("SWERL_API_KEY", "sekret")
	p, err := Open(ts.URL + "/v1?model=m1&backoff=1ms")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Version() != -1 {
		t.Fatal("version before any response must be unknown")
	}
	r, err := p.Complete(context.Background(), Request{InstanceID: "i", System: "sys", Prompt: "fix", N: 3, MaxTokens: 64, Temperature: 0.7})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Completions) != 3 || r.Completions[2].Text != "answer 2 to fix" || len(r.Completions[0].LogProbs) != 2 ||
		r.Completions[0].LogProbs[1] != -1.5 || r.PolicyVersion != 12 || p.Version() != 12 {
		t.Fatalf("%+v", r)
	}
	q := srv.requests[0]
	if q.Model != "m1" || *q.N != 3 || *q.MaxTokens != 64 || *q.Temperature != 0.7 || !q.Logprobs || len(q.Messages) != 2 ||
		q.Messages[0].Role != "system" || srv.auth[0] != "Bearer sekret" {
		t.Fatalf("request %+v auth %q", q, srv.auth[0])
	}
}

func TestHTTPPolicyRetriesAndFailures(t *testing.T) {
	srv := &openAI{fail: func(n int) int {
		switch n {
		case 1:
			return 503
		case 2:
			return 429
		case 3:
			return -1
		}
		return 0
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p, _ := Open(ts.URL + "/v1/chat/completions?backoff=1ms&timeout=200ms")
	r, err := p.Complete(context.Background(), Request{InstanceID: "i", Prompt: "x", N: 2})
	if err != nil || len(r.Completions) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	hp := p.(*HTTPPolicy)
	if hp.Attempts.Load() != 4 || hp.RetriesDone.Load() != 3 {
		t.Fatalf("attempts %d retries %d, want 4 and 3", hp.Attempts.Load(), hp.RetriesDone.Load())
	}
	// 400 is not retried; retries run out on persistent 500.
	srv.fail = func(int) int { return 400 }
	if _, err := p.Complete(context.Background(), Request{Prompt: "x", N: 1}); err == nil || !strings.Contains(err.Error(), "after 1 attempts") {
		t.Fatalf("400: %v", err)
	}
	srv.fail = func(int) int { return 500 }
	p2, _ := Open(ts.URL + "/v1?backoff=1ms&retries=2")
	if _, err := p2.Complete(context.Background(), Request{Prompt: "x", N: 1}); err == nil || !strings.Contains(err.Error(), "after 3 attempts: HTTP 500") {
		t.Fatalf("500: %v", err)
	}
	if _, err := Open(ts.URL + "?bogus=1"); err == nil {
		t.Fatal("unknown parameter must fail")
	}
}

func TestHTTPPolicyConcurrencyAndShortN(t *testing.T) {
	srv := &openAI{maxN: 1, delay: 20 * time.Millisecond}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p, _ := Open(ts.URL + "/v1?concurrency=2")
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			r, err := p.Complete(context.Background(), Request{InstanceID: fmt.Sprint(i), Prompt: "p", N: 2})
			if err != nil || len(r.Completions) != 2 {
				t.Errorf("%+v %v", r, err)
			}
		})
	}
	wg.Wait()
	if srv.peak.Load() > 2 {
		t.Fatalf("peak in flight %d, limit 2", srv.peak.Load())
	}
	if len(srv.requests) != 12 {
		t.Fatalf("a server ignoring n must be asked again: %d requests", len(srv.requests))
	}
}

// With an engine sync, requests name the synced adapter (vLLM: the name;
// SGLang: BASE:name) and the version is the response's model field, not
// the version header; a server that answers with another model is an error
// naming the instance, never a sample of version -1.
func TestHTTPPolicyNamesSyncedAdapter(t *testing.T) {
	srv := &openAI{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	served := weightsync.NewTable()
	vllm, _ := Open(ts.URL+"/v1?model=base", WithTable(served))
	sgl, _ := Open(ts.URL+"/v1?model=base&engine=sglang", WithTable(served))
	r, err := vllm.Complete(context.Background(), Request{InstanceID: "i", Prompt: "x", N: 1})
	if err != nil || r.PolicyVersion != 12 || srv.requests[0].Model != "base" {
		t.Fatalf("unsynced: %+v %v (model %q)", r, err, srv.requests[0].Model)
	}
	served.Set(ts.URL+"/v1/", engineapi.ServedVersion{Version: 123, Adapter: engineapi.AdapterName(123)})
	r, err = vllm.Complete(context.Background(), Request{InstanceID: "i", Prompt: "x", N: 2})
	if err != nil || r.PolicyVersion != 123 || vllm.Version() != 123 || srv.requests[1].Model != "swerl-v000123" {
		t.Fatalf("vllm: %+v %v (model %q)", r, err, srv.requests[1].Model)
	}
	r, err = sgl.Complete(context.Background(), Request{InstanceID: "i", Prompt: "x", N: 1})
	if err != nil || r.PolicyVersion != 123 || srv.requests[2].Model != "base:swerl-v000123" {
		t.Fatalf("sglang: %+v %v (model %q)", r, err, srv.requests[2].Model)
	}
	// The response names what served it: an older adapter is that version.
	srv.model = "swerl-v000122"
	if r, err := vllm.Complete(context.Background(), Request{InstanceID: "i", Prompt: "x", N: 1}); err != nil || r.PolicyVersion != 122 {
		t.Fatalf("older adapter: %+v %v", r, err)
	}
	srv.model = "base"
	if _, err := vllm.Complete(context.Background(), Request{InstanceID: "inst-7", Prompt: "x", N: 1}); err == nil ||
		!strings.Contains(err.Error(), "inst-7") || !strings.Contains(err.Error(), `"base"`) {
		t.Fatalf("a response without the adapter must fail naming the instance and the model: %v", err)
	}
	// A full-weight sync: the model stays, the version is the synced one
	// unless the server reports its own.
	srv.model = ""
	served.Set(ts.URL, engineapi.ServedVersion{Version: 9})
	if r, err := vllm.Complete(context.Background(), Request{InstanceID: "i", Prompt: "x", N: 1}); err != nil || r.PolicyVersion != 12 || srv.requests[len(srv.requests)-1].Model != "base" {
		t.Fatalf("full sync with a version header: %+v %v", r, err)
	}
	if _, err := Open(ts.URL + "?engine=tgi"); err == nil {
		t.Fatal("unknown engine must fail")
	}
}

func FuzzDecodeChat(f *testing.F) {
	f.Add([]byte(`{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"logprob":-1}]}}]}`), "4")
	f.Add([]byte(`{"system_fingerprint":"swerl-v2","choices":null}`), "")
	f.Fuzz(func(t *testing.T, b []byte, h string) {
		cs, v, _, err := decodeChat(b, h)
		if err == nil && v < -1 {
			t.Fatalf("version %d", v)
		}
		_ = cs
	})
}

func FuzzParseFileLine(f *testing.F) {
	f.Add([]byte(`{"instance_id":"a","completions":["x",{"text":"y"}]}`))
	f.Add([]byte(`{"instance_id":"a","completions":[1]}`))
	f.Add([]byte(`{"instance_id":"a\u00e9","policy_version":3,"x":[{}],"completions":[{"text":"t","logprobs":[-0.5,0,-1e-3],"tokens":[1,2],"finish_reason":"length"},"\n"]}`))
	f.Add([]byte(`{"instance_id":"a","completions":[{"tokens":[2147483648]},{"logprobs":[1e39]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseFileLine(b)
		if err == nil && l != nil && l.InstanceID == "" {
			t.Fatal("accepted a line with no instance_id")
		}
		jsonscantest.Agrees(t, b, fastFileLine, slowFileLine)
	})
}

// TestFastFileLine: the usual shapes take the fast path (and match
// encoding/json), the unusual ones are left to it.
func TestFastFileLine(t *testing.T) {
	for _, s := range []string{
		`{"instance_id":"o/r#1","completions":["a","b\n\u00e9"],"policy_version":7}`,
		`{"instance_id":"o/r#1","completions":[{"text":"a","logprobs":[-0.25,-1.5e-2],"tokens":[5,-1],"finish_reason":"length","extra":{}}],"policy_version":null}`,
		` {"completions":[],"instance_id":"x","note":[1,"z",null]} `,
	} {
		if !jsonscantest.Agrees(t, []byte(s), fastFileLine, slowFileLine) {
			t.Errorf("%s: gave up", s)
		}
	}
	for _, s := range []string{
		`{"instance_id":"a","completions":[null]}`, `{"instance_id":"a","Completions":["x"]}`,
		`{"instance_id":"a","instance_id":"b"}`, `{"instance_id":"a","completions":[{"tokens":[2147483648]}]}`,
		`{"instance_id":"a","completions":[{"logprobs":[1e39]}]}`, `{"instance_id":"a","policy_version":1.5}`,
		`{"instance_id":"a","completions":[1]}`, `{"instance_id":"a"`,
	} {
		if _, ok := fastFileLine([]byte(s)); ok {
			t.Errorf("%s: the fast path did not give up", s)
		}
	}
}

// A large file is decoded on several goroutines, yet errors name the first
// bad line in file order, and CRLF line ends are accepted.
func TestFilePolicyManyLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	write := func(bad map[int]string) {
		var sb strings.Builder
		for i := 1; i <= 2000; i++ {
			if b, ok := bad[i]; ok {
				sb.WriteString(b + "\r\n")
				continue
			}
			fmt.Fprintf(&sb, `{"instance_id":"i%d","completions":["c%d"],"policy_version":%d}`+"\r\n", i, i, i%50)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(nil)
	p, err := Open("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 999, 2000} {
		r, err := p.Complete(context.Background(), Request{InstanceID: fmt.Sprintf("i%d", i), N: 1})
		if err != nil || r.Completions[0].Text != fmt.Sprintf("c%d", i) || r.PolicyVersion != int64(i%50) {
			t.Fatalf("i%d: %+v %v", i, r, err)
		}
	}
	if v := p.(*FilePolicy).Version(); v != 49 {
		t.Fatalf("version %d, want 49", v)
	}
	write(map[int]string{1500: "{oops", 1700: `{"instance_id":"i3","completions":[]}`, 1900: "nope"})
	if _, err := Open("file:" + path); err == nil || !strings.Contains(err.Error(), "c.jsonl:1500:") {
		t.Fatalf("error %v, want line 1500", err)
	}
	write(map[int]string{1700: `{"instance_id":"i3","completions":[]}`, 1900: "nope"})
	if _, err := Open("file:" + path); err == nil || !strings.Contains(err.Error(), `c.jsonl:1700: instance "i3" listed twice`) {
		t.Fatalf("error %v, want the duplicate at line 1700", err)
	}
}

// logprobs=processed marks the completions' log-probs as taken after the
// temperature; the default is raw; another value is refused.
func TestHTTPPolicyLogProbsKind(t *testing.T) {
	srv := &openAI{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for spec, want := range map[string]bool{"": false, "&logprobs=raw": false, "&logprobs=processed": true} {
		p, err := Open(ts.URL + "/v1?model=m1" + spec)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Complete(context.Background(), Request{InstanceID: "i", Prompt: "fix", N: 2, Temperature: 0.7})
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Completions {
			if c.LogProbsProcessed != want {
				t.Errorf("%q: LogProbsProcessed %v, want %v", spec, c.LogProbsProcessed, want)
			}
		}
	}
	if _, err := Open(ts.URL + "/v1?logprobs=sampled"); err == nil || !strings.Contains(err.Error(), "raw or processed") {
		t.Errorf("logprobs=sampled: err = %v", err)
	}
}

// readChatRequest decodes a chat completions request for a test server,
// answering 400 when it cannot.
func readChatRequest(w http.ResponseWriter, r *http.Request) (engineapi.ChatRequest, bool) {
	var req engineapi.ChatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return req, false
	}
	return req, true
}

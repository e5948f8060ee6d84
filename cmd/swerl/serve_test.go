package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"swerl/internal/syncbuf"
	"swerl/internal/testenv"
)

// serveModel writes a fresh model directory and serves it (startServe).
func serveModel(t *testing.T, flags ...string) (addr string, stderr *syncbuf.Buffer, stop func()) {
	t.Helper()
	return startServe(t, tinyModel(t, t.TempDir()), flags...)
}

func TestServeCommand(t *testing.T) {
	addr, se, stop := serveModel(t, "--max-seq", "128", "--metrics-addr", "127.0.0.1:0")
	// --metrics-addr: Prometheus /metrics beside the API.
	m := regexp.MustCompile(`metrics on (http://127\.0\.0\.1:\d+/metrics)`).FindStringSubmatch(se.String())
	if m == nil {
		t.Fatalf("no metrics address announced: %s", se.String())
	}
	mresp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if mresp.StatusCode != http.StatusOK || !strings.Contains(string(mbody), "go_goroutines") {
		t.Errorf("GET %s: %s %.200s", m[1], mresp.Status, mbody)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"seed":7}`
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var cr struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		SystemFingerprint string `json:"system_fingerprint"`
	}
	json.NewDecoder(resp.Body).Decode(&cr)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(cr.Choices) != 1 || cr.SystemFingerprint != "swerl-v-1" || resp.Header.Get("X-Swerl-Policy-Version") != "-1" {
		t.Fatalf("status %d, %+v", resp.StatusCode, cr)
	}
	stop()
}

// --api-key-env: the key is read from the named variable; requests without
// "Authorization: Bearer <key>" get a JSON 401, /health stays open, and a
// variable that is not set is a usage error, not a server without a key.
func TestServeAPIKey(t *testing.T) {
	t.Setenv("SWERL_TEST_SERVE_KEY", "s3cret-key")
	addr, _, stop := serveModel(t, "--max-seq", "128", "--api-key-env", "SWERL_TEST_SERVE_KEY")
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"seed":1}`
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"s3cret-key", 401}, {"Bearer s3cret-key", 200}} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == 401 && !strings.Contains(e.Error.Message, "API key")) {
			t.Errorf("Authorization %q: status %d, error %q; want %d", tc.auth, resp.StatusCode, e.Error.Message, tc.want)
		}
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/health without a key: %d", resp.StatusCode)
	}
	stop()

	var so, se bytes.Buffer
	if code := runMain(context.Background(), []string{"serve", "--model", t.TempDir(), "--api-key-env", "SWERL_TEST_UNSET_KEY"}, &so, &se); code == 0 || !strings.Contains(se.String(), "SWERL_TEST_UNSET_KEY") {
		t.Errorf("unset key variable: exit %d, %s", code, se.String())
	}
	se.Reset()
	runMain(context.Background(), []string{"serve", "-h"}, &so, &se)
	for _, flag := range []string{"-api-key-env", "-read-timeout", "-write-timeout", "-idle-timeout", "-max-concurrent", "-max-queue", "-max-body"} {
		if !strings.Contains(se.String()+so.String(), flag) {
			t.Errorf("serve -h does not document %s", flag)
		}
	}
}

// openAIClientJS drives swerl serve with the official openai npm client:
// models.list, chat.completions with n and logprobs, the same request
// streamed with usage, and a streamed completions call. It prints one JSON
// line for the Go side to check.
const openAIClientJS = `
const { OpenAI } = require('openai');
(async () => {
  const client = new OpenAI({ baseURL: process.env.SWERL_BASE_URL, apiKey: 'unused' });
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  const msgs = [{ role: 'user', content: 'hello' }];
  const chat = await client.chat.completions.create({ model: ids[0], messages: msgs, n: 2, max_tokens: 6, seed: 3, logprobs: true });
  const stream = await client.chat.completions.create({ model: ids[0], messages: msgs, n: 2, max_tokens: 6, seed: 3,
    stream: true, stream_options: { include_usage: true } });
  const text = ['', ''], finish = [];
  let usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    for (const c of chunk.choices) {
      text[c.index] += c.delta.content || '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  const plain = await client.completions.create({ model: ids[0], prompt: 'func main() {', max_tokens: 6, seed: 4 });
  const cs = await client.completions.create({ model: ids[0], prompt: 'func main() {', max_tokens: 6, seed: 4, stream: true });
  let ctext = '';
  for await (const chunk of cs) ctext += chunk.choices.length ? chunk.choices[0].text : '';
  // A loglikelihood scorer's request (lm-evaluation-harness), chat's
  // top_logprobs, and a prompt of token ids.
  const echo = await client.completions.create({ model: ids[0], prompt: 'func main() {', max_tokens: 0, echo: true, logprobs: 2 });
  const top = await client.chat.completions.create({ model: ids[0], messages: msgs, max_tokens: 3, logprobs: true, top_logprobs: 2 });
  const byIDs = await client.completions.create({ model: ids[0], prompt: [1, 2, 3], max_tokens: 2, seed: 4 });
  console.log(JSON.stringify({ ids, chat: chat.choices.map(c => c.message.content), logprobs: chat.choices[0].logprobs.content.length,
    plainUsage: chat.usage, stream: text, finish, usage, chunks, completion: plain.choices[0].text, streamedCompletion: ctext,
    echo: echo.choices[0], chatTop: top.choices[0].logprobs.content.map(c => c.top_logprobs.length), byIDs: byIDs.usage.prompt_tokens }));
})().catch(e => { console.error(e); process.exit(1); });
`

// The official openai npm client works against swerl serve, streaming
// included: the streamed answers equal the same seeds' whole answers.
func TestServeOpenAIClient(t *testing.T) {
	nm := testenv.NodeModules(t, "openai")
	addr, _, stop := serveModel(t, "--max-seq", "256")
	defer stop()
	script := filepath.Join(t.TempDir(), "client.js")
	if err := os.WriteFile(script, []byte(openAIClientJS), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nm, "SWERL_BASE_URL=http://"+addr+"/v1")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("node: %v: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		IDs        []string `json:"ids"`
		Chat       []string `json:"chat"`
		Logprobs   int      `json:"logprobs"`
		PlainUsage struct {
			Total int `json:"total_tokens"`
		} `json:"plainUsage"`
		Stream []string `json:"stream"`
		Finish []string `json:"finish"`
		Usage  *struct {
			Total int `json:"total_tokens"`
		} `json:"usage"`
		Chunks             int    `json:"chunks"`
		Completion         string `json:"completion"`
		StreamedCompletion string `json:"streamedCompletion"`
		Echo               struct {
			Text     string `json:"text"`
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []*float64           `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"echo"`
		ChatTop []int `json:"chatTop"`
		ByIDs   int   `json:"byIDs"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if len(got.IDs) != 1 || len(got.Chat) != 2 || got.Logprobs == 0 {
		t.Fatalf("non-streaming calls: %+v", got)
	}
	if !slices.Equal(got.Stream, got.Chat) || len(got.Finish) != 2 || got.Finish[0] == "" || got.Chunks < 7 {
		t.Errorf("streamed %q (finish %q, %d chunks), whole %q", got.Stream, got.Finish, got.Chunks, got.Chat)
	}
	if got.Usage == nil || got.Usage.Total != got.PlainUsage.Total || got.Usage.Total == 0 {
		t.Errorf("streamed usage %+v, whole %+v", got.Usage, got.PlainUsage)
	}
	if got.StreamedCompletion != got.Completion {
		t.Errorf("streamed completion %q, whole %q", got.StreamedCompletion, got.Completion)
	}
	e := got.Echo.Logprobs
	if got.Echo.Text != "func main() {" || len(e.Tokens) < 2 || len(e.TokenLogprobs) != len(e.Tokens) || e.TokenLogprobs[0] != nil ||
		e.TokenLogprobs[1] == nil || len(e.TopLogprobs) != len(e.Tokens) || e.TopLogprobs[0] != nil || len(e.TopLogprobs[1]) == 0 {
		t.Errorf("echo with max_tokens 0: %+v", got.Echo)
	}
	if len(got.ChatTop) == 0 || slices.ContainsFunc(got.ChatTop, func(n int) bool { return n != 2 }) {
		t.Errorf("chat top_logprobs 2: lengths %v", got.ChatTop)
	}
	if got.ByIDs != 3 {
		t.Errorf("a prompt of 3 token ids: prompt_tokens %d", got.ByIDs)
	}
}

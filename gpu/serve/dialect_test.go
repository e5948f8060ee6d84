package serve

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/gpu/tokenizer"
	"swerl/internal/engineapi"
)

// dialectMaxSeq is the context of the dialect tests' server: what
// max_model_len must report.
const dialectMaxSeq = 256

// dialectServer serves a tiny model made for the test with a context of
// dialectMaxSeq; it returns the server and the model as loaded.
func dialectServer(t *testing.T) (*httptest.Server, *modeldir.Policy) {
	t.Helper()
	dir := t.TempDir()
	if _, err := modeldir.Init(dir, "tiny", 11); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Open(dir, policy.Options{MaxSeq: dialectMaxSeq, MaxTokens: 16, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(pol, "tiny").Handler())
	t.Cleanup(func() { srv.Close(); pol.Close() })
	mp, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return srv, mp
}

// trainerLogProbs is the full forward's log-probability of each token of
// ids after the first: the learner's computation, the reference of every
// scored prompt.
func trainerLogProbs(t *testing.T, m *gpu.Model, ids []int32) []float32 {
	t.Helper()
	be := cpu.New()
	defer be.Close()
	tr, err := gpu.NewScorer(m, be, gpu.TrainConfig{MaxBatch: 1, MaxSeq: dialectMaxSeq})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := tr.LogProbs([]gpu.Sequence{{Prompt: ids[:1], Completion: ids[1:]}})
	if err != nil {
		t.Fatal(err)
	}
	return lp[0]
}

// textAnswer is a completions answer as the tests read it.
type textAnswer struct {
	Choices []struct {
		Index    int
		Text     string
		Logprobs *struct {
			Tokens        []string             `json:"tokens"`
			TokenLogprobs []*float64           `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			TextOffset    []int                `json:"text_offset"`
		}
		FinishReason   string                               `json:"finish_reason"`
		TokenIDs       []int32                              `json:"token_ids"`
		PromptLogprobs []map[string]engineapi.PromptLogprob `json:"prompt_logprobs"`
	}
	Usage engineapi.Usage
}

func postText(t *testing.T, url string, body any) textAnswer {
	t.Helper()
	code, raw := postJSON(t, url+engineapi.CompletionsPath, body)
	var a textAnswer
	if err := json.Unmarshal([]byte(raw), &a); code != 200 || err != nil || len(a.Choices) == 0 {
		t.Fatalf("completions %v: %d %s (%v)", body, code, raw, err)
	}
	return a
}

// wantError posts body to path and checks a 400 whose error names param.
func wantError(t *testing.T, url, path string, body any, status int, param, says string) {
	t.Helper()
	code, raw := postJSON(t, url+path, body)
	var e struct {
		Error struct{ Message, Type, Param string }
	}
	if err := json.Unmarshal([]byte(raw), &e); code != status || err != nil || e.Error.Param != param || !strings.Contains(e.Error.Message, says) {
		t.Errorf("%s %v: %d %s; want %d naming %q and saying %q", path, body, code, raw, status, param, says)
	}
}

func tokenizeIDs(t *testing.T, url string, body any) engineapi.TokenizeResponse {
	t.Helper()
	code, raw := postJSON(t, url+engineapi.TokenizePath, body)
	var tr engineapi.TokenizeResponse
	if err := json.Unmarshal([]byte(raw), &tr); code != 200 || err != nil {
		t.Fatalf("tokenize %v: %d %s (%v)", body, code, raw, err)
	}
	return tr
}

const dialectPrompt = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"

// TestEchoScoresThePrompt: lm-evaluation-harness's loglikelihood request
// (echo, logprobs, max_tokens 0) gets the prompt back with each token's
// log-probability under a full forward pass (the first null), top
// entries that hold the token, vLLM's prompt_logprobs agreeing, and echo
// with generation is the prompt's scores followed by the completion the
// same request gets without echo.
func TestEchoScoresThePrompt(t *testing.T) {
	srv, mp := dialectServer(t)
	ids := mp.Tokenizer.Encode(dialectPrompt)
	want := trainerLogProbs(t, mp.Model, ids)

	a := postText(t, srv.URL, map[string]any{"prompt": dialectPrompt, "echo": true, "logprobs": 3, "max_tokens": 0, "prompt_logprobs": 2})
	c := a.Choices[0]
	if c.Text != dialectPrompt || a.Usage.PromptTokens != len(ids) || a.Usage.CompletionTokens != 0 || c.FinishReason != "length" {
		t.Fatalf("text %q usage %+v finish %q; want the prompt alone", c.Text, a.Usage, c.FinishReason)
	}
	lp := c.Logprobs
	if lp == nil || len(lp.Tokens) != len(ids) || len(lp.TokenLogprobs) != len(ids) || len(lp.TopLogprobs) != len(ids) || len(lp.TextOffset) != len(ids) {
		t.Fatalf("logprobs %+v for %d prompt tokens", lp, len(ids))
	}
	if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
		t.Errorf("first token: logprob %v top %v, want null", lp.TokenLogprobs[0], lp.TopLogprobs[0])
	}
	if strings.Join(lp.Tokens, "") != dialectPrompt {
		t.Errorf("tokens %q do not spell the prompt", lp.Tokens)
	}
	if len(c.PromptLogprobs) != len(ids) || c.PromptLogprobs[0] != nil {
		t.Fatalf("prompt_logprobs %v", c.PromptLogprobs)
	}
	for j := 1; j < len(ids); j++ {
		got := lp.TokenLogprobs[j]
		if got == nil || math.Abs(*got-float64(want[j-1])) > 1e-4 {
			t.Fatalf("prompt token %d: logprob %v, the full forward's %v", j, got, want[j-1])
		}
		// Tokens of equal text share an entry (the tiny model's
		// vocabulary has many byte tokens that read U+FFFD alone), so
		// an entry holds up to 4 texts.
		top := lp.TopLogprobs[j]
		if v, ok := top[lp.Tokens[j]]; !ok || v != *got || len(top) > 4 {
			t.Errorf("prompt token %d (%q, %v): top %v; want at most 4 entries holding it", j, lp.Tokens[j], *got, top)
		}
		if off := len(strings.Join(lp.Tokens[:j], "")); lp.TextOffset[j] != off {
			t.Errorf("text_offset[%d] %d, want %d", j, lp.TextOffset[j], off)
		}
		pl := c.PromptLogprobs[j]
		e, ok := pl[strconv.Itoa(int(ids[j]))]
		if !ok || e.Logprob != *got || e.Rank < 1 || e.DecodedToken != lp.Tokens[j] || len(pl) < 2 || len(pl) > 3 {
			t.Errorf("prompt_logprobs[%d] %v: want token %d at %v among 2 or 3", j, pl, ids[j], *got)
		}
		for id, e := range pl {
			if e.Rank == 1 && e.Logprob < *got {
				t.Errorf("prompt_logprobs[%d]: rank 1 is %s at %v, below the prompt token's %v", j, id, e.Logprob, *got)
			}
		}
	}

	// Echo with a completion: the prompt's scores, then what the same
	// request gives without echo.
	req := map[string]any{"prompt": dialectPrompt, "logprobs": 1, "max_tokens": 6, "temperature": 0, "seed": 4}
	plain := postText(t, srv.URL, req)
	req["echo"] = true
	echoed := postText(t, srv.URL, req)
	pc, ec := plain.Choices[0], echoed.Choices[0]
	if ec.Text != dialectPrompt+pc.Text {
		t.Fatalf("echoed text %q, want the prompt and %q", ec.Text, pc.Text)
	}
	if len(ec.Logprobs.Tokens) != len(ids)+len(pc.Logprobs.Tokens) || ec.Logprobs.TextOffset[len(ids)] != len(dialectPrompt) {
		t.Fatalf("echoed logprobs %+v", ec.Logprobs)
	}
	for j, v := range pc.Logprobs.TokenLogprobs {
		if e := ec.Logprobs.TokenLogprobs[len(ids)+j]; e == nil || *e != *v {
			t.Errorf("completion token %d: %v echoed, %v plain", j, e, *v)
		}
	}
	for j := 1; j < len(ids); j++ {
		if e := ec.Logprobs.TokenLogprobs[j]; e == nil || math.Abs(*e-float64(want[j-1])) > 1e-4 {
			t.Errorf("echoed prompt token %d: %v, want %v", j, e, want[j-1])
		}
	}

	// Streamed, an echoed answer comes as one chunk holding it all.
	resp, err := http.Post(srv.URL+engineapi.CompletionsPath, "application/json",
		strings.NewReader(`{"prompt":"def f():","echo":true,"logprobs":2,"max_tokens":3,"stream":true,"seed":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := sseEvents(t, resp.Body)
	var chunk textAnswer
	if len(events) != 2 || events[1] != "[DONE]" || json.Unmarshal([]byte(events[0]), &chunk) != nil ||
		!strings.HasPrefix(chunk.Choices[0].Text, "def f():") || chunk.Choices[0].Logprobs.TokenLogprobs[0] != nil {
		t.Errorf("stream %q", events)
	}
}

// TestTopLogprobs: completions' logprobs N and chat's top_logprobs N list
// the N most likely tokens (completions adding the token sampled), the
// sampled token's entry its own log-probability; greedy, the token is
// the most likely. Past MaxLogprobs, or top_logprobs without logprobs, is
// a 400 naming the field.
func TestTopLogprobs(t *testing.T) {
	srv, mp := dialectServer(t)
	for _, temp := range []float64{0, 1} {
		a := postText(t, srv.URL, map[string]any{"prompt": dialectPrompt, "logprobs": 5, "max_tokens": 10, "temperature": temp, "seed": 3,
			"return_token_ids": true})
		c := a.Choices[0]
		lp := c.Logprobs
		if len(lp.TopLogprobs) != len(lp.Tokens) || len(lp.Tokens) == 0 {
			t.Fatalf("temperature %v: %d top entries for %d tokens", temp, len(lp.TopLogprobs), len(lp.Tokens))
		}
		full := trainerLogProbs(t, mp.Model, append(slices.Clone(mp.Tokenizer.Encode(dialectPrompt)), c.TokenIDs...))
		np := len(full) - len(c.TokenIDs)
		for j, top := range lp.TopLogprobs {
			v, ok := top[lp.Tokens[j]]
			if !ok || v != *lp.TokenLogprobs[j] || len(top) > 6 {
				t.Errorf("temperature %v token %d (%q): top %v", temp, j, lp.Tokens[j], top)
			}
			if math.Abs(*lp.TokenLogprobs[j]-float64(full[np+j])) > 1e-4 {
				t.Errorf("token %d: logprob %v, the full forward's %v", j, *lp.TokenLogprobs[j], full[np+j])
			}
			var sum float64
			for s, x := range top {
				sum += math.Exp(x)
				if temp == 0 && x > v {
					t.Errorf("greedy token %d %q at %v, but %q at %v", j, lp.Tokens[j], v, s, x)
				}
			}
			if sum > 1+1e-4 {
				t.Errorf("token %d: top probabilities sum to %v", j, sum)
			}
		}
	}
	var cr engineapi.ChatResponse
	code, raw := postJSON(t, srv.URL+engineapi.ChatCompletionsPath, map[string]any{
		"messages": []map[string]string{{"role": "user", "content": "hi"}}, "logprobs": true, "top_logprobs": 3, "max_tokens": 6, "temperature": 0})
	if err := json.Unmarshal([]byte(raw), &cr); code != 200 || err != nil || len(cr.Choices) != 1 || cr.Choices[0].Logprobs == nil {
		t.Fatalf("chat: %d %s", code, raw)
	}
	for j, e := range cr.Choices[0].Logprobs.Content {
		b, _ := json.Marshal(e.TopLogprobs)
		var top []engineapi.TopLogprob
		json.Unmarshal(b, &top)
		if len(top) != 3 || top[0].Token != e.Token || top[0].Logprob != e.Logprob || top[1].Logprob > top[0].Logprob || top[2].Logprob > top[1].Logprob {
			t.Errorf("chat token %d %q at %v: top %+v", j, e.Token, e.Logprob, top)
		}
	}
	chat := func(extra map[string]any) map[string]any {
		m := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": "x", "logprobs": 21}, 400, "logprobs", "0..20")
	wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": "x", "prompt_logprobs": 21}, 400, "prompt_logprobs", "0..20")
	wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": "x", "max_tokens": 0}, 400, "max_tokens", "only with echo")
	wantError(t, srv.URL, engineapi.ChatCompletionsPath, chat(map[string]any{"logprobs": true, "top_logprobs": 21}), 400, "top_logprobs", "0..20")
	wantError(t, srv.URL, engineapi.ChatCompletionsPath, chat(map[string]any{"top_logprobs": 2}), 400, "top_logprobs", "needs logprobs")
}

// TestTokenIDPrompts: a prompt of token ids gets the answer of the
// string it encodes; several prompts (strings or ids) get each prompt's
// own answer, n choices a prompt in order; bad ids and lists are a 400
// naming prompt.
func TestTokenIDPrompts(t *testing.T) {
	srv, mp := dialectServer(t)
	ids := mp.Tokenizer.Encode(dialectPrompt)
	base := map[string]any{"max_tokens": 8, "temperature": 1, "seed": 21, "logprobs": 0, "n": 2}
	with := func(prompt any) map[string]any {
		m := map[string]any{"prompt": prompt}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	byText := postText(t, srv.URL, with(dialectPrompt))
	byIDs := postText(t, srv.URL, with(ids))
	if len(byText.Choices) != 2 || len(byIDs.Choices) != 2 {
		t.Fatalf("%d and %d choices for n 2", len(byText.Choices), len(byIDs.Choices))
	}
	same := func(what string, a, b textAnswer, ai, bi int) {
		t.Helper()
		x, y := a.Choices[ai], b.Choices[bi]
		if x.Text != y.Text || !slices.EqualFunc(x.Logprobs.TokenLogprobs, y.Logprobs.TokenLogprobs, func(p, q *float64) bool { return *p == *q }) {
			t.Errorf("%s: %q %v, want %q %v", what, y.Text, y.Logprobs.TokenLogprobs, x.Text, x.Logprobs.TokenLogprobs)
		}
	}
	same("token ids", byText, byIDs, 0, 0)
	same("token ids, second choice", byText, byIDs, 1, 1)
	if byIDs.Usage.PromptTokens != len(ids) {
		t.Errorf("usage %+v for a prompt of %d ids", byIDs.Usage, len(ids))
	}
	other := "x = 1\n"
	alone := postText(t, srv.URL, with(other))
	for _, batch := range []any{[]any{ids, mp.Tokenizer.Encode(other)}, []string{dialectPrompt, other}} {
		b := postText(t, srv.URL, with(batch))
		if len(b.Choices) != 4 {
			t.Fatalf("%d choices for 2 prompts and n 2", len(b.Choices))
		}
		for i, c := range b.Choices {
			if c.Index != i {
				t.Errorf("choice %d has index %d", i, c.Index)
			}
		}
		same("first prompt of two", byText, b, 0, 0)
		same("second prompt of two", alone, b, 1, 3)
		if b.Usage.PromptTokens != len(ids)+len(mp.Tokenizer.Encode(other)) {
			t.Errorf("usage %+v", b.Usage)
		}
	}
	// lm-evaluation-harness's loglikelihood batch: token-id prompts,
	// echo, logprobs 1, one greedy token. Each prompt's scores are the
	// full forward's, and its last entry is the token generated.
	otherIDs := mp.Tokenizer.Encode(other)
	lm := postText(t, srv.URL, map[string]any{"prompt": [][]int32{ids, otherIDs}, "echo": true, "logprobs": 1, "max_tokens": 1, "temperature": 0})
	if len(lm.Choices) != 2 {
		t.Fatalf("%d choices for 2 prompts", len(lm.Choices))
	}
	for i, p := range [][]int32{ids, otherIDs} {
		want := trainerLogProbs(t, mp.Model, p)
		lp := lm.Choices[i].Logprobs
		if len(lp.TokenLogprobs) != len(p)+1 || lp.TokenLogprobs[0] != nil {
			t.Fatalf("prompt %d: %d entries for %d tokens and 1 generated", i, len(lp.TokenLogprobs), len(p))
		}
		for j := 1; j < len(p); j++ {
			if v := lp.TokenLogprobs[j]; v == nil || math.Abs(*v-float64(want[j-1])) > 1e-4 {
				t.Errorf("prompt %d token %d: %v, want %v", i, j, v, want[j-1])
			}
		}
	}
	V := mp.Model.Config.VocabSize
	for _, bad := range []any{[]int{}, []int{1, -1}, []int{V}, []any{[]int{1}, []int{}}, []any{"x", 3}, map[string]int{"a": 1}, ""} {
		wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": bad, "max_tokens": 2}, 400, "prompt", "prompt")
	}
	wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": []any{[]int{1}, []int{2}}, "n": 9, "max_tokens": 2}, 400, "n", "at most 16")
}

// TestTokenize: vLLM's /tokenize gives the tokenizer's ids of a prompt,
// or of messages through the chat template (the generation prompt unless
// add_generation_prompt is false), and the context served, which
// /v1/models reports too; /detokenize inverts it; bad input is a 400
// naming the field.
func TestTokenize(t *testing.T) {
	srv, mp := dialectServer(t)
	tok := mp.Tokenizer
	for _, text := range []string{dialectPrompt, "héllo wörld ✓\t\t  spaces", "<|im_start|>user\nhi<|im_end|>"} {
		tr := tokenizeIDs(t, srv.URL, map[string]any{"model": "tiny", "prompt": text, "add_special_tokens": true})
		if !slices.Equal(tr.Tokens, tok.Encode(text)) || tr.Count != len(tr.Tokens) || tr.MaxModelLen != dialectMaxSeq {
			t.Errorf("tokenize %q: %+v, want %v and max_model_len %d", text, tr, tok.Encode(text), dialectMaxSeq)
		}
		code, raw := postJSON(t, srv.URL+engineapi.DetokenizePath, map[string]any{"model": "tiny", "tokens": tr.Tokens})
		var dr engineapi.DetokenizeResponse
		if json.Unmarshal([]byte(raw), &dr); code != 200 || dr.Prompt != text {
			t.Errorf("detokenize of %q: %d %s", text, code, raw)
		}
	}
	msgs := []map[string]string{{"role": "system", "content": "be terse"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "again"}}
	tmsgs := []tokenizer.Message{{Role: "system", Content: "be terse"}, {Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}, {Role: "user", Content: "again"}}
	tr := tokenizeIDs(t, srv.URL, map[string]any{"messages": msgs})
	if want, _ := tok.EncodeMessages(tmsgs); !slices.Equal(tr.Tokens, want) {
		t.Errorf("messages: %v, want %v", tr.Tokens, want)
	}
	tr = tokenizeIDs(t, srv.URL, map[string]any{"messages": msgs, "add_generation_prompt": false, "return_token_strs": true})
	text, _ := tok.Chat.Render(tmsgs, false)
	if !slices.Equal(tr.Tokens, tok.Encode(text)) || strings.Join(tr.TokenStrs, "") != text {
		t.Errorf("messages without the generation prompt: %v %q, want %v", tr.Tokens, tr.TokenStrs, tok.Encode(text))
	}
	resp, err := http.Get(srv.URL + engineapi.ModelsPath)
	if err != nil {
		t.Fatal(err)
	}
	var ml engineapi.ModelList
	json.NewDecoder(resp.Body).Decode(&ml)
	resp.Body.Close()
	if len(ml.Data) == 0 || ml.Data[0].MaxModelLen != dialectMaxSeq {
		t.Errorf("/v1/models %+v, want max_model_len %d", ml, dialectMaxSeq)
	}
	wantError(t, srv.URL, engineapi.TokenizePath, map[string]any{}, 400, "prompt", "prompt")
	wantError(t, srv.URL, engineapi.TokenizePath, map[string]any{"prompt": "x", "messages": msgs}, 400, "messages", "not both")
	wantError(t, srv.URL, engineapi.TokenizePath, map[string]any{"messages": []map[string]string{{"role": "tool", "content": "x"}}}, 400, "messages", "role")
	wantError(t, srv.URL, engineapi.TokenizePath, map[string]any{"model": "swerl-v000007", "prompt": "x"}, 404, "model", "does not exist")
	wantError(t, srv.URL, engineapi.DetokenizePath, map[string]any{"tokens": []int{1, -5}}, 400, "tokens", "-5")
	wantError(t, srv.URL, engineapi.DetokenizePath, map[string]any{}, 400, "tokens", "missing")
	wantError(t, srv.URL, engineapi.DetokenizePath, map[string]any{"tokens": "abc"}, 400, "", "JSON")
}

// TestMaxModelLen: the context /v1/models and /tokenize report is the one
// enforced: a prompt that leaves no room for a completion token is a 400
// naming the field and max_model_len; scoring alone (echo, max_tokens 0)
// takes a prompt of exactly max_model_len tokens.
func TestMaxModelLen(t *testing.T) {
	srv, _ := dialectServer(t)
	ids := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(1 + i%7)
		}
		return out
	}
	wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": ids(dialectMaxSeq), "max_tokens": 2}, 400, "prompt", "max_model_len is 256")
	a := postText(t, srv.URL, map[string]any{"prompt": ids(dialectMaxSeq - 1), "max_tokens": 5})
	if a.Usage.CompletionTokens != 1 || a.Choices[0].FinishReason != "length" {
		t.Errorf("a prompt of max_model_len-1 tokens: usage %+v, finish %q", a.Usage, a.Choices[0].FinishReason)
	}
	a = postText(t, srv.URL, map[string]any{"prompt": ids(dialectMaxSeq), "echo": true, "logprobs": 0, "max_tokens": 0})
	if lp := a.Choices[0].Logprobs; len(lp.TokenLogprobs) != dialectMaxSeq || lp.TokenLogprobs[dialectMaxSeq-1] == nil {
		t.Errorf("scoring a prompt of max_model_len tokens: %+v", lp)
	}
	wantError(t, srv.URL, engineapi.CompletionsPath, map[string]any{"prompt": ids(dialectMaxSeq + 1), "echo": true, "logprobs": 0, "max_tokens": 0},
		400, "prompt", "max_model_len is 256")
	long := strings.Repeat("word ", 400)
	wantError(t, srv.URL, engineapi.ChatCompletionsPath, map[string]any{"messages": []map[string]string{{"role": "user", "content": long}}, "max_tokens": 2},
		400, "messages", "max_model_len is 256")
	// An echo of one token has nothing to score: its entry is null.
	a = postText(t, srv.URL, map[string]any{"prompt": []int{5}, "echo": true, "logprobs": 2, "max_tokens": 0})
	if lp := a.Choices[0].Logprobs; len(lp.TokenLogprobs) != 1 || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
		t.Errorf("echo of one token: %+v", lp)
	}
}

// FuzzDialectBodies: any body sent to /tokenize, /detokenize or to
// /v1/completions with the dialect's fields (token-id prompts, echo,
// prompt_logprobs, top log-probabilities) gets a 2xx or 4xx answer, never
// a panic or a 5xx.
func FuzzDialectBodies(f *testing.F) {
	pol, _ := tinyPolicy(f, 1, policy.Options{MaxSeq: 64, MaxTokens: 4, Log: quiet()})
	h := New(pol, "tiny").Handler()
	paths := []string{engineapi.TokenizePath, engineapi.DetokenizePath, engineapi.CompletionsPath}
	for i, s := range []string{`{"prompt":"def f():"}`, `{"tokens":[1,2,99999999]}`, `{"prompt":[[1,2],[3]],"echo":true,"logprobs":3,"max_tokens":0,"prompt_logprobs":1}`,
		`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false}`, `{"tokens":[-1]}`, `{"prompt":[1,2,3],"max_tokens":2,"logprobs":20,"n":2}`,
		`{"prompt":[],"max_tokens":1}`, `{"prompt":["a",[1]],"max_tokens":1,"stream":true,"echo":true}`} {
		f.Add(uint8(i), []byte(s))
	}
	fuzzEndpoints(f, h, paths)
}

package gguf_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gguf"
	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/tokenizer"
	"swerl/internal/testenv"
)

// peerRequest is what testdata/hf_reference.py reads.
type peerRequest struct {
	GGUF          string      `json:"gguf"`
	Dir           string      `json:"dir"`
	Prompts       [][]int32   `json:"prompts,omitempty"`
	Greedy        int         `json:"greedy,omitempty"`
	Lines         []string    `json:"lines,omitempty"`
	Conversations []peerConvo `json:"conversations,omitempty"`
}

type peerConvo struct {
	Messages         []tokenizer.Message `json:"messages"`
	GenerationPrompt bool                `json:"generation_prompt"`
}

type peerAnswer struct {
	LogProbs [][]float64 `json:"logprobs"`
	Greedy   [][]int32   `json:"greedy"`
	IDsDir   [][]int32   `json:"ids_dir"`
	IDsGGUF  [][]int32   `json:"ids_gguf"`
	Chat     []string    `json:"chat"`
}

// askPeer runs the reference script in the Python peers' environment.
func askPeer(t *testing.T, req peerRequest) peerAnswer {
	t.Helper()
	py := filepath.Join(testenv.PyPeers(t), "bin", "python")
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "hf_reference.py"))
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_VERBOSITY=error", "TOKENIZERS_PARALLELISM=false")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if testing.Verbose() {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_reference.py: %v\n%s", err, stderr.String())
	}
	var ans peerAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("hf_reference.py answered %q: %v\n%s", out, err, stderr.String())
	}
	return ans
}

// importF32 imports the shipped SmolLM2 GGUF file as float32 into a
// temporary directory.
func importF32(t *testing.T) (file, dir string) {
	t.Helper()
	file = testenv.SmolLM2GGUF(t)
	dir = filepath.Join(t.TempDir(), "smollm2")
	if _, err := gguf.Import(file, dir, hf.F32); err != nil {
		t.Fatal(err)
	}
	return file, dir
}

// fidelityPrompts are the texts whose log-probs and greedy continuations
// are compared: code and prose, plain and in the chat template.
var fidelityPrompts = []string{
	"def fibonacci(n):\n    if n < 2:\n        return n\n",
	"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(",
	"The capital of France is",
	"Once upon a time, in a small village by the sea,",
	"diff --git a/setup.py b/setup.py\n--- a/setup.py\n+++ b/setup.py\n@@ -1,3 +1,4 @@\n",
	"SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY",
	"Photosynthesis is the process by which plants",
	"for (int i = 0; i < 10; i++) {\n    printf(\"%d\\n\", i);",
	"<|im_start|>user\nWrite a haiku about the ocean.<|im_end|>\n<|im_start|>assistant\n",
	"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n<|im_start|>assistant\n",
	"import numpy as np\nx = np.linspace(0, 1, 100)\ny =",
	"In 1969, Neil Armstrong became the first person to",
	"class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):",
	"The quick brown fox jumps over the lazy dog. The quick brown",
	"<|im_start|>user\nFix the bug: `return a - b` should add.<|im_end|>\n<|im_start|>assistant\n",
	"Rust's ownership model guarantees memory safety without a garbage collector because",
}

// TestImportMatchesTransformers checks swerl's forward pass on the
// imported directory against transformers' own GGUF loading of the same
// file: every position's log-prob within 1e-3 and 64 greedy tokens equal.
func TestImportMatchesTransformers(t *testing.T) {
	file, dir := importF32(t)
	p, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var prompts [][]int32
	for _, s := range fidelityPrompts {
		prompts = append(prompts, p.Tokenizer.Encode(s))
	}
	const greedy = 64
	start := time.Now()
	ans := askPeer(t, peerRequest{GGUF: file, Dir: dir, Prompts: prompts, Greedy: greedy})
	t.Logf("transformers: %v", time.Since(start))
	start = time.Now()

	be := cpu.New()
	tr, err := gpu.NewScorer(p.Model, be, gpu.TrainConfig{MaxBatch: 1, MaxSeq: 256})
	if err != nil {
		t.Fatal(err)
	}
	worst, positions := 0.0, 0
	for i, ids := range prompts {
		lp, err := tr.LogProbs([]gpu.Sequence{{Prompt: ids[:1], Completion: ids[1:]}})
		if err != nil {
			t.Fatal(err)
		}
		if len(lp[0]) != len(ans.LogProbs[i]) {
			t.Fatalf("prompt %d: %d log-probs, transformers %d", i, len(lp[0]), len(ans.LogProbs[i]))
		}
		for k, want := range ans.LogProbs[i] {
			d := math.Abs(float64(lp[0][k]) - want)
			worst = max(worst, d)
			positions++
			if d > 1e-3 {
				t.Errorf("prompt %d position %d: log-prob %.6f, transformers %.6f (|Δ| %.2e)", i, k+1, lp[0][k], want, d)
			}
		}
	}
	t.Logf("%d prompts, %d positions: max |Δ log-prob| %.3g (swerl: %v)", len(prompts), positions, worst, time.Since(start))
	start = time.Now()

	s, err := gpu.NewSampler(p.Model, be, 256)
	if err != nil {
		t.Fatal(err)
	}
	for i, ids := range prompts {
		c, err := s.Sample(ids, gpu.SamplingParams{MaxTokens: greedy})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Tokens, ans.Greedy[i]) {
			got, _ := p.Tokenizer.Decode(c.Tokens)
			want, _ := p.Tokenizer.Decode(ans.Greedy[i])
			t.Errorf("prompt %d: greedy decoding differs from transformers'\n swerl:        %q\n transformers: %q", i, got, want)
		}
	}
	t.Logf("greedy decoding: %v", time.Since(start))
}

// tokenizerCorpus returns at least 2,000 lines: the repository's own Go
// code and documentation, and lines of Unicode, whitespace runs, digits
// and special tokens.
func tokenizerCorpus(t *testing.T) []string {
	t.Helper()
	root := testenv.RepoRoot(t)
	var files []string
	for _, pat := range []string{"gpu/*.go", "transforms/reward/*.go", "docs/*.md", "README.md"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		files = append(files, m...)
	}
	sort.Strings(files)
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() && len(lines) < 2200 {
			if l := sc.Text(); strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
	}
	special := []string{
		"Привет, мир! Как дела?", "日本語のテキストと漢字。", "中文分词测试：你好世界", "한국어 문장입니다.",
		"Emoji 🤖👍🏽 and flags 🇫🇷🇯🇵", "Café naïve résumé façade", "e\u0301 combining accent", "Ünïcödé ßtraße",
		"\u00a0non-breaking\u00a0spaces", "zero\u200bwidth", "Ελληνικά κείμενα", "עברית מימין לשמאל", "العربية",
		"tabs\t\tand\tspaces", "   leading spaces", "trailing spaces   ", "a  1", "x   123  y", "  42", "1 2 3 4 5",
		"3.14159 2.71828 1e-10 0xFF 1_000_000", "version 1.2.3-rc4", "2026-12-01T22:09:33Z", "$1,234.56 and 99%",
		"\tindented\n\n\nnewlines", "\r\nwindows line\r\n", "mixed \t \n whitespace", "ctrl \x04\x06\x13 chars",
		"<|im_start|>user\nhello<|im_end|>", "<|endoftext|>", "text<|im_end|>more", "<|im_start|>assistant\n",
		"<file_sep>path/to/file.py<filename>", "<repo_name>swerl", "it's they're we've I'm you'll he'd",
		"IT'S THEY'RE", "don't won't can't", "Mr. O'Neil's 'quoted' text", "`code` **bold** _it_",
		"    return x  # comment", "if (a && b || !c) { x += 1; }", "a->b::c<d>", "λx. x + 1 → ∞ ≤ ≥ ≠",
	}
	for i := 0; len(special) < 200; i++ {
		special = append(special, fmt.Sprintf("%s%d%s", strings.Repeat(" ", i%5), i*7919, strings.Repeat("\t", i%3)))
	}
	return append(lines, special...)
}

// TestTokenizerMatchesTransformers encodes the corpus with swerl's
// tokenizer of the imported directory and with transformers' tokenizer of
// the same directory: the ids must be identical. transformers' tokenizer
// built from the GGUF file itself is compared too and its differences
// counted: it drops the Digits step of tokenizer.ggml.pre "smollm"
// (llama.cpp and SmolLM2's own tokenizer.json isolate every digit), so it
// may differ on whitespace before digits.
func TestTokenizerMatchesTransformers(t *testing.T) {
	file, dir := importF32(t)
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := tokenizerCorpus(t)
	if len(lines) < 2000 {
		t.Fatalf("corpus has %d lines, want at least 2000", len(lines))
	}
	convos := chatConversations()
	ans := askPeer(t, peerRequest{GGUF: file, Dir: dir, Lines: lines, Conversations: convos})
	ggufDiffs := 0
	for i, l := range lines {
		got := tok.Encode(l)
		if !slices.Equal(got, ans.IDsDir[i]) {
			t.Errorf("line %d %q: swerl %v, transformers %v", i, l, got, ans.IDsDir[i])
		}
		if !slices.Equal(ans.IDsDir[i], ans.IDsGGUF[i]) {
			ggufDiffs++
		}
	}
	t.Logf("%d lines identical to transformers' tokenizer of the directory; transformers' tokenizer of the GGUF file differs on %d", len(lines), ggufDiffs)
	for i, c := range convos {
		got, err := tok.Chat.Render(c.Messages, c.GenerationPrompt)
		if err != nil {
			t.Fatal(err)
		}
		if got != ans.Chat[i] {
			t.Errorf("conversation %d: swerl renders %q, transformers %q", i, got, ans.Chat[i])
		}
	}
}

// chatConversations returns 20 conversations: with and without a system
// message, single and multi-turn, with and without the generation prompt.
func chatConversations() []peerConvo {
	var out []peerConvo
	users := []string{"Hi!", "Write a function that reverses a string.", "What's 2+2?", "Explain\nmultiple\nlines.", "Unicode: café 日本 🤖"}
	for i := range 20 {
		var msgs []tokenizer.Message
		if i%3 == 0 {
			msgs = append(msgs, tokenizer.Message{Role: "system", Content: fmt.Sprintf("You are assistant number %d.", i)})
		}
		for turn := 0; turn <= i%4; turn++ {
			msgs = append(msgs, tokenizer.Message{Role: "user", Content: users[(i+turn)%len(users)]})
			if turn < i%4 || i%2 == 1 {
				msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: fmt.Sprintf("Answer %d.%d", i, turn)})
			}
		}
		out = append(out, peerConvo{Messages: msgs, GenerationPrompt: i%2 == 0})
	}
	return out
}

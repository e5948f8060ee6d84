//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/cuda"
	"swerl/gpu/gputest"
)

// open returns a fresh CUDA backend. Without a usable device the test is
// skipped, or fails when REQUIRE_GPU=1 (as on the device machine). (With no
// driver at all, gorgonia.org/cu's init has already exited the process
// with status 1, which fails the run either way.)
func open(t testing.TB) *cuda.Backend {
	t.Helper()
	be, err := cuda.New()
	if err != nil {
		if os.Getenv("REQUIRE_GPU") == "1" {
			t.Fatalf("REQUIRE_GPU=1: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

func TestBackend(t *testing.T) {
	be := open(t)
	t.Logf("device %s, compute capability %d", be.Device(), be.ComputeCapability())
	gputest.TestBackend(t, be)
}

// TestBackendNaiveAttention runs the suite with the one-block-per-row
// attention kernels instead of the cuBLAS path.
func TestBackendNaiveAttention(t *testing.T) {
	t.Setenv("SWERL_CUDA_ATTN", "naive")
	gputest.TestBackend(t, open(t))
}

// TestBackendFlashAttention runs the suite with the flash kernels on (its
// Flash section checks them; the default backend skips it).
func TestBackendFlashAttention(t *testing.T) {
	t.Setenv("SWERL_CUDA_ATTN", "flash")
	gputest.TestBackend(t, open(t))
}

// TestBackendStridedAttention runs the suite with one strided-batched
// product per head (run 2's attention) instead of one call over all heads.
func TestBackendStridedAttention(t *testing.T) {
	t.Setenv("SWERL_CUDA_ATTN", "strided")
	gputest.TestBackend(t, open(t))
}

func tinyBatch() []gpu.Sequence {
	return []gpu.Sequence{
		{Prompt: []int32{1, 2, 3, 4}, Completion: []int32{5, 6, 7, 8, 9, 10}, Advantage: 1},
		{Prompt: []int32{11, 3}, Completion: []int32{12, 13, 14}, Advantage: -0.5},
		{Prompt: []int32{2, 2, 2, 2, 2}, Completion: []int32{20, 21, 22, 23, 24, 25, 26}, Advantage: 0.25},
	}
}

// TestTrainerMatchesCPU trains the tiny model for a few GRPO and SFT steps
// on the CPU and on the GPU from the same start and compares losses,
// gradient norms and the final weights; "flash" is a 64-channel-head
// variant (the flash kernels take multiples of 32) with SWERL_CUDA_ATTN=flash.
func TestTrainerMatchesCPU(t *testing.T) {
	t.Run("tiny", func(t *testing.T) { trainerMatchesCPU(t, gpu.TinyConfig()) })
	t.Run("flash", func(t *testing.T) {
		t.Setenv("SWERL_CUDA_ATTN", "flash")
		cfg := gpu.TinyConfig()
		cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 128, 2, 1
		trainerMatchesCPU(t, cfg)
	})
}

func trainerMatchesCPU(t *testing.T, cfg gpu.Config) {
	gbe := open(t)
	cbe := cpu.New()
	defer cbe.Close()
	mc, err := gpu.NewModel(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	mg, _ := gpu.NewModel(cfg, 3)
	tc := gpu.TrainConfig{MaxBatch: 4, MaxSeq: 16, LR: 1e-3}
	trc, err := gpu.NewTrainer(mc, cbe, tc)
	if err != nil {
		t.Fatal(err)
	}
	trg, err := gpu.NewTrainer(mg, gbe, tc)
	if err != nil {
		t.Fatal(err)
	}
	batch := tinyBatch()
	stepBoth(t, trc, trg, batch)
	ref := make([]float64, 0)
	for _, tn := range mc.Tensors() {
		for _, v := range tn.Data {
			ref = append(ref, float64(v))
		}
	}
	got := make([]float32, 0, len(ref))
	for _, tn := range mg.Tensors() {
		got = append(got, tn.Data...)
	}
	if ok, msg := gputest.Close(got, ref, 1e-4); !ok {
		t.Errorf("weights after 4 steps: %s", msg)
	}
	sameLogProbs(t, trc, trg, batch, 1e-4)
}

// TestSamplerMatchesCPU: greedy and seeded sampling give the CPU's tokens
// and log-probs.
func TestSamplerMatchesCPU(t *testing.T) {
	gbe := open(t)
	cbe := cpu.New()
	defer cbe.Close()
	m, err := gpu.NewModel(gpu.TinyConfig(), 9)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := gpu.NewSampler(m, cbe, 48)
	if err != nil {
		t.Fatal(err)
	}
	sg, err := gpu.NewSampler(m, gbe, 48)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	for _, p := range []gpu.SamplingParams{{MaxTokens: 30}, {Temperature: 1, TopK: 20, Seed: 5, MaxTokens: 30}} {
		a, err := sc.Sample(prompt, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sg.Sample(prompt, p)
		if err != nil {
			t.Fatal(err)
		}
		sameCompletion(t, fmt.Sprintf("%+v", p), a, b)
	}
}

// TestMatmulBF16 checks the bf16 and tf32 modes against the CPU's float32
// product within the rounding of their operands (relative 1e-2).
func TestMatmulBF16(t *testing.T) {
	be := open(t)
	cbe := cpu.New()
	defer cbe.Close()
	r := rand.New(rand.NewPCG(3, 4))
	const N, C, OC = 67, 300, 129
	vals := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	inp, w, bias, dout := vals(N*C), vals(OC*C), vals(OC), vals(N*OC)
	run := func(b gpu.Backend) (out, dinp, dw []float32) {
		up := func(x []float32) gpu.Buf {
			buf, err := b.Alloc(len(x))
			if err != nil {
				t.Fatal(err)
			}
			b.Upload(buf, x)
			return buf
		}
		ib, wb, bb, db := up(inp), up(w), up(bias), up(dout)
		ob, _ := b.Alloc(N * OC)
		dib, _ := b.Alloc(N * C)
		dwb, _ := b.Alloc(OC * C)
		b.MatmulForward(ob, ib, wb, bb, N, C, OC)
		b.MatmulBackward(dib, dwb, nil, db, ib, wb, N, C, OC)
		out, dinp, dw = make([]float32, N*OC), make([]float32, N*C), make([]float32, OC*C)
		for _, p := range []struct {
			dst []float32
			src gpu.Buf
		}{{out, ob}, {dinp, dib}, {dw, dwb}} {
			if err := b.Download(p.dst, p.src); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	ro, rdi, rdw := run(cbe)
	for _, mode := range []string{"bf16", "tf32"} {
		if err := be.SetMatmul(mode); err != nil {
			t.Fatal(err)
		}
		o, di, dw := run(be)
		for _, c := range []struct {
			name      string
			got, want []float32
		}{{"out", o, ro}, {"dinp", di, rdi}, {"dw", dw, rdw}} {
			if ok, msg := gputest.Close(c.got, widen(c.want), 1e-2); !ok {
				t.Errorf("%s %s: %s", mode, c.name, msg)
			}
		}
	}
	if err := be.SetMatmul("fp8"); err == nil {
		t.Error(`SetMatmul("fp8") = nil, want an error`)
	}
	// Packed weights (bf16 mode only) give MatmulForward's bf16 product.
	if err := be.SetMatmul("bf16"); err != nil {
		t.Fatal(err)
	}
	o16, _, _ := run(be)
	n := be.PackedLen(OC, C)
	if n != (OC*C+1)/2 {
		t.Fatalf("PackedLen = %d in bf16 mode, want %d", n, (OC*C+1)/2)
	}
	up := func(x []float32) gpu.Buf {
		b, err := be.Alloc(len(x))
		if err != nil {
			t.Fatal(err)
		}
		be.Upload(b, x)
		return b
	}
	wp, _ := be.Alloc(n)
	be.PackWeight(wp, up(w), OC, C)
	ob, _ := be.Alloc(N * OC)
	be.MatmulPacked(ob, up(inp), wp, up(bias), N, C, OC)
	got := make([]float32, N*OC)
	if err := be.Download(got, ob); err != nil {
		t.Fatal(err)
	}
	if ok, msg := gputest.Close(got, widen(o16), 1e-6); !ok {
		t.Errorf("packed vs plain bf16 product: %s", msg)
	}
	if err := be.SetMatmul("f32"); err != nil {
		t.Fatal(err)
	}
	if n := be.PackedLen(OC, C); n != 0 {
		t.Errorf("PackedLen = %d in f32 mode, want 0 (no packing)", n)
	}
}

func widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// TestBatchSamplerMatchesCPU: many sequences decoded together on the GPU
// (one KV cache for all slots, the ragged row ops, slots reused as
// sequences finish) give the tokens and log-probs of the CPU's sampler.
func TestBatchSamplerMatchesCPU(t *testing.T) {
	gbe := open(t)
	cbe := cpu.New()
	defer cbe.Close()
	m, err := gpu.NewModel(gpu.TinyConfig(), 9)
	if err != nil {
		t.Fatal(err)
	}
	var prompts [][]int32
	var ps []gpu.SamplingParams
	for i := range 12 {
		p := make([]int32, 1+(i*7)%13)
		for j := range p {
			p[j] = int32((i*31 + j*17) % m.Config.VocabSize)
		}
		sp := gpu.SamplingParams{MaxTokens: 5 + i*3}
		if i%2 == 1 {
			sp = gpu.SamplingParams{Temperature: 1, TopK: 20, Seed: uint64(i), MaxTokens: 40 - i}
		}
		prompts, ps = append(prompts, p), append(ps, sp)
	}
	sample := func(be gpu.Backend) []gpu.Completion {
		s, err := gpu.NewBatchSampler(m, be, 64, 5)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := s.SampleAll(prompts, ps)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	want, got := sample(cbe), sample(gbe)
	for i := range want {
		sameCompletion(t, fmt.Sprintf("request %d %+v", i, ps[i]), want[i], got[i])
	}
}

// sameCompletion fails unless the CUDA completion has the CPU's tokens
// and, within 1e-4, its log-probs.
func sameCompletion(t *testing.T, what string, cpu, cuda gpu.Completion) {
	t.Helper()
	if !slices.Equal(cpu.Tokens, cuda.Tokens) {
		t.Errorf("%s: cpu %v\ncuda %v", what, cpu.Tokens, cuda.Tokens)
		return
	}
	for i := range cpu.LogProbs {
		if d := math.Abs(float64(cpu.LogProbs[i] - cuda.LogProbs[i])); d > 1e-4 {
			t.Errorf("%s: logprob %d cpu %v cuda %v", what, i, cpu.LogProbs[i], cuda.LogProbs[i])
		}
	}
}

// stepBoth takes four steps (GRPO and SFT in turn) on the CPU trainer trc
// and the CUDA trainer trg, compares losses and gradient norms, and syncs
// trg's weights to its host model.
func stepBoth(t *testing.T, trc, trg *gpu.Trainer, batch []gpu.Sequence) {
	t.Helper()
	for step := range 4 {
		f := (*gpu.Trainer).Step
		if step%2 == 1 {
			f = (*gpu.Trainer).SFTStep
		}
		a, err := f(trc, batch)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f(trg, batch)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(a.Loss - b.Loss); d > 1e-4*(1+math.Abs(a.Loss)) {
			t.Errorf("step %d: loss cpu %v cuda %v", step, a.Loss, b.Loss)
		}
		if d := math.Abs(a.GradNorm - b.GradNorm); d > 1e-3*(1+a.GradNorm) {
			t.Errorf("step %d: grad norm cpu %v cuda %v", step, a.GradNorm, b.GradNorm)
		}
	}
	if err := trg.SyncHost(); err != nil {
		t.Fatal(err)
	}
}

// sameLogProbs fails unless the CPU trainer trc and the CUDA trainer trg
// give batch's log-probabilities within tol.
func sameLogProbs(t *testing.T, trc, trg *gpu.Trainer, batch []gpu.Sequence, tol float64) {
	t.Helper()
	lpc, err := trc.LogProbs(batch)
	if err != nil {
		t.Fatal(err)
	}
	lpg, err := trg.LogProbs(batch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lpc {
		for j := range lpc[i] {
			if d := math.Abs(float64(lpc[i][j] - lpg[i][j])); d > tol {
				t.Errorf("sequence %d token %d: log-prob cpu %v cuda %v", i, j, lpc[i][j], lpg[i][j])
			}
		}
	}
}

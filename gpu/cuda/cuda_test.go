//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
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
	o, err := cuda.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cuda.New(o)
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

// TestBackendEagerZero runs the suite with SWERL_CUDA_ZERO=now: Zero
// clears its range at once (the default, lazy, leaves it to the next op
// that touches it, and TestBackend runs that).
func TestBackendEagerZero(t *testing.T) {
	t.Setenv("SWERL_CUDA_ZERO", "now")
	gputest.TestBackend(t, open(t))
}

// TestTrainerLazyZero trains the tiny model with and without lazy zeroing
// (with and without checkpointing, in f32 and in bf16, where the mma
// attention's dq takes its pending zero, and with the pipe attention,
// whose dq takes it before dk's and dv's settle) on two backends side by
// side: the same losses, gradient norms and weights to float32 rounding.
func TestTrainerLazyZero(t *testing.T) {
	for _, run := range []struct {
		mm, attn string
		ckpt     bool
	}{{"f32", "", false}, {"f32", "", true}, {"bf16", "", false}, {"bf16", "", true}, {"bf16", "pipe", false}, {"bf16", "pipe", true}} {
		ckpt := run.ckpt
		t.Setenv("SWERL_CUDA_MATMUL", run.mm)
		t.Setenv("SWERL_CUDA_ATTN", run.attn)
		var trs [2]*gpu.Trainer
		var ms [2]*gpu.Model
		for i, mode := range []string{"now", "lazy"} {
			t.Setenv("SWERL_CUDA_ZERO", mode)
			be := open(t)
			m, err := gpu.NewModel(gpu.TinyConfig(), 3)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 4, MaxSeq: 16, LR: 1e-2, Checkpoint: ckpt})
			if err != nil {
				t.Fatal(err)
			}
			trs[i], ms[i] = tr, m
		}
		batch := tinyBatch()
		for step := range 4 {
			f := (*gpu.Trainer).Step
			if step%2 == 1 {
				f = (*gpu.Trainer).SFTStep
			}
			a, err := f(trs[0], batch)
			if err != nil {
				t.Fatal(err)
			}
			b, err := f(trs[1], batch)
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(a.Loss - b.Loss); d > 1e-5*(1+math.Abs(a.Loss)) || math.Abs(a.GradNorm-b.GradNorm) > 1e-4*(1+a.GradNorm) {
				t.Errorf("%s %s, checkpointing %v, step %d: zeroing now: loss %v grad norm %v; lazily: %v, %v", run.mm, run.attn, ckpt, step, a.Loss, a.GradNorm, b.Loss, b.GradNorm)
			}
		}
		for _, tr := range trs {
			if err := tr.SyncHost(); err != nil {
				t.Fatal(err)
			}
		}
		sameWeights(t, ms[0], ms[1], 1e-5)
	}
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
// gradient norms and the final weights.
func TestTrainerMatchesCPU(t *testing.T) {
	t.Run("tiny", func(t *testing.T) { trainerMatchesCPU(t, gpu.TinyConfig()) })
}

func trainerMatchesCPU(t *testing.T, cfg gpu.Config) {
	mc, mg, trc, trg := trainerPair(t, cfg)
	batch := tinyBatch()
	stepBoth(t, trc, trg, batch)
	sameWeights(t, mc, mg, 1e-4)
	sameLogProbs(t, trc, trg, batch, 1e-4)
}

// trainerPair returns two copies of a model of cfg and a Trainer of each,
// one on the CPU (the reference) and one on a fresh CUDA backend.
func trainerPair(t *testing.T, cfg gpu.Config) (mc, mg *gpu.Model, trc, trg *gpu.Trainer) {
	t.Helper()
	gbe := open(t)
	cbe := cpu.New()
	t.Cleanup(func() { cbe.Close() })
	mc, err := gpu.NewModel(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	mg, _ = gpu.NewModel(cfg, 3)
	tc := gpu.TrainConfig{MaxBatch: 4, MaxSeq: 16, LR: 1e-3}
	if trc, err = gpu.NewTrainer(mc, cbe, tc); err != nil {
		t.Fatal(err)
	}
	if trg, err = gpu.NewTrainer(mg, gbe, tc); err != nil {
		t.Fatal(err)
	}
	return mc, mg, trc, trg
}

// sameWeights fails unless the CUDA-trained model mg (synced to the host)
// has the CPU-trained mc's weights within tol.
func sameWeights(t *testing.T, mc, mg *gpu.Model, tol float64) {
	t.Helper()
	var ref []float64
	for _, tn := range mc.Tensors() {
		ref = append(ref, widen(tn.Data)...)
	}
	var got []float32
	for _, tn := range mg.Tensors() {
		got = append(got, tn.Data...)
	}
	if ok, msg := gputest.Close(got, ref, tol); !ok {
		t.Errorf("weights after training: %s", msg)
	}
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
	vals := func(n int) []float32 { return normals(r, n) }
	inp, w, bias, dout := vals(N*C), vals(OC*C), vals(OC), vals(N*OC)
	run := func(b gpu.Backend) (out, dinp, dw []float32) {
		up := func(x []float32) gpu.Buf { return upload(t, b, x) }
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
	// A frozen upload (bf16 only in the bf16 mode) gives MatmulForward's
	// bf16 product, forward and backward, without converting the weights.
	if err := be.SetMatmul("bf16"); err != nil {
		t.Fatal(err)
	}
	o16, di16, _ := run(be)
	up := func(x []float32) gpu.Buf { return upload(t, be, x) }
	wf, err := be.UploadFrozen(w)
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := be.Alloc(N * OC)
	dib, _ := be.Alloc(N * C)
	ib := up(inp)
	be.MatmulForward(ob, ib, wf, up(bias), N, C, OC)
	be.MatmulBackward(dib, nil, nil, up(dout), ib, wf, N, C, OC)
	got, gotDi := make([]float32, N*OC), make([]float32, N*C)
	if err := be.Download(got, ob); err != nil {
		t.Fatal(err)
	}
	if err := be.Download(gotDi, dib); err != nil {
		t.Fatal(err)
	}
	if ok, msg := gputest.Close(got, widen(o16), 1e-6); !ok {
		t.Errorf("frozen vs converted bf16 weights, out: %s", msg)
	}
	if ok, msg := gputest.Close(gotDi, widen(di16), 1e-6); !ok {
		t.Errorf("frozen vs converted bf16 weights, dinp: %s", msg)
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
	// tiny's 16-channel heads take attn_rows; gqa's 64-channel heads, 7
	// to a kv head (as Qwen2.5's), take attn_rows_gqa.
	gqa := gpu.TinyConfig()
	gqa.HiddenSize, gqa.NumAttentionHeads, gqa.NumKeyValueHeads = 448, 7, 1
	for _, c := range []struct {
		name string
		cfg  gpu.Config
	}{{"tiny", gpu.TinyConfig()}, {"gqa", gqa}} {
		t.Run(c.name, func(t *testing.T) { batchSamplerMatchesCPU(t, c.cfg) })
	}
}

func batchSamplerMatchesCPU(t *testing.T, cfg gpu.Config) {
	gbe := open(t)
	cbe := cpu.New()
	defer cbe.Close()
	m, err := gpu.NewModel(cfg, 9)
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
	sample := func(be gpu.Backend, ps []gpu.SamplingParams) []gpu.Completion {
		return gputest.SampleAll(t, m, be, 5, prompts, ps)
	}
	// Mixed: the logits come to the CPU pickers. All greedy: the CUDA
	// backend picks on the device (gpu.GreedyPicker).
	greedy := make([]gpu.SamplingParams, len(ps))
	for i := range greedy {
		greedy[i] = gpu.SamplingParams{MaxTokens: ps[i].MaxTokens}
	}
	for _, ps := range [][]gpu.SamplingParams{ps, greedy} {
		want, got := sample(cbe, ps), sample(gbe, ps)
		for i := range want {
			sameCompletion(t, fmt.Sprintf("request %d %+v", i, ps[i]), want[i], got[i])
		}
	}
}

// TestPickGreedy checks the device's greedy picks against a float64 scan:
// the first largest logit (ties to the lowest id, NaN never) and its
// log-softmax, on rows of the 0.5B model's vocabulary.
func TestPickGreedy(t *testing.T) {
	be := open(t)
	r := rand.New(rand.NewPCG(5, 6))
	const rows, V = 7, 151936
	l := make([]float32, rows*V)
	for i := range l {
		l[i] = float32(4 * r.NormFloat64())
	}
	l[1*V+100], l[1*V+90000] = 40, 40 // a tie: id 100
	l[2*V+5] = float32(math.NaN())
	l[2*V+6] = 3e38 // past NaN: a large finite logit wins
	for j := range V {
		if j%3 != 0 {
			l[3*V+j] = float32(math.Inf(-1))
		}
	}
	l[4*V+V-1] = 1000 // the last id
	lb, err := be.Alloc(len(l))
	if err != nil {
		t.Fatal(err)
	}
	be.Upload(lb, l)
	tok, logp := make([]int32, rows), make([]float32, rows)
	if err := be.PickGreedy(lb, rows, V, tok, logp); err != nil {
		t.Fatal(err)
	}
	for n := range rows {
		row := l[n*V : (n+1)*V]
		best, mx := 0, math.Inf(-1)
		for i, v := range row {
			if float64(v) > mx {
				best, mx = i, float64(v)
			}
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		want := float32(float64(row[best]) - (mx + math.Log(z)))
		if int(tok[n]) != best {
			t.Errorf("row %d: token %d, want %d", n, tok[n], best)
		}
		if d := math.Abs(float64(logp[n] - want)); d > 1e-6 || math.IsNaN(float64(logp[n])) != math.IsNaN(float64(want)) {
			t.Errorf("row %d: log-prob %v, want %v", n, logp[n], want)
		}
	}
	if err := be.PickGreedy(lb, rows+1, V, make([]int32, rows+1), make([]float32, rows+1)); err == nil {
		t.Error("PickGreedy over more rows than the logits hold: no error")
	}
}

// TestKeepBF16 checks that products reading weights from the kept bf16
// copy equal those converting the same float32 weights at every product
// after AdamW updates the copy and after Upload, Copy, Axpy and Zero leave
// it stale: bitwise at windows aligned as the Trainer's tensors are (cuBLAS
// picks its kernels by alignment too), to rounding at an unaligned one.
func TestKeepBF16(t *testing.T) {
	be := open(t)
	if err := be.SetMatmul("bf16"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	const N, C, OC, pad = 33, 64, 40, 128
	vals := func(n int) []float32 { return normals(r, n) }
	up := func(x []float32) gpu.Buf { return upload(t, be, x) }
	w := vals(pad + 2*OC*C)
	kept, plain := up(w), up(w) // the same weights, one of them kept in bf16
	if err := be.KeepBF16(be.Slice(kept, 0, 5)); err == nil {
		t.Error("KeepBF16 of a window: no error")
	}
	if err := be.KeepBF16(kept); err != nil {
		t.Fatal(err)
	}
	x, dout := up(vals(N*C)), up(vals(N*OC))
	g, m1, v1, m2, v2 := up(vals(len(w))), up(make([]float32, len(w))), up(make([]float32, len(w))), up(make([]float32, len(w))), up(make([]float32, len(w)))
	check := func(stage string) {
		t.Helper()
		for _, off := range []int{pad, pad + OC*C, 3} {
			res := [2][]float32{}
			for i, wb := range []gpu.Buf{kept, plain} {
				ob, _ := be.Alloc(N * OC)
				dib, _ := be.Alloc(N * C)
				ww := be.Slice(wb, off, OC*C)
				be.MatmulForward(ob, x, ww, nil, N, C, OC)
				be.MatmulBackward(dib, nil, nil, dout, x, ww, N, C, OC)
				res[i] = make([]float32, N*OC+N*C)
				if err := be.Download(res[i][:N*OC], ob); err != nil {
					t.Fatal(err)
				}
				if err := be.Download(res[i][N*OC:], dib); err != nil {
					t.Fatal(err)
				}
				be.Free(ob)
				be.Free(dib)
			}
			if off%pad == 0 {
				if !slices.Equal(res[0], res[1]) {
					t.Errorf("%s, window at %d: products with the kept bf16 copy differ from converting the weights", stage, off)
				}
			} else if ok, msg := gputest.Close(res[0], widen(res[1]), 1e-5); !ok {
				t.Errorf("%s, window at %d: kept bf16 copy vs converting: %s", stage, off, msg)
			}
		}
	}
	check("fresh")
	for _, p := range []struct{ w, m, v gpu.Buf }{{kept, m1, v1}, {plain, m2, v2}} {
		for _, win := range [][2]int{{0, 3}, {3, pad - 3}, {pad, OC * C}, {pad + OC*C, OC * C}} {
			sl := func(b gpu.Buf) gpu.Buf { return be.Slice(b, win[0], win[1]) }
			be.AdamW(sl(p.w), sl(g), sl(p.m), sl(p.v), win[1], gpu.AdamWParams{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1, GradScale: 1, Step: 1})
		}
	}
	check("after AdamW")
	nw := vals(len(w))
	be.Upload(kept, nw)
	be.Upload(plain, nw)
	check("after Upload")
	src := up(vals(OC * C))
	for _, b := range []gpu.Buf{kept, plain} {
		be.Copy(be.Slice(b, pad, OC*C), src)
	}
	check("after Copy")
	for _, b := range []gpu.Buf{kept, plain} {
		be.Axpy(be.Slice(b, pad+OC*C, OC*C), src, 0.5, OC*C)
	}
	check("after Axpy")
	for _, b := range []gpu.Buf{kept, plain} {
		be.Zero(be.Slice(b, pad, OC*C))
	}
	check("after Zero")
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
}

// sameCompletion fails unless the CUDA completion has the CPU's tokens
// and, within 1e-4, its log-probs.
func sameCompletion(t *testing.T, what string, cpu, cuda gpu.Completion) {
	t.Helper()
	gputest.SameCompletion(t, what, "cpu", "cuda", cpu, cuda, 1e-4)
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

// TestFlashTC checks the tensor-core flash attentions (SWERL_CUDA_ATTN=mma
// and =pipe: mma.sync with the softmax in registers, and for heads over 64
// channels flash_tc_dkv's WMMA dk/dv) against a float64 forward (out and
// lse) and the float32 cuBLAS backward (dq, dk, dv), within bf16's
// precision: partial tiles, GQA, every supported head size class, and dv
// alone (dk to scratch).
func TestFlashTC(t *testing.T) {
	be := open(t)
	r := rand.New(rand.NewPCG(9, 10))
	const tol = 3e-2
	up := func(x []float32) gpu.Buf { return upload(t, be, x) }
	vals := func(n int) []float32 { return normals(r, n) }
	down := func(b gpu.Buf, n int) []float32 { return fetch(t, be, b, n) }
	expect := func(t *testing.T, name string, got []float32, want []float64) {
		t.Helper()
		if ok, msg := gputest.Close(got, want, tol); !ok {
			t.Errorf("%s: %s", name, msg)
		}
	}
	for _, sh := range []struct{ B, T, NH, NKV, HS int }{
		{1, 5, 2, 1, 32}, {1, 35, 2, 1, 32}, {2, 70, 4, 2, 64}, {1, 9, 4, 2, 16}, {1, 130, 14, 2, 64}, {1, 100, 4, 2, 128}, {1, 64, 3, 1, 96},
	} {
		B, T, NH, NKV, HS := sh.B, sh.T, sh.NH, sh.NKV, sh.HS
		t.Run(fmt.Sprintf("B=%d,T=%d,NH=%d,NKV=%d,HS=%d", B, T, NH, NKV, HS), func(t *testing.T) {
			nq, nkv := B*T*NH*HS, B*T*NKV*HS
			q, k, v, dout := vals(nq), vals(nkv), vals(nkv), vals(nq)
			qB, kB, vB, dB := up(q), up(k), up(v), up(dout)
			// float64 reference forward.
			scale := 1 / math.Sqrt(float64(HS))
			wantOut, wantLSE := make([]float64, nq), make([]float64, B*NH*T)
			for b := range B {
				for h := range NH {
					kh := h / (NH / NKV)
					for i := range T {
						s := make([]float64, i+1)
						mx := math.Inf(-1)
						for j := range s {
							for c := range HS {
								s[j] += float64(q[((b*T+i)*NH+h)*HS+c]) * float64(k[((b*T+j)*NKV+kh)*HS+c])
							}
							s[j] *= scale
							mx = max(mx, s[j])
						}
						var z float64
						for j := range s {
							s[j] = math.Exp(s[j] - mx)
							z += s[j]
						}
						wantLSE[(b*NH+h)*T+i] = mx + math.Log(z)
						for j := range s {
							for c := range HS {
								wantOut[((b*T+i)*NH+h)*HS+c] += s[j] / z * float64(v[((b*T+j)*NKV+kh)*HS+c])
							}
						}
					}
				}
			}
			// The float32 cuBLAS backward.
			if err := be.SetMatmul("f32"); err != nil {
				t.Fatal(err)
			}
			if err := be.SetAttention("cublas"); err != nil {
				t.Fatal(err)
			}
			out, att, datt := up(make([]float32, nq)), up(make([]float32, B*NH*T*T)), up(make([]float32, B*NH*T*T))
			be.AttentionForward(out, att, qB, kB, vB, B, T, T, NH, NKV, HS)
			dq, dk, dv := up(make([]float32, nq)), up(make([]float32, nkv)), up(make([]float32, nkv))
			be.AttentionBackward(dq, dk, dv, datt, dB, qB, kB, vB, att, B, T, T, NH, NKV, HS)
			widen := func(b gpu.Buf, n int) []float64 { return widen(down(b, n)) }
			wdq, wdk, wdv := widen(dq, nq), widen(dk, nkv), widen(dv, nkv)

			for _, mode := range []string{"mma", "pipe"} {
				t.Run(mode, func(t *testing.T) {
					if err := be.SetAttention(mode); err != nil {
						t.Fatal(err)
					}
					if !be.FlashSupported(NH, NKV, HS) {
						t.Fatalf("FlashSupported(%d, %d, %d) = false in %s mode", NH, NKV, HS, mode)
					}
					fout, lse, delta := up(vals(nq)), up(vals(B*NH*T)), up(make([]float32, B*NH*T)) // garbage in: overwritten
					be.AttentionForwardLSE(fout, lse, qB, kB, vB, B, T, NH, NKV, HS)
					expect(t, "out", down(fout, nq), wantOut)
					expect(t, "lse", down(lse, B*NH*T), wantLSE)
					fdq, fdk, fdv := up(vals(nq)), up(vals(nkv)), up(vals(nkv))
					base := [3][]float32{down(fdq, nq), down(fdk, nkv), down(fdv, nkv)} // backward adds to what is there
					be.AttentionBackwardLSE(fdq, fdk, fdv, delta, dB, fout, qB, kB, vB, lse, B, T, NH, NKV, HS)
					for i, c := range []struct {
						name string
						got  gpu.Buf
						want []float64
					}{{"dq", fdq, wdq}, {"dk", fdk, wdk}, {"dv", fdv, wdv}} {
						got := down(c.got, len(c.want))
						for j := range got {
							got[j] -= base[i][j]
						}
						expect(t, c.name, got, c.want)
					}
					odv := up(make([]float32, nkv))
					be.AttentionBackwardLSE(nil, nil, odv, delta, dB, fout, qB, kB, vB, lse, B, T, NH, NKV, HS)
					expect(t, "dv alone", down(odv, nkv), wdv)
					if err := be.Err(); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
	for _, mode := range []string{"mma", "pipe"} {
		if err := be.SetAttention(mode); err != nil {
			t.Fatal(err)
		}
		if be.FlashSupported(4, 2, 40) {
			t.Errorf("%s mode accepts head size 40 (not a multiple of 16)", mode)
		}
	}
}

// TestTrainerBF16 trains the tiny model on bf16 tensor cores (weights read
// from the bf16 copy AdamW keeps), with the cuBLAS and the tensor-core
// flash attentions, beside the CPU's float32: losses, log-probs and
// weights agree within bf16's precision after four steps.
func TestTrainerBF16(t *testing.T) {
	for _, attn := range []string{"cublas", "mma", "pipe"} {
		t.Run(attn, func(t *testing.T) {
			t.Setenv("SWERL_CUDA_ATTN", attn)
			t.Setenv("SWERL_CUDA_MATMUL", "bf16")
			cfg := gpu.TinyConfig()
			cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 128, 2, 1
			mc, mg, trc, trg := trainerPair(t, cfg)
			batch := tinyBatch()
			for step := range 4 {
				a, err := trc.Step(batch)
				if err != nil {
					t.Fatal(err)
				}
				b, err := trg.Step(batch)
				if err != nil {
					t.Fatal(err)
				}
				if d := math.Abs(a.Loss - b.Loss); d > 2e-2*(1+math.Abs(a.Loss)) {
					t.Errorf("step %d: loss cpu %v cuda bf16 %v", step, a.Loss, b.Loss)
				}
			}
			if err := trg.SyncHost(); err != nil {
				t.Fatal(err)
			}
			sameWeights(t, mc, mg, 1e-2)
			sameLogProbs(t, trc, trg, batch, 5e-2)
		})
	}
}

// TestHalfReuse: consecutive bf16 products of one input convert it once;
// the products equal those with the chain broken by another op between
// them (each converting anew), bitwise, and an input changed between two
// products is converted again.
func TestHalfReuse(t *testing.T) {
	be := open(t)
	if err := be.SetMatmul("bf16"); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	const N, C, OC = 19, 48, 32
	up := func(n int) gpu.Buf { return upload(t, be, normals(r, n)) }
	x, w1, w2, w3, other, dout := up(N*C), up(OC*C), up(OC*C), up(OC*C), up(8), up(N*OC)
	get := func(b gpu.Buf, n int) []float32 { return fetch(t, be, b, n) }
	run := func(broken bool) [][]float32 {
		var outs [][]float32
		gap := func() {
			if broken {
				be.Zero(other)
			}
		}
		// Alloc is an op too: every buffer first.
		o, dx, dw := make([]gpu.Buf, 3), make([]gpu.Buf, 3), make([]gpu.Buf, 3)
		for i := range 3 {
			o[i], _ = be.Alloc(N * OC)
			dx[i], _ = be.Alloc(N * C)
			dw[i], _ = be.Alloc(OC * C)
		}
		for i, w := range []gpu.Buf{w1, w2, w3} {
			gap()
			be.MatmulForward(o[i], x, w, nil, N, C, OC)
		}
		for i, w := range []gpu.Buf{w1, w2, w3} {
			gap()
			be.MatmulBackward(dx[i], dw[i], nil, dout, x, w, N, C, OC)
		}
		for i := range 3 {
			outs = append(outs, get(o[i], N*OC), get(dx[i], N*C), get(dw[i], OC*C))
		}
		return outs
	}
	chained, broken := run(false), run(true)
	for i := range chained {
		if !slices.Equal(chained[i], broken[i]) {
			t.Errorf("result %d: consecutive products differ from products converting anew", i)
		}
	}
	// An input changed between two products is converted again.
	o1, _ := be.Alloc(N * OC)
	o2, _ := be.Alloc(N * OC)
	be.MatmulForward(o1, x, w1, nil, N, C, OC)
	be.Zero(x)
	be.MatmulForward(o2, x, w1, nil, N, C, OC)
	for i, v := range get(o2, N*OC) {
		if v != 0 {
			t.Fatalf("product of a zeroed input: element %d = %v, want 0 (a stale conversion reused)", i, v)
		}
	}
}

// TestAttentionBF16 checks the cuBLAS attention with bf16 operands (the
// bf16 matmul mode) against the same ops in float32, within bf16's
// precision: GQA and not, Tq < Tk, and the probabilities it keeps.
func TestAttentionBF16(t *testing.T) {
	be := open(t)
	r := rand.New(rand.NewPCG(13, 14))
	up := func(n int) (gpu.Buf, []float32) {
		x := normals(r, n)
		return upload(t, be, x), x
	}
	get := func(b gpu.Buf, n int) []float32 { return fetch(t, be, b, n) }
	for _, sh := range []struct{ B, Tq, Tk, NH, NKV, HS int }{
		{2, 37, 37, 14, 2, 64}, {1, 9, 21, 4, 4, 32}, {3, 16, 16, 6, 3, 16}, {1, 130, 130, 4, 1, 128},
	} {
		B, Tq, Tk, NH, NKV, HS := sh.B, sh.Tq, sh.Tk, sh.NH, sh.NKV, sh.HS
		t.Run(fmt.Sprintf("B=%d,Tq=%d,Tk=%d,NH=%d,NKV=%d,HS=%d", B, Tq, Tk, NH, NKV, HS), func(t *testing.T) {
			nq, nkv, na := B*Tq*NH*HS, B*Tk*NKV*HS, B*NH*Tq*Tk
			q, _ := up(nq)
			k, _ := up(nkv)
			v, _ := up(nkv)
			dout, _ := up(nq)
			run := func(mode string) [][]float32 {
				if err := be.SetMatmul(mode); err != nil {
					t.Fatal(err)
				}
				out, _ := up(nq)
				att, _ := up(na)
				datt, _ := up(na)
				dq, dq0 := up(nq)
				dk, dk0 := up(nkv)
				dv, dv0 := up(nkv)
				be.AttentionForward(out, att, q, k, v, B, Tq, Tk, NH, NKV, HS)
				be.AttentionBackward(dq, dk, dv, datt, dout, q, k, v, att, B, Tq, Tk, NH, NKV, HS)
				res := [][]float32{get(out, nq), get(att, na), get(dq, nq), get(dk, nkv), get(dv, nkv)}
				for i, base := range [][]float32{dq0, dk0, dv0} { // the backward adds
					for j := range base {
						res[2+i][j] -= base[j]
					}
				}
				return res
			}
			want, got := run("f32"), run("bf16")
			for i, name := range []string{"out", "att", "dq", "dk", "dv"} {
				if ok, msg := gputest.Close(got[i], widen(want[i]), 2e-2); !ok {
					t.Errorf("%s: %s", name, msg)
				}
			}
		})
	}
}

// normals returns n draws of N(0,1) from r.
func normals(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// upload copies x into a new buffer of be.
func upload(t testing.TB, be gpu.Backend, x []float32) gpu.Buf {
	t.Helper()
	b, err := be.Alloc(max(len(x), 1))
	if err != nil {
		t.Fatal(err)
	}
	be.Upload(b, x)
	return b
}

// fetch downloads n elements of b.
func fetch(t testing.TB, be gpu.Backend, b gpu.Buf, n int) []float32 {
	t.Helper()
	x := make([]float32, n)
	if err := be.Download(x, b); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestAdamWGroups updates 1100 groups of 0 to 37 elements (three
// launches of up to 512 groups, groups ending inside a four-element
// load, decay on every third) in one AdamWGroups call and again with one
// AdamW call a group: the same weights and moments. Groups that leave a
// gap are refused, naming the group.
func TestAdamWGroups(t *testing.T) {
	be := open(t)
	var groups []gpu.AdamWGroup
	n := 0
	for i := range 1100 {
		sz := (i * 7) % 38
		groups = append(groups, gpu.AdamWGroup{Off: n, N: sz, Decay: i%3 == 0})
		n += sz
	}
	rng := rand.New(rand.NewPCG(1, 2))
	init := make([][]float32, 4)
	for j := range init {
		init[j] = make([]float32, n)
		for i := range init[j] {
			init[j][i] = float32(rng.NormFloat64())
			if j == 3 {
				init[j][i] *= init[j][i] // v is not negative
			}
		}
	}
	set := func() [4]gpu.Buf {
		var b [4]gpu.Buf
		for j := range b {
			var err error
			if b[j], err = be.Alloc(n); err != nil {
				t.Fatal(err)
			}
			be.Upload(b[j], init[j])
		}
		return b
	}
	h := gpu.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, GradScale: 0.5, Step: 3}
	a, b := set(), set() // p, g, m, v
	be.AdamWGroups(a[0], a[1], a[2], a[3], groups, h)
	for _, gr := range groups {
		hg := h
		if !gr.Decay {
			hg.WeightDecay = 0
		}
		w := func(x gpu.Buf) gpu.Buf { return be.Slice(x, gr.Off, gr.N) }
		be.AdamW(w(b[0]), w(b[1]), w(b[2]), w(b[3]), gr.N, hg)
	}
	for _, j := range []int{0, 2, 3} {
		got, want := make([]float32, n), make([]float32, n)
		be.Download(got, a[j])
		be.Download(want, b[j])
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
		if ok, msg := gputest.Close(got, widen(want), 1e-6); !ok {
			t.Errorf("%s: grouped against one call a group: %s", []string{"p", "g", "m", "v"}[j], msg)
		}
	}
	groups[5].Off++
	be.AdamWGroups(a[0], a[1], a[2], a[3], groups, h)
	if err := be.Err(); err == nil || !strings.Contains(err.Error(), "group 5") {
		t.Errorf("groups with a gap: error %v, want one naming group 5", err)
	}
}

// TestFused decodes and trains with SWERL_CUDA_FUSE=0 beside the default
// (fused) on a model with nonzero q, k and v biases, with an intermediate
// size that is a multiple of 4 (the SwiGLU kernels' vector path) and one
// that is not:
//   - a residual's add and norm in one kernel (add_rmsnorm_fwd) adds and
//     sums squares as Add and rmsnorm_fwd do;
//   - in decoding the biases are added by rope_kv_rows instead of before
//     the products, rounding the same sum once either way;
//   - the MLP's gate and up projections are one product of 2I columns
//     (gpu.PairedSwiGLU), and q, k and v one product (gpu.PackedQKV,
//     rope_qkv): each output is the same dot product, and the input's
//     gradient sums over all columns in one product instead of adding
//     several.
//
// With float32 activations (the f32 mode, and bf16 with
// SWERL_CUDA_ACT=f32) sampled tokens are the same, log-probabilities
// equal to float32 rounding before training, and after three steps to
// the rounding of the gradient sums (in bf16, of weights rounded to bf16
// either side of it). With bf16 activations the paired product's output
// is bf16 too, rounded once more than unfused, so the two agree to bf16
// rounding and tokens may differ; there the fused sampler's
// log-probabilities are checked against the fused trainer's.
func TestFused(t *testing.T) {
	small := gpu.TinyConfig()
	small.IntermediateSize = 170
	for _, mode := range []struct {
		mm, act       string
		before, after float64 // fused against unfused (gputest.Close)
		parity        float64 // the fused sampler against the fused trainer, absolute
		sameTokens    bool
	}{
		{"f32", "f32", 1e-5, 1e-4, 1e-4, true},
		{"bf16", "f32", 1e-5, 2e-3, 5e-2, true},
		{"bf16", "bf16", 5e-3, 1e-2, 5e-2, false},
	} {
		for _, c := range []gpu.Config{gpu.TinyConfig(), small} {
			t.Run(fmt.Sprintf("%s/act=%s/I=%d", mode.mm, mode.act, c.IntermediateSize), func(t *testing.T) {
				t.Setenv("SWERL_CUDA_MATMUL", mode.mm)
				t.Setenv("SWERL_CUDA_ACT", mode.act)
				var before, after [2][]float32
				var outs [2][]gpu.Completion
				prompts := [][]int32{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}}
				ps := []gpu.SamplingParams{{MaxTokens: 9}, {MaxTokens: 7}, {Temperature: 1, TopK: 20, Seed: 4, MaxTokens: 8}}
				for i, fuse := range []string{"0", "1"} {
					t.Setenv("SWERL_CUDA_FUSE", fuse)
					be := open(t)
					m, err := gpu.NewModel(c, 3)
					if err != nil {
						t.Fatal(err)
					}
					gputest.SetBiases(m)
					s, err := gpu.NewBatchSampler(m, be, 32, 3)
					if err != nil {
						t.Fatal(err)
					}
					if outs[i], err = s.SampleAll(prompts, ps); err != nil {
						t.Fatal(err)
					}
					tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 4, MaxSeq: 24, LR: 1e-2})
					if err != nil {
						t.Fatal(err)
					}
					if fuse == "1" {
						var sampled []gpu.Sequence
						for j, o := range outs[i] {
							sampled = append(sampled, gpu.Sequence{Prompt: prompts[j], Completion: o.Tokens})
						}
						lp, err := tr.LogProbs(sampled)
						if err != nil {
							t.Fatal(err)
						}
						for j, o := range outs[i] {
							for k, x := range o.LogProbs {
								if d := math.Abs(float64(x - lp[j][k])); d > mode.parity {
									t.Errorf("request %d token %d: sampler log-probability %v, trainer %v", j, k, x, lp[j][k])
								}
							}
						}
					}
					lp, err := tr.LogProbs(tinyBatch())
					if err != nil {
						t.Fatal(err)
					}
					before[i] = slices.Concat(lp...)
					for range 3 {
						if _, err := tr.Step(tinyBatch()); err != nil {
							t.Fatal(err)
						}
					}
					if lp, err = tr.LogProbs(tinyBatch()); err != nil {
						t.Fatal(err)
					}
					after[i] = slices.Concat(lp...)
				}
				if mode.sameTokens {
					for i := range outs[0] {
						gputest.SameCompletion(t, fmt.Sprintf("request %d", i), "unfused", "fused", outs[0][i], outs[1][i], 1e-5)
					}
				}
				if ok, msg := gputest.Close(before[1], widen(before[0]), mode.before); !ok {
					t.Errorf("log-probabilities before training, fused against unfused: %s", msg)
				}
				if ok, msg := gputest.Close(after[1], widen(after[0]), mode.after); !ok {
					t.Errorf("log-probabilities after three steps, fused against unfused: %s", msg)
				}
			})
		}
	}
}

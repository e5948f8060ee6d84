//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cuda"
	"swerl/gpu/gputest"
	"swerl/gpu/hf"
)

// plainWeights is the backend without gpu.FrozenWeights: its own
// UploadFrozen, of another signature, hides the backend's, so trainers
// and samplers keep float32 weights and convert them at each bf16
// product; every other method and optional interface stays.
type plainWeights struct{ *cuda.Backend }

func (plainWeights) UploadFrozen() {}

// roundedMatrices returns a copy of m with its matrices rounded to bf16:
// what a frozen upload of m holds, as float32 (norm weights and biases
// stay exact, as the frozen binding keeps them).
func roundedMatrices(t *testing.T, m *gpu.Model) *gpu.Model {
	t.Helper()
	r, err := gpu.NewZeroModel(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	dst := r.Tensors()
	for i, x := range m.Tensors() {
		for j, v := range x.Data {
			if len(x.Shape) > 1 {
				v = hf.BF16ToFloat32(hf.Float32ToBF16(v))
			}
			dst[i].Data[j] = v
		}
	}
	return r
}

// TestFrozenBF16 trains LoRA adapters in the bf16 matmul mode on a base
// held in bf16 only (UploadFrozen) and on the same base rounded to bf16
// but held as float32 and converted at every product: the products read
// the same bf16 values and the embedding lookup the same numbers, so
// losses, adapters and log-probabilities agree to float32 rounding, and
// the frozen base takes 2 bytes a parameter less on the device. A frozen
// buffer refuses writes, and a product refuses it once the backend
// leaves the bf16 mode.
func TestFrozenBF16(t *testing.T) {
	t.Setenv("SWERL_CUDA_MATMUL", "bf16")
	t.Setenv("SWERL_CUDA_ATTN", "cublas")
	cfg := gpu.TinyConfig()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.VocabSize = 256, 704, 4, 65536
	lc := gpu.LoRAConfig{Rank: 4, Alpha: 8, Seed: 5}
	tc := gpu.TrainConfig{MaxBatch: 4, MaxSeq: 16, LR: 1e-2}
	type run struct {
		a   *gpu.LoRA
		tr  *gpu.Trainer
		mem int64 // device bytes the trainer took
	}
	// mk makes a LoRA trainer on b, whose device is dev's.
	m0, err := gpu.NewModel(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	m0r := roundedMatrices(t, m0)
	mk := func(dev *cuda.Backend, b gpu.Backend, m *gpu.Model) run {
		a, err := gpu.NewLoRA(cfg, lc)
		if err != nil {
			t.Fatal(err)
		}
		before, _, err := dev.MemUsed()
		if err != nil {
			t.Fatal(err)
		}
		tr, err := gpu.NewLoRATrainer(m, a, b, tc)
		if err != nil {
			t.Fatal(err)
		}
		after, _, _ := dev.MemUsed()
		return run{a, tr, after - before}
	}
	be := open(t)
	plain, frozen := mk(be, plainWeights{be}, m0r), mk(be, be, m0)
	saved := 2 * int64(m0.NumParams())
	if got := plain.mem - frozen.mem; float64(got) < 0.85*float64(saved) {
		t.Errorf("the frozen base saved %d bytes of device memory (trainer %d against %d), want about %d", got, frozen.mem, plain.mem, saved)
	}
	batch := tinyBatch()
	for step := range 4 {
		f := (*gpu.Trainer).Step
		if step%2 == 1 {
			f = (*gpu.Trainer).SFTStep
		}
		a, err := f(plain.tr, batch)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f(frozen.tr, batch)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(a.Loss - b.Loss); d > 1e-6*(1+math.Abs(a.Loss)) {
			t.Errorf("step %d: loss with a float32 base %v, with a frozen bf16 base %v", step, a.Loss, b.Loss)
		}
	}
	for _, r := range []run{plain, frozen} {
		if err := r.tr.SyncHost(); err != nil {
			t.Fatal(err)
		}
	}
	var got, ref []float32
	for i, x := range frozen.a.Tensors() {
		got = append(got, x.Data...)
		ref = append(ref, plain.a.Tensors()[i].Data...)
	}
	if ok, msg := gputest.Close(got, widen(ref), 1e-5); !ok {
		t.Errorf("adapters, frozen bf16 base against float32 base: %s", msg)
	}
	sameLogProbs(t, plain.tr, frozen.tr, batch, 1e-5)

	// Writes into the frozen base are refused, naming it.
	be.Upload(frozen.tr.Params(), make([]float32, 8))
	if err := be.Err(); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("Upload into the frozen base: error %v, want one naming the frozen buffer", err)
	}
	be.Close() // its error is sticky; the last check needs a fresh backend

	// A product in the f32 mode refuses a bf16-only weight.
	be2 := open(t)
	r2 := mk(be2, be2, m0)
	if err := be2.SetMatmul("f32"); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.tr.Step(batch); err == nil || !strings.Contains(err.Error(), "bf16 matmul mode") {
		t.Errorf("step in the f32 mode over a frozen bf16 base: error %v, want one asking for the bf16 mode", err)
	}
}

// TestFrozenSampler decodes in the bf16 matmul mode from weights held in
// bf16 only and from the same weights rounded to bf16, held as float32
// and converted at every product: the same greedy tokens and
// log-probabilities to float32 rounding, before and after SetWeights
// brings a new version (which replaces the frozen upload), with half the
// weight memory.
func TestFrozenSampler(t *testing.T) {
	t.Setenv("SWERL_CUDA_MATMUL", "bf16")
	be := open(t)
	cfg := gpu.TinyConfig()
	cfg.VocabSize = 131072 // the embedding dominates: 8.4M parameters
	m1, err := gpu.NewModel(cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := gpu.NewModel(cfg, 10)
	var prompts [][]int32
	var ps []gpu.SamplingParams
	for i := range 6 {
		p := make([]int32, 1+(i*7)%13)
		for j := range p {
			p[j] = int32((i*31 + j*17) % cfg.VocabSize)
		}
		prompts, ps = append(prompts, p), append(ps, gpu.SamplingParams{MaxTokens: 8 + i})
	}
	newSampler := func(b gpu.Backend, m *gpu.Model) (*gpu.BatchSampler, int64) {
		before, _, err := be.MemUsed()
		if err != nil {
			t.Fatal(err)
		}
		s, err := gpu.NewBatchSampler(m, b, 64, 4)
		if err != nil {
			t.Fatal(err)
		}
		after, _, _ := be.MemUsed()
		return s, after - before
	}
	plain, memPlain := newSampler(plainWeights{be}, roundedMatrices(t, m1))
	frozen, memFrozen := newSampler(be, m1)
	// MemUsed counts the driver's 2 MiB pages: each allocation may round
	// up by one, and the frozen upload makes two (bf16 matrices, float32
	// norms and biases), so up to 4 MiB of the saving can hide.
	const pages = 4 << 20
	if saved := 2 * int64(m1.NumParams()); memPlain-memFrozen < saved-pages {
		t.Errorf("frozen sampler weights saved %d bytes (sampler %d against %d), want %d less at most 4 MiB of page rounding", memPlain-memFrozen, memFrozen, memPlain, saved)
	}
	for v, m := range []*gpu.Model{m1, m2} {
		if v > 0 {
			if err := plain.SetWeights(roundedMatrices(t, m)); err != nil {
				t.Fatal(err)
			}
			if err := frozen.SetWeights(m); err != nil {
				t.Fatal(err)
			}
		}
		want, err := plain.SampleAll(prompts, ps)
		if err != nil {
			t.Fatal(err)
		}
		got, err := frozen.SampleAll(prompts, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			sameCompletion(t, fmt.Sprintf("version %d request %d", v+1, i), want[i], got[i])
		}
	}
}

// plainActs is the backend without gpu.BF16Activations (its own
// AllocBF16, of another signature, hides the backend's).
type plainActs struct{ *cuda.Backend }

func (plainActs) AllocBF16() {}

// TestBF16Activations trains in the bf16 matmul mode with the
// activations only products read (ln1, ln2, swi, lnf) held in bf16
// (SWERL_CUDA_ACT=bf16) and held as float32 and converted at each
// product: rmsnorm and swiglu round them as the conversion would, so
// losses agree to float32 rounding, with and without checkpointing, and
// the bf16 ones take 2 bytes an element less; a batch sampler decodes
// the same with them. Ops other than those refuse such a buffer. Fusion
// is off: the paired gate and up product's bf16 output rounds values the
// float32 path keeps (TestFused).
func TestBF16Activations(t *testing.T) {
	t.Setenv("SWERL_CUDA_MATMUL", "bf16")
	t.Setenv("SWERL_CUDA_ACT", "bf16")
	t.Setenv("SWERL_CUDA_FUSE", "0")
	be := open(t)
	cfg := gpu.TinyConfig()
	cfg.HiddenSize, cfg.IntermediateSize = 256, 1024
	batch := tinyBatch()
	for _, ckpt := range []bool{false, true} {
		tc := gpu.TrainConfig{MaxBatch: 64, MaxSeq: 64, LR: 1e-3, Checkpoint: ckpt}
		var losses [2][]float64
		var mem [2]int64
		for i, b := range []gpu.Backend{plainActs{be}, be} {
			m, err := gpu.NewModel(cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			var tr *gpu.Trainer
			tr, mem[i] = trainerMem(t, be, b, m, tc)
			for range 3 {
				met, err := tr.Step(batch)
				if err != nil {
					t.Fatal(err)
				}
				losses[i] = append(losses[i], met.Loss)
			}
		}
		for s := range losses[0] {
			if d := math.Abs(losses[0][s] - losses[1][s]); d > 1e-6*(1+math.Abs(losses[0][s])) {
				t.Errorf("checkpointing %v, step %d: loss %v with float32 activations, %v with bf16 ones", ckpt, s, losses[0][s], losses[1][s])
			}
		}
		N, C, I, L := int64(tc.MaxBatch*tc.MaxSeq), int64(cfg.HiddenSize), int64(cfg.IntermediateSize), int64(cfg.NumHiddenLayers)
		grads := N*int64(cfg.VocabSize) + 2*N*I // dlogits, dgate, dup
		want := 2 * (L*(2*N*C+N*I) + N*C + grads)
		if ckpt {
			want = 2 * (2*N*C + N*I + N*C + grads)
		}
		if got := mem[0] - mem[1]; float64(got) < 0.8*float64(want) {
			t.Errorf("checkpointing %v: bf16 activations saved %d bytes (trainer %d against %d), want about %d", ckpt, got, mem[1], mem[0], want)
		}
	}
	// Decoding with ln, swi and lastLn in bf16 samples the same.
	m, err := gpu.NewModel(cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}}
	ps := []gpu.SamplingParams{{MaxTokens: 12}, {MaxTokens: 9}, {Temperature: 1, TopK: 20, Seed: 4, MaxTokens: 10}}
	var outs [2][]gpu.Completion
	for i, b := range []gpu.Backend{plainActs{be}, be} {
		s, err := gpu.NewBatchSampler(m, b, 64, 2)
		if err != nil {
			t.Fatal(err)
		}
		if outs[i], err = s.SampleAll(prompts, ps); err != nil {
			t.Fatal(err)
		}
	}
	for i := range outs[0] {
		sameCompletion(t, fmt.Sprintf("request %d, float32 against bf16 activations", i), outs[0][i], outs[1][i])
	}
	a, err := be.AllocBF16(64)
	if err != nil {
		t.Fatal(err)
	}
	be.Add(a, a, a, 64)
	if err := be.Err(); err == nil || !strings.Contains(err.Error(), "bf16 activation") {
		t.Errorf("Add into a bf16 activation: error %v, want one naming it", err)
	}
}

// TestBF16Gradients writes SwiGLU's and the log-prob's backward into
// bf16 gradients (AllocBF16) and reads them back through an identity
// product, which carries bf16 values exactly: each element is the
// float32 kernels' value rounded once to bf16 (written over a zero, lazy
// or not), or, added to again, the bf16 sum of what was there and the
// new float32 value. A product with a bias refuses such a dout.
func TestBF16Gradients(t *testing.T) {
	for _, mode := range []string{"lazy", "now"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv("SWERL_CUDA_MATMUL", "bf16")
			t.Setenv("SWERL_CUDA_ZERO", mode)
			be := open(t)
			const rows, cols = 6, 37 // n = 222: the four-wide loop and its tail
			n := rows * cols
			rng := rand.New(rand.NewPCG(5, 6))
			vals := func(k int, scale float64) []float32 {
				x := make([]float32, k)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * scale)
				}
				return x
			}
			up := func(x []float32) gpu.Buf {
				b, err := be.Alloc(len(x))
				if err != nil {
					t.Fatal(err)
				}
				be.Upload(b, x)
				return b
			}
			eye := make([]float32, cols*cols)
			for i := range cols {
				eye[i*cols+i] = 1
			}
			w, dummy := up(eye), up(make([]float32, n))
			// readBack is g [rows, cols] through dinp = g · I.
			readBack := func(g gpu.Buf) []float32 {
				out, _ := be.Alloc(n)
				be.Zero(out)
				be.MatmulBackward(out, nil, nil, g, dummy, w, rows, cols, cols)
				got := make([]float32, n)
				be.Download(got, out)
				if err := be.Err(); err != nil {
					t.Fatal(err)
				}
				return got
			}
			r16 := func(v float32) float32 { return hf.BF16ToFloat32(hf.Float32ToBF16(v)) }
			// check wants got bit for bit, or within ulps units in the
			// last place of bf16: added to, the kernel may fuse the
			// last multiply with the add, which the host's sum does not.
			check := func(what string, got, want []float32, ulps float64) {
				t.Helper()
				for i := range want {
					ulp := math.Abs(float64(want[i])) / 128
					if d := math.Abs(float64(got[i] - want[i])); math.Float32bits(got[i]) != math.Float32bits(want[i]) && d > ulps*ulp {
						t.Fatalf("%s element %d: %v, want %v", what, i, got[i], want[i])
					}
				}
			}

			// SwiGLU backward, into float32 and into bf16 gradients.
			gate, upv, dout := up(vals(n, 2)), up(vals(n, 1)), up(vals(n, 1))
			g32, u32 := up(make([]float32, n)), up(make([]float32, n))
			g16, err := be.AllocBF16(n)
			if err != nil {
				t.Fatal(err)
			}
			u16, _ := be.AllocBF16(n)
			for _, b := range []gpu.Buf{g32, u32, g16, u16} {
				be.Zero(b)
			}
			be.SwiGLUBackward(g32, u32, dout, gate, upv, n)
			be.SwiGLUBackward(g16, u16, dout, gate, upv, n)
			dg, du := make([]float32, n), make([]float32, n)
			be.Download(dg, g32)
			be.Download(du, u32)
			wantG, wantU := make([]float32, n), make([]float32, n)
			for i := range n {
				wantG[i], wantU[i] = r16(dg[i]), r16(du[i])
			}
			check("dgate written", readBack(g16), wantG, 0)
			check("dup written", readBack(u16), wantU, 0)
			// Again without a zero: bf16(bf16 value + float32 value).
			be.SwiGLUBackward(g16, u16, dout, gate, upv, n)
			for i := range n {
				wantG[i], wantU[i] = r16(wantG[i]+dg[i]), r16(wantU[i]+du[i])
			}
			check("dgate added to", readBack(g16), wantG, 1)
			check("dup added to", readBack(u16), wantU, 1)

			// Log-prob backward over [rows, cols] logits.
			logits := up(vals(n, 3))
			lp, lse, dlogp := up(make([]float32, rows)), up(make([]float32, rows)), up(vals(rows, 1))
			targets := []int32{0, 5, 36, 17, 2, 9}
			be.LogProbForward(lp, lse, logits, targets, cols)
			l32 := up(make([]float32, n))
			l16, _ := be.AllocBF16(n)
			be.Zero(l32)
			be.Zero(l16)
			be.LogProbBackward(l32, dlogp, logits, lse, targets, cols)
			be.LogProbBackward(l16, dlogp, logits, lse, targets, cols)
			dl := make([]float32, n)
			be.Download(dl, l32)
			wantL := make([]float32, n)
			for i := range n {
				wantL[i] = r16(dl[i])
			}
			check("dlogits written", readBack(l16), wantL, 0)
			be.LogProbBackward(l16, dlogp, logits, lse, targets, cols)
			for i := range n {
				wantL[i] = r16(wantL[i] + dl[i])
			}
			check("dlogits added to", readBack(l16), wantL, 1)

			// A bias gradient would need dout in float32: refused.
			bias := up(make([]float32, cols))
			be.MatmulBackward(nil, nil, bias, l16, dummy, w, rows, cols, cols)
			if err := be.Err(); err == nil || !strings.Contains(err.Error(), "bf16 gradient") {
				t.Errorf("a bias gradient from a bf16 dout: error %v, want a refusal naming it", err)
			}
		})
	}
}

// trainerMem is a trainer of m on b (be or a wrapper of it) and the
// device memory its construction took, by be.MemUsed (2 MiB pages).
func trainerMem(t *testing.T, be *cuda.Backend, b gpu.Backend, m *gpu.Model, tc gpu.TrainConfig) (*gpu.Trainer, int64) {
	t.Helper()
	before, _, _ := be.MemUsed()
	tr, err := gpu.NewTrainer(m, b, tc)
	if err != nil {
		t.Fatal(err)
	}
	after, _, _ := be.MemUsed()
	return tr, after - before
}

// noQKV16 is the backend with SplitQKV16 off: q, k and v stay float32.
type noQKV16 struct{ *cuda.Backend }

func (noQKV16) SplitQKV16(NH, NKV, HS int) bool { return false }

// TestQKV16 trains with q, k and v held in bf16 (rope_qkv_b16 writes
// them, the mma attention's _b16 kernels read them) beside float32 ones:
// they are the values the attention's loads round the float32 ones to,
// so log-probabilities before and after three steps are the same bit for
// bit, with and without checkpointing, and the trainer takes 2 bytes an
// element less for them (8 MiB a layer here).
func TestQKV16(t *testing.T) {
	t.Setenv("SWERL_CUDA_MATMUL", "bf16")
	be := open(t)
	cfg := gpu.TinyConfig()
	cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 256, 4, 2 // 64-channel heads
	if !be.SplitQKV16(cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadSize()) {
		t.Fatal("the bf16 mode does not split into bf16 q, k and v")
	}
	for _, ckpt := range []bool{false, true} {
		tc := gpu.TrainConfig{MaxBatch: 16, MaxSeq: 512, LR: 1e-3, Checkpoint: ckpt}
		var lps [2][]float32
		var mem [2]int64
		for i, b := range []gpu.Backend{noQKV16{be}, be} {
			m, err := gpu.NewModel(cfg, 3)
			if err != nil {
				t.Fatal(err)
			}
			gputest.SetBiases(m)
			var tr *gpu.Trainer
			tr, mem[i] = trainerMem(t, be, b, m, tc)
			for s := range 4 {
				lp, err := tr.LogProbs(tinyBatch())
				if err != nil {
					t.Fatal(err)
				}
				lps[i] = append(lps[i], slices.Concat(lp...)...)
				if s < 3 {
					if _, err := tr.Step(tinyBatch()); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if !slices.Equal(lps[0], lps[1]) {
			t.Errorf("checkpointing %v: log-probabilities with float32 q, k, v %v, with bf16 ones %v", ckpt, lps[0], lps[1])
		}
		N, L := int64(tc.MaxBatch*tc.MaxSeq), int64(cfg.NumHiddenLayers)
		W := int64((cfg.NumAttentionHeads + 2*cfg.NumKeyValueHeads) * cfg.HeadSize())
		want := 2 * L * N * W
		if ckpt {
			want = 2 * N * W
		}
		// MemUsed counts 2 MiB pages: the two activation arenas may each
		// round by one.
		if got := mem[0] - mem[1]; got < want-4<<20 {
			t.Errorf("checkpointing %v: bf16 q, k and v saved %d bytes (trainer %d against %d), want %d less at most 4 MiB", ckpt, got, mem[1], mem[0], want)
		}
	}
}

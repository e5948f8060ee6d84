package gpu_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/hf"
)

// hidden is a backend with none of its optional interfaces, so that two
// runs on it take the same paths.
type hidden struct{ gpu.Backend }

// roundingFrozen adds gpu.FrozenWeights to hidden as a bf16 backend
// implements it: the upload holds the values rounded to bf16, as the
// backend's products would read them.
type roundingFrozen struct {
	hidden
	uploads *int
}

func (r roundingFrozen) UploadFrozen(data []float32) (gpu.Buf, error) {
	*r.uploads++
	b, err := r.Alloc(len(data))
	if err != nil {
		return nil, err
	}
	h := make([]float32, len(data))
	for i, x := range data {
		h[i] = hf.BF16ToFloat32(hf.Float32ToBF16(x))
	}
	r.Upload(b, h)
	return b, r.Err()
}

// frozenPair returns a model whose every tensor holds values bf16 cannot
// represent (norm weights and biases too, which the initialiser makes 1
// and 0), and a copy with only its matrices rounded to bf16: what a
// trainer or sampler on a FrozenWeights backend must compute with.
func frozenPair(t *testing.T, c gpu.Config, seed uint64) (m, rounded *gpu.Model) {
	t.Helper()
	m, err := gpu.NewModel(c, seed)
	if err != nil {
		t.Fatal(err)
	}
	rounded, _ = gpu.NewZeroModel(c)
	r := rand.New(rand.NewPCG(seed, 1))
	dst := rounded.Tensors()
	for i, x := range m.Tensors() {
		for j := range x.Data {
			if len(x.Shape) == 1 {
				x.Data[j] += float32(0.01 * r.NormFloat64())
				dst[i].Data[j] = x.Data[j]
			} else {
				dst[i].Data[j] = hf.BF16ToFloat32(hf.Float32ToBF16(x.Data[j]))
			}
		}
	}
	return m, rounded
}

// TestFrozenWeightsBinding: a LoRA trainer and a batch sampler on a
// FrozenWeights backend read the matrices from the frozen upload and the
// norm weights and biases at full precision, so they compute exactly
// what the same backend computes from a model with only its matrices
// rounded; SetWeights uploads each new version anew, and the trainer
// leaves the model it was given untouched.
func TestFrozenWeightsBinding(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	plain := hidden{cbe}
	uploads := 0
	frozen := roundingFrozen{hidden{cbe}, &uploads}
	c := gpu.TinyConfig()
	m, mr := frozenPair(t, c, 3)
	before := slices.Clone(m.Tensors()[1].Data)

	lc := gpu.LoRAConfig{Rank: 4, Alpha: 8, Seed: 5}
	tc := gpu.TrainConfig{MaxBatch: 4, MaxSeq: 16, LR: 1e-2}
	a1, _ := gpu.NewLoRA(c, lc)
	a2, _ := gpu.NewLoRA(c, lc)
	tr1, err := gpu.NewLoRATrainer(m, a1, frozen, tc)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := gpu.NewLoRATrainer(mr, a2, plain, tc)
	if err != nil {
		t.Fatal(err)
	}
	if uploads != 1 {
		t.Fatalf("the LoRA trainer made %d frozen uploads, want 1", uploads)
	}
	batch := twoSequences()
	for step := range 3 {
		x, err := tr1.Step(batch)
		if err != nil {
			t.Fatal(err)
		}
		y, err := tr2.Step(batch)
		if err != nil {
			t.Fatal(err)
		}
		if x.Loss != y.Loss || x.GradNorm != y.GradNorm {
			t.Errorf("step %d: frozen base loss %v grad norm %v, rounded model %v %v", step, x.Loss, x.GradNorm, y.Loss, y.GradNorm)
		}
	}
	if err := tr1.SyncHost(); err != nil {
		t.Fatal(err)
	}
	if err := tr2.SyncHost(); err != nil {
		t.Fatal(err)
	}
	for i, x := range a1.Tensors() {
		if !slices.Equal(x.Data, a2.Tensors()[i].Data) {
			t.Errorf("adapter %s differs between the frozen base and the rounded model", x.Name)
		}
	}
	if !slices.Equal(before, m.Tensors()[1].Data) {
		t.Error("LoRA training on a frozen upload changed the model's host weights")
	}

	uploads = 0
	m2, m2r := frozenPair(t, c, 4)
	var prompts [][]int32
	var ps []gpu.SamplingParams
	for i := range 5 {
		p := make([]int32, 1+(i*5)%7)
		for j := range p {
			p[j] = int32((i*31 + j*17) % c.VocabSize)
		}
		sp := gpu.SamplingParams{MaxTokens: 6 + i}
		if i%2 == 1 {
			sp = gpu.SamplingParams{Temperature: 1, TopK: 20, Seed: uint64(i), MaxTokens: 9}
		}
		prompts, ps = append(prompts, p), append(ps, sp)
	}
	s1, err := gpu.NewBatchSampler(m, frozen, 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := gpu.NewBatchSampler(mr, plain, 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	for v, pair := range [][2]*gpu.Model{{m, mr}, {m2, m2r}} {
		if v > 0 {
			if err := s1.SetWeights(pair[0]); err != nil {
				t.Fatal(err)
			}
			if err := s2.SetWeights(pair[1]); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s1.SampleAll(prompts, ps)
		if err != nil {
			t.Fatal(err)
		}
		want, err := s2.SampleAll(prompts, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
				t.Errorf("version %d request %d: frozen %v %v, rounded model %v %v", v+1, i, got[i].Tokens, got[i].LogProbs, want[i].Tokens, want[i].LogProbs)
			}
		}
	}
	if uploads != 2 {
		t.Errorf("the sampler made %d frozen uploads for two versions, want 2", uploads)
	}
}

// twoSequences is a GRPO batch for the tiny model: two sequences of
// different lengths, one advantage positive and one negative.
func twoSequences() []gpu.Sequence {
	return []gpu.Sequence{
		{Prompt: []int32{1, 2, 3, 4}, Completion: []int32{5, 6, 7, 8, 9, 10}, Advantage: 1},
		{Prompt: []int32{11, 3}, Completion: []int32{12, 13, 14}, Advantage: -0.5},
	}
}

// halfActs adds gpu.BF16Activations to hidden, counting what it was
// asked for; its buffers are ordinary float32 ones.
type halfActs struct {
	hidden
	asked *int
}

func (h halfActs) AllocBF16(n int) (gpu.Buf, error) {
	*h.asked += n
	return h.Alloc(n)
}

// TestBF16ActivationsLayout: a trainer on a BF16Activations backend takes
// exactly the activations only matrix products read (the normed inputs
// ln1, ln2 and lnf, the SwiGLU output) from AllocBF16, one set per layer
// or, with activation checkpointing, one set shared by the layers, and
// the gradients only they read (dlogits, dgate, dup, shared), and
// trains as on the backend without it; the batch sampler takes its
// three such buffers and samples the same.
func TestBF16ActivationsLayout(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	c := gpu.TinyConfig()
	batch := twoSequences()
	for _, ckpt := range []bool{false, true} {
		tc := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2, Checkpoint: ckpt}
		N, C, I, L := tc.MaxBatch*tc.MaxSeq, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers
		grads := N*c.VocabSize + 2*N*I
		want := L*(2*N*C+N*I) + N*C + grads
		if ckpt {
			want = 2*N*C + N*I + N*C + grads
		}
		asked := 0
		var losses [2][]float64
		for i, be := range []gpu.Backend{hidden{cbe}, halfActs{hidden{cbe}, &asked}} {
			m, err := gpu.NewModel(c, 3)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := gpu.NewTrainer(m, be, tc)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				met, err := tr.Step(batch)
				if err != nil {
					t.Fatal(err)
				}
				losses[i] = append(losses[i], met.Loss)
			}
		}
		if asked != want {
			t.Errorf("checkpointing %v: AllocBF16 asked for %d elements, want %d (ln1, ln2, swi, lnf, dlogits, dgate, dup)", ckpt, asked, want)
		}
		if !slices.Equal(losses[0], losses[1]) {
			t.Errorf("checkpointing %v: losses %v without BF16Activations, %v with", ckpt, losses[0], losses[1])
		}
	}

	// The batch sampler takes ln, swi and lastLn from it: a step's rows
	// (maxSeq + slots) of the first two, a row a slot of the last.
	m, _ := gpu.NewModel(c, 3)
	const maxSeq, slots = 32, 3
	asked := 0
	var out [2][]gpu.Completion
	prompts := [][]int32{{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10}}
	ps := []gpu.SamplingParams{{MaxTokens: 9}, {Temperature: 1, TopK: 20, Seed: 3, MaxTokens: 7}, {MaxTokens: 5}, {MaxTokens: 8}}
	for i, be := range []gpu.Backend{hidden{cbe}, halfActs{hidden{cbe}, &asked}} {
		s, err := gpu.NewBatchSampler(m, be, maxSeq, slots)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = s.SampleAll(prompts, ps); err != nil {
			t.Fatal(err)
		}
	}
	if R := maxSeq + slots; asked != R*c.HiddenSize+R*c.IntermediateSize+slots*c.HiddenSize {
		t.Errorf("the batch sampler asked AllocBF16 for %d elements, want %d (ln, swi, lastLn)", asked, R*c.HiddenSize+R*c.IntermediateSize+slots*c.HiddenSize)
	}
	for i := range out[0] {
		if !slices.Equal(out[0][i].Tokens, out[1][i].Tokens) || !slices.Equal(out[0][i].LogProbs, out[1][i].LogProbs) {
			t.Errorf("request %d: sampled %v without BF16Activations, %v with", i, out[0][i].Tokens, out[1][i].Tokens)
		}
	}
}

package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

func newBatchSampler(t testing.TB, m *gpu.Model, maxSeq, slots int) *gpu.BatchSampler {
	t.Helper()
	be := cpu.New()
	t.Cleanup(func() { be.Close() })
	s, err := gpu.NewBatchSampler(m, be, maxSeq, slots)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batchRequests are n requests with prompts of 1..20 tokens (some prompts
// repeated, as the G completions of one instance are), mixed sampling
// parameters, seeds and lengths, and a stop token on some.
func batchRequests(n, V int) ([][]int32, []gpu.SamplingParams) {
	r := rand.New(rand.NewPCG(uint64(n), 77))
	var prompts [][]int32
	var ps []gpu.SamplingParams
	for i := range n {
		var prompt []int32
		if i%4 != 0 && i > 0 {
			prompt = prompts[i-1] // a group: the same prompt, other seeds
		} else {
			prompt = make([]int32, 1+r.IntN(20))
			for j := range prompt {
				prompt[j] = int32(r.IntN(V))
			}
		}
		p := gpu.SamplingParams{Temperature: 1, Seed: uint64(1000 + i), MaxTokens: 5 + r.IntN(30)}
		switch i % 5 {
		case 1:
			p.Temperature = 0
		case 2:
			p.Temperature, p.TopK, p.TopP = 0.8, 8, 0.9
		case 3:
			p.StopTokens = []int32{int32(r.IntN(V)), int32(r.IntN(V))}
		case 4:
			p.Temperature = 2.5
		}
		prompts = append(prompts, prompt)
		ps = append(ps, p)
	}
	return prompts, ps
}

// TestBatchMatchesAlone: every completion sampled in a batch — with
// more requests than slots, so finished sequences hand their slots to
// waiting ones, and with shared prompts — has bitwise the tokens and
// log-probabilities of the same request sampled alone, whatever the
// batch size.
func TestBatchMatchesAlone(t *testing.T) {
	m := sharpModel(t)
	prompts, ps := batchRequests(45, m.Config.VocabSize)
	alone := make([]gpu.Completion, len(prompts))
	one := newBatchSampler(t, m, 64, 1)
	for i := range prompts {
		c, err := one.SampleAll(prompts[i:i+1], ps[i:i+1])
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = c[0]
	}
	var stops int
	for _, c := range alone {
		if c.FinishReason == "stop" {
			stops++
		}
	}
	if stops == 0 {
		t.Fatal("no completion ended on a stop token: the test does not cover early slot release")
	}
	for _, slots := range []int{32, 7} {
		s := newBatchSampler(t, m, 64, slots)
		got, err := s.SampleAll(prompts, ps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !slices.Equal(got[i].Tokens, alone[i].Tokens) || !slices.Equal(got[i].LogProbs, alone[i].LogProbs) || got[i].FinishReason != alone[i].FinishReason {
				t.Fatalf("slots %d, request %d (%+v):\nbatched %v %v (%s)\nalone   %v %v (%s)", slots, i, ps[i],
					got[i].Tokens, got[i].LogProbs, got[i].FinishReason, alone[i].Tokens, alone[i].LogProbs, alone[i].FinishReason)
			}
		}
		if s.Pending() != 0 {
			t.Errorf("%d sequences pending after SampleAll", s.Pending())
		}
	}
	// The one-at-a-time Sampler is the same engine.
	sm := newSampler(t, m, 64)
	for _, i := range []int{0, 2, 5} {
		c, err := sm.Sample(prompts[i], ps[i])
		if err != nil || !slices.Equal(c.LogProbs, alone[i].LogProbs) {
			t.Errorf("Sampler request %d: %v, %v; want %v", i, c.LogProbs, err, alone[i].LogProbs)
		}
	}
}

// TestBatchLogProbsMatchTrainer: the batched sampler's log-probabilities
// are what the trainer computes for the same sequences.
func TestBatchLogProbsMatchTrainer(t *testing.T) {
	m := sharpModel(t)
	prompts, ps := batchRequests(12, m.Config.VocabSize)
	s := newBatchSampler(t, m, 64, 8)
	cs, err := s.SampleAll(prompts, ps)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New()
	defer be.Close()
	tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: len(cs), MaxSeq: 64})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []gpu.Sequence
	for i, c := range cs {
		seqs = append(seqs, gpu.Sequence{Prompt: prompts[i], Completion: c.Tokens})
	}
	lp, err := tr.LogProbs(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		for k := range c.Tokens {
			if d := math.Abs(float64(lp[i][k] - c.LogProbs[k])); d > 1e-4 {
				t.Errorf("request %d token %d: sampler logprob %v, trainer %v", i, k, c.LogProbs[k], lp[i][k])
			}
		}
	}
}

// TestBatchStepAndCancel drives the sampler step by step: no more
// sequences run than there are slots, a cancelled sequence frees its
// slot for a waiting one, and bad requests are refused.
func TestBatchStepAndCancel(t *testing.T) {
	m := sharpModel(t)
	s := newBatchSampler(t, m, 32, 2)
	p := gpu.SamplingParams{Temperature: 1, MaxTokens: 10}
	var seqs []*gpu.Seq
	for i := range 4 {
		p.Seed = uint64(i)
		q, err := s.Submit([]int32{1, 2, int32(i)}, p)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, q)
	}
	if _, err := s.Step(); err != nil {
		t.Fatal(err)
	}
	started := func() (n int) {
		for _, q := range seqs {
			n += len(q.Completion().Tokens)
		}
		return n
	}
	if n := started(); n != 2 {
		t.Fatalf("after one step %d tokens over 4 sequences, want 2 (2 slots)", n)
	}
	s.Cancel(seqs[0])
	if _, err := s.Step(); err != nil {
		t.Fatal(err)
	}
	if len(seqs[2].Completion().Tokens) != 1 || len(seqs[3].Completion().Tokens) != 0 {
		t.Fatalf("after cancelling one, the first waiting sequence should have started: %d, %d tokens",
			len(seqs[2].Completion().Tokens), len(seqs[3].Completion().Tokens))
	}
	var finished []*gpu.Seq
	for s.Pending() > 0 {
		done, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		finished = append(finished, done...)
	}
	if len(finished) != 3 || seqs[0].Done() || !seqs[3].Done() || len(seqs[3].Completion().Tokens) != 10 {
		t.Fatalf("%d finished; cancelled done=%v; last %d tokens", len(finished), seqs[0].Done(), len(seqs[3].Completion().Tokens))
	}
	refusesBad(t, m.Config.VocabSize, 32, func(prompt []int32, p gpu.SamplingParams) error {
		_, err := s.Submit(prompt, p)
		return err
	}, badRequest{"negative top-k", []int32{1}, gpu.SamplingParams{TopK: -1}})
	if _, err := gpu.NewBatchSampler(m, cpu.New(), 32, 0); err == nil {
		t.Error("zero slots: no error")
	}
}

// BenchmarkSampleBatch measures tokens/s of the ~20M model of
// BenchmarkSample (64-token prompts, 64 tokens generated for each,
// temperature 1, prompt processing included) with 1 and 32 sequences
// decoded together, each with its own prompt; 32 as 8 prompts of 4
// completions each (GRPO groups, as swerl run samples them: one prefill
// per group); and 1 and 32 sequences decoding 127 tokens after a
// one-token prompt (the same 128-token context, next to no prefill).
//
// Beside tokens/s and tokens per CPU-second it reports GFLOP/cpu-s, the
// multiply-adds of the linear layers and the LM head (attention left out)
// per CPU-second: at batch 32 it is the kernel's throughput, to be read
// against cpu.PeakFLOPS per worker.
func BenchmarkSampleBatch(b *testing.B) {
	cfg := benchConfig()
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	C, I, V := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize
	QC, KVC := cfg.NumAttentionHeads*cfg.HeadSize(), cfg.KVHeads()*cfg.HeadSize()
	rowMACs := float64(cfg.NumHiddenLayers * (2*C*QC + 2*C*KVC + 3*C*I))
	for _, c := range []struct{ batch, group, prompt, gen int }{
		{1, 1, 64, 64}, {32, 1, 64, 64}, {32, 4, 64, 64}, {1, 1, 1, 127}, {32, 1, 1, 127},
	} {
		name := fmt.Sprintf("batch=%d", c.batch)
		if c.group > 1 {
			name += fmt.Sprintf(",group=%d", c.group)
		}
		if c.prompt != 64 {
			name += fmt.Sprintf(",prompt=%d", c.prompt)
		}
		b.Run(name, func(b *testing.B) {
			batch, gen := c.batch, c.gen
			s := newBatchSampler(b, m, c.prompt+gen, batch)
			var prompts [][]int32
			var ps []gpu.SamplingParams
			seqs := benchBatch(batch, 64, cfg.VocabSize, 3)
			for i := range batch {
				seq := seqs[i/c.group*c.group]
				toks := append(append([]int32(nil), seq.Prompt...), seq.Completion...)
				prompts = append(prompts, toks[:c.prompt])
				ps = append(ps, gpu.SamplingParams{Temperature: 1, Seed: uint64(i), MaxTokens: gen})
			}
			// Rows through the layers: each group's prompt once, then every
			// generated token but the last; LM head rows: one a token.
			rows := float64(batch/c.group*c.prompt + batch*(gen-1))
			flop := 2 * (rows*rowMACs + float64(batch*gen*V*C))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for b.Loop() {
				cs, err := s.SampleAll(prompts, ps)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range cs {
					if len(c.Tokens) != gen {
						b.Fatalf("%d tokens", len(c.Tokens))
					}
				}
			}
			cpuS := (cpuTime(b) - cpu0).Seconds()
			b.ReportMetric(float64(batch*gen)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(batch*gen)*float64(b.N)/cpuS, "tokens/cpu-s")
			b.ReportMetric(flop*float64(b.N)/cpuS/1e9, "GFLOP/cpu-s")
		})
	}
}

// cpuTime is the CPU time (user and system) this process has used. The
// dev box's two cores are shared, so wall-clock tokens/s swings with the
// load; tokens per CPU-second is the steadier measure of the work a token
// costs.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perSequence is the CPU backend without gpu.RaggedAttention: a
// BatchSampler over it keeps a KV cache per slot and runs RoPE, the
// cache writes and attention once per sequence.
type perSequence struct {
	gpu.Backend
	gpu.PackedMatmul
}

func newPerSequence() perSequence {
	be := cpu.New()
	return perSequence{be, be}
}

func (p perSequence) Close() error { return p.Backend.(*cpu.Backend[float32]).Close() }

// perSequenceAll samples every prompt with a BatchSampler of 7 slots and
// 64 positions over perSequence.
func perSequenceAll(t *testing.T, m *gpu.Model, prompts [][]int32, ps []gpu.SamplingParams) []gpu.Completion {
	t.Helper()
	pb := newPerSequence()
	defer pb.Close()
	return gputest.SampleAll(t, m, pb, 7, prompts, ps)
}

// shortMemory fails allocations of exactly n elements after the first ok.
type shortMemory struct {
	perSequence
	n, ok int
}

func (b *shortMemory) Alloc(n int) (gpu.Buf, error) {
	if n == b.n {
		if b.ok == 0 {
			return nil, fmt.Errorf("out of memory for %d floats", n)
		}
		b.ok--
	}
	return b.perSequence.Alloc(n)
}

// TestBatchShortMemory: when KV caches cannot be allocated for every
// slot, the sampler runs on the slots it has (same completions); with
// none it fails instead of waiting forever.
func TestBatchShortMemory(t *testing.T) {
	m := sharpModel(t)
	c := m.Config
	cacheLen := 2 * c.NumHiddenLayers * 32 * c.KVHeads() * c.HeadSize()
	prompts, ps := batchRequests(5, c.VocabSize)
	for i := range ps {
		ps[i].MaxTokens = min(ps[i].MaxTokens, 10)
	}
	want, err := newBatchSampler(t, m, 32, 5).SampleAll(prompts, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []int{1, 0} {
		be := &shortMemory{perSequence: newPerSequence(), n: cacheLen, ok: ok}
		s, err := gpu.NewBatchSampler(m, be, 32, 5)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.SampleAll(prompts, ps)
		switch {
		case ok == 0 && (err == nil || !strings.Contains(err.Error(), "KV cache")):
			t.Errorf("no memory for any KV cache: err %v", err)
		case ok == 1 && err != nil:
			t.Errorf("one KV cache: %v", err)
		case ok == 1:
			for i := range got {
				if !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
					t.Errorf("one slot, request %d: %v, want %v", i, got[i].LogProbs, want[i].LogProbs)
				}
			}
		}
		be.Close()
	}
}

// TestBatchRaggedCPU: the CPU backend's gpu.RaggedAttention (one call a
// layer for all rows) samples bitwise what its per-sequence ops sample:
// both run a row's attention through the same code.
func TestBatchRaggedCPU(t *testing.T) {
	m := sharpModel(t)
	prompts, ps := batchRequests(30, m.Config.VocabSize)
	want := perSequenceAll(t, m, prompts, ps)
	got, err := newBatchSampler(t, m, 64, 7).SampleAll(prompts, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
			t.Fatalf("request %d: ragged %v %v, per sequence %v %v", i, got[i].Tokens, got[i].LogProbs, want[i].Tokens, want[i].LogProbs)
		}
	}
}

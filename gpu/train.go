package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"swerl/gpu/arch"
)

// TrainConfig configures a Trainer. The zero value is valid: every field
// documents its default.
type TrainConfig struct {
	// MaxBatch and MaxSeq bound a micro-batch: at most MaxBatch sequences
	// of at most MaxSeq tokens (prompt + completion). Activations are
	// allocated for the largest micro-batch so far (sequences × longest
	// sequence, rounded up to 64 tokens) and reused; a larger one lays them
	// out again.
	// Defaults DefaultMaxBatch and DefaultMaxSeq.
	MaxBatch, MaxSeq int
	// LR is the peak learning rate. Default 1e-5.
	LR float64
	// MinLR is the learning rate at the end of the cosine decay. Default 0.
	MinLR float64
	// WarmupSteps of linear warm-up from 0 to LR. Default 0.
	WarmupSteps int
	// DecaySteps is the optimizer step at which the cosine decay reaches
	// MinLR (counted from step 1, warm-up included); 0 keeps LR constant
	// after warm-up. Default 0.
	DecaySteps int
	// Beta1, Beta2, Eps of AdamW. Defaults 0.9, 0.95, 1e-8.
	Beta1, Beta2, Eps float64
	// WeightDecay of AdamW on matrices (never on norms and biases).
	// Default 0.
	WeightDecay float64
	// GradClip is the maximum global L2 norm of the gradient; 0 means 1.0
	// and a negative value disables clipping.
	GradClip float64
	// AccumSteps micro-batches make one optimizer step; their gradients
	// are averaged. Default 1.
	AccumSteps int
	// GRPO configures the RL objective of Step.
	GRPO GRPOParams
	// Temperature τ is the sampling temperature of the rollouts: Step and
	// LogProbs compute log-probabilities of softmax(logits/τ), the
	// distribution the sampler drew from, so the policy gradient is that
	// of the sampling policy. SFTStep always trains the raw distribution.
	// 0 means 1.
	Temperature float64
	// Checkpoint turns on activation checkpointing: the trainer keeps each
	// layer's input only and recomputes the layer's activations in the
	// backward pass, holding one layer's activations instead of all of
	// them for one more forward pass of compute.
	Checkpoint bool
}

// DefaultMaxBatch and DefaultMaxSeq bound a micro-batch where a
// TrainConfig leaves MaxBatch and MaxSeq zero; they are the defaults of
// swerl's --micro-batch and --max-seq too.
const (
	DefaultMaxBatch = 8
	DefaultMaxSeq   = 1024
)

func (c TrainConfig) withDefaults() TrainConfig {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxSeq == 0 {
		c.MaxSeq = DefaultMaxSeq
	}
	def(&c.LR, 1e-5)
	def(&c.Beta1, 0.9)
	def(&c.Beta2, 0.95)
	def(&c.Eps, 1e-8)
	def(&c.GradClip, 1)
	if c.AccumSteps == 0 {
		c.AccumSteps = 1
	}
	def(&c.Temperature, 1)
	return c
}

// Validate names the first invalid field.
func (c TrainConfig) Validate() error {
	switch {
	case c.MaxBatch < 0:
		return fmt.Errorf("gpu: TrainConfig.MaxBatch %d is negative", c.MaxBatch)
	case c.MaxSeq < 0:
		return fmt.Errorf("gpu: TrainConfig.MaxSeq %d is negative", c.MaxSeq)
	case c.LR < 0 || c.MinLR < 0:
		return fmt.Errorf("gpu: TrainConfig.LR %v or MinLR %v is negative", c.LR, c.MinLR)
	case c.WarmupSteps < 0 || c.DecaySteps < 0:
		return fmt.Errorf("gpu: TrainConfig.WarmupSteps %d or DecaySteps %d is negative", c.WarmupSteps, c.DecaySteps)
	case c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1:
		return fmt.Errorf("gpu: TrainConfig.Beta1 %v or Beta2 %v outside [0,1)", c.Beta1, c.Beta2)
	case c.Eps < 0 || c.WeightDecay < 0:
		return fmt.Errorf("gpu: TrainConfig.Eps %v or WeightDecay %v is negative", c.Eps, c.WeightDecay)
	case c.AccumSteps < 0:
		return fmt.Errorf("gpu: TrainConfig.AccumSteps %d is negative", c.AccumSteps)
	case c.Temperature < 0 || math.IsNaN(c.Temperature):
		return fmt.Errorf("gpu: TrainConfig.Temperature %v is negative", c.Temperature)
	}
	return c.GRPO.Validate()
}

// LRAt returns the learning rate of optimizer step (1-based): linear
// warm-up, then cosine decay to MinLR at DecaySteps, then MinLR.
func (c TrainConfig) LRAt(step int) float64 {
	c = c.withDefaults()
	if c.WarmupSteps > 0 && step <= c.WarmupSteps {
		return c.LR * float64(step) / float64(c.WarmupSteps)
	}
	if c.DecaySteps <= c.WarmupSteps {
		return c.LR
	}
	if step >= c.DecaySteps {
		return c.MinLR
	}
	frac := float64(step-c.WarmupSteps) / float64(c.DecaySteps-c.WarmupSteps)
	return c.MinLR + 0.5*(c.LR-c.MinLR)*(1+math.Cos(math.Pi*frac))
}

// Sequence is one training example: a prompt and a sampled completion,
// with the completion's advantage and the log-probabilities recorded when
// it was sampled.
type Sequence struct {
	Prompt     []int32 // at least one token
	Completion []int32 // the tokens trained on
	Advantage  float64 // group-relative advantage (GRPO); unused by SFTStep
	// OldLogProbs[t] is log π_old(Completion[t]), the proximal policy of
	// the PPO ratio. nil (what the learner passes): the step's own forward
	// pass, detached, which with one optimizer update per batch is the
	// trainer's policy at the start of the step, recomputed at no extra
	// cost (ratio 1).
	OldLogProbs []float32
	// BehavLogProbs[t] is log π_behav(Completion[t]) as the sampler
	// reported it (Sampler.Sample's LogProbs, an engine's logprobs): the
	// behaviour policy of GRPOParams.Correction and of the rollout
	// statistics. nil: none (c = 1).
	BehavLogProbs []float32
	// BehavProcessed says BehavLogProbs are of the sampler's processed
	// distribution, softmax(logits/τ) at TrainConfig.Temperature, instead
	// of the raw one (temperature 1: what swerl's sampler and vLLM report
	// by default). Raw ones are converted for τ ≠ 1: ln w_τ =
	// (ln π_old,1 − ln π_behav,1)/τ, exact when the two policies'
	// log-normalizers agree, the first order of their mismatch.
	BehavProcessed bool
	// RefLogProbs[t] is log π_ref(Completion[t]) under the frozen reference
	// model; required when GRPO.KLCoef > 0.
	RefLogProbs []float32
}

// Metrics describe one micro-batch (and the optimizer step it completed).
type Metrics struct {
	Loss     float64 // objective value of the micro-batch
	KL       float64 // mean k3 KL estimate per token (0 without KL)
	ClipFrac float64 // fraction of tokens whose ratio was clipped
	// MaskedFrac is the fraction of tokens left out by GRPOParams.MinTokenProb.
	MaskedFrac float64
	// Entropy is the mean over completion tokens of −ln π_old(y_t), the
	// sampled-token estimate of the policy's entropy.
	Entropy float64
	// Rollout sums the behaviour weights' statistics over the tokens with
	// BehavLogProbs.
	Rollout RolloutStats
	// FwdBwdTime is the wall time of the forward pass, the host-side
	// objective (π_old, the correction) and the backward pass, up to the
	// gradient norm's read-back, which waits for the device;
	// OptimizerTime the rest of an applied step (clipping and AdamW, up to
	// the backend's error check).
	FwdBwdTime, OptimizerTime time.Duration
	Tokens                    int     // completion tokens trained on
	Applied                   bool    // this micro-batch completed an optimizer step
	Step                      int     // optimizer steps taken so far
	LR                        float64 // learning rate of the step (when Applied)
	GradNorm                  float64 // global gradient norm before clipping (when Applied)
}

// Trainer trains a Model on a Backend with GRPO (Step) or SFT (SFTStep)
// and AdamW, either every parameter (NewTrainer) or LoRA adapters on a
// frozen base (NewLoRATrainer). Memory: the parameters (the model's arena
// itself on a HostBacked backend), a gradient arena and AdamW m and v for
// the trained parameters only (with LoRA: the adapters, none for the
// base; on a FrozenWeights backend in a bf16 mode the base's matrices
// take 2 bytes a parameter), and activations for the largest micro-batch
// so far (at most MaxBatch*MaxSeq rows); nothing else grows. A
// Trainer is not safe for concurrent use; it writes the trained
// parameters (on a backend that is not HostBacked, only after SyncHost).
type Trainer struct {
	cfg   TrainConfig
	model *Model
	be    Backend
	d     dims

	params   Params[Buf]
	grads    Params[Buf] // nil buffers for frozen parameters
	paramBuf Buf
	hostView bool // paramBuf aliases model.arena

	// The trained parameters: the model's arena, or the LoRA arena.
	host      []float32  // their host memory
	trainBuf  Buf        // on the backend (paramBuf without LoRA)
	trainView bool       // trainBuf aliases host
	groups    []group    // AdamW groups over trainBuf
	runs      []adamwRun // groups in runs of adjacent ones, for GroupedAdamW
	gradBuf   Buf
	mBuf      Buf
	vBuf      Buf

	lora *LoRA    // nil without LoRA
	lo   *loraRun // the adapters on the backend

	cos, sin Buf
	acts     acts
	gacts    gradActs
	actBuf   Buf
	act16    Buf // the activations only products read, from BF16Activations (nil without)
	// capB × capT is what the activations are laid out for (layout).
	capB, capT int

	scoreOnly bool // made by NewScorer: no gradients, moments or backward activations

	micro int // micro-batches accumulated since the last optimizer step
	step  int

	tokens, targets []int32
	logp, dlogp     []float32
	rawLogp         []float32 // log-probs at temperature 1 (filled when Temperature ≠ 1)
}

// group is a run of trained parameters that AdamW updates with one
// weight decay: a tensor of the model or of the adapters.
type group struct {
	off, n int
	decay  bool // a matrix (weight decay applies), not a norm or bias
}

// adamwRun is a window [off, off+n) of the trained arena made of
// adjacent groups, as AdamWGroup windows counted from off.
type adamwRun struct {
	off, n int
	groups []AdamWGroup
}

// adjacentRuns splits groups (in arena order) into runs in which each
// group starts where the previous one ended.
func adjacentRuns(groups []group) []adamwRun {
	var runs []adamwRun
	for i, g := range groups {
		if i == 0 || groups[i-1].off+groups[i-1].n != g.off {
			runs = append(runs, adamwRun{off: g.off})
		}
		r := &runs[len(runs)-1]
		r.groups = append(r.groups, AdamWGroup{Off: g.off - r.off, N: g.n, Decay: g.decay})
		r.n = g.off + g.n - r.off
	}
	return runs
}

// NewTrainer binds m to be and trains all of its parameters. The
// backend's copy of the weights starts from m's arena.
func NewTrainer(m *Model, be Backend, cfg TrainConfig) (*Trainer, error) {
	return newTrainer(m, nil, be, cfg, false)
}

// NewScorer binds m to be for log-probs only (LogProbs, LogProbs64,
// SetTemperature): a frozen reference model, or a check of an engine's
// log-probs. It reads the weights as NewTrainer's forward pass does, so
// its log-probs are the trainer's, but it has no gradients, no AdamW
// moments and no backward activations, and its layers share one set of
// activation buffers: at SmolLM2-135M and 1×2048 tokens on the CPU about
// 0.8 GB besides the weights, against 7 GB for a trainer. Step, SFTStep
// and the optimizer state return ErrScoreOnly.
func NewScorer(m *Model, be Backend, cfg TrainConfig) (*Trainer, error) {
	return newTrainer(m, nil, be, cfg, true)
}

// ErrScoreOnly reports a training call on a Trainer made by NewScorer.
var ErrScoreOnly = errors.New("gpu: a scorer (NewScorer) computes log-probs only")

// NewLoRATrainer binds m and the adapters a (made for m's architecture)
// to be and trains only the adapters: the base weights are frozen and
// have no gradient or optimizer state. The forward pass computes
// x·Wᵀ + Scale·(x·Aᵀ)·Bᵀ for every adapted module. SyncHost copies the
// trained adapters into a; m is never written.
func NewLoRATrainer(m *Model, a *LoRA, be Backend, cfg TrainConfig) (*Trainer, error) {
	if a == nil {
		return nil, errors.New("gpu: NewLoRATrainer without adapters")
	}
	if err := a.fits(m.Config); err != nil {
		return nil, fmt.Errorf("gpu: NewLoRATrainer: %w", err)
	}
	return newTrainer(m, a, be, cfg, false)
}

func newTrainer(m *Model, a *LoRA, be Backend, cfg TrainConfig, scoreOnly bool) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.MaxSeq > m.Config.MaxPositionEmbeddings {
		return nil, fmt.Errorf("gpu: TrainConfig.MaxSeq %d exceeds max_position_embeddings %d", cfg.MaxSeq, m.Config.MaxPositionEmbeddings)
	}
	t := &Trainer{cfg: cfg, model: m, be: be, d: dimsOf(m.Config), lora: a, scoreOnly: scoreOnly}
	var err error
	if fw, ok := be.(FrozenWeights); ok && a != nil {
		if t.paramBuf, _, t.params, err = bindFrozen(be, fw, m); err != nil {
			return nil, err
		}
	} else {
		if t.paramBuf, t.hostView, err = bindHost(be, m.arena); err != nil {
			return nil, err
		}
		t.params = bindParams(m.Config, func(off, n int) Buf { return be.Slice(t.paramBuf, off, n) })
	}
	// Full fine-tuning reads its weights through a bf16 copy that AdamW
	// keeps current. A frozen LoRA base does not: its copy would be 2 more
	// bytes a base parameter (15 GB at 7B), for conversions that cost a
	// few percent of a LoRA step.
	if kb, ok := be.(BF16Weights); ok && a == nil {
		if err := kb.KeepBF16(t.paramBuf); err != nil {
			return nil, err
		}
	}
	switch {
	case scoreOnly:
	case a == nil:
		t.host, t.trainBuf, t.trainView = m.arena, t.paramBuf, t.hostView
		for _, s := range m.specs {
			t.groups = append(t.groups, group{off: s.off, n: arch.Numel(s.Shape), decay: len(s.Shape) > 1})
		}
		slices.SortFunc(t.groups, func(a, b group) int { return cmp.Compare(a.off, b.off) })
	default:
		t.host = a.arena
		if t.trainBuf, t.trainView, err = bindHost(be, a.arena); err != nil {
			return nil, err
		}
		for _, s := range a.specs {
			t.groups = append(t.groups, group{off: s.off, n: s.shape[0] * s.shape[1], decay: true})
		}
	}
	n := len(t.host)
	for _, b := range []*Buf{&t.gradBuf, &t.mBuf, &t.vBuf} {
		if scoreOnly {
			break
		}
		if *b, err = be.Alloc(n); err != nil {
			return nil, fmt.Errorf("gpu: allocate optimizer state: %w", err)
		}
	}
	switch {
	case scoreOnly:
	case a == nil:
		t.grads = bindParams(m.Config, func(off, n int) Buf { return be.Slice(t.gradBuf, off, n) })
	default:
		t.grads = Params[Buf]{Layers: make([]LayerParams[Buf], t.d.L)}
		t.lo = bindLoRA(be, a, t.trainBuf, t.gradBuf)
	}
	if t.cos, t.sin, err = uploadRope(be, m.Config, cfg.MaxSeq); err != nil {
		return nil, err
	}
	return t, be.Err()
}

// layoutRound is the granule of the activations' sequence length: a
// micro-batch a few tokens longer than the longest so far reuses the
// layout instead of allocating anew.
const layoutRound = 64

// layout makes the activations hold B sequences of T positions. They are
// laid out for the largest micro-batch seen so far, not for MaxBatch ×
// MaxSeq: attention without FlashAttention keeps B·heads·T² floats a
// layer, so a 4 × 300-token step of SmolLM2-135M holds 0.4 GB of
// probabilities where 8 × 1024 would take 9 GB. A micro-batch that needs
// more frees the arena and lays it out again, at least as large in both
// dimensions (T rounded up to layoutRound, at most MaxSeq), so the layout
// settles after the first few steps.
func (t *Trainer) layout(B, T int) error {
	if B <= t.capB && T <= t.capT {
		return nil
	}
	B = max(B, t.capB)
	T = min(max((T+layoutRound-1)/layoutRound*layoutRound, t.capT), t.cfg.MaxSeq)
	for _, b := range []Buf{t.actBuf, t.act16} {
		if b != nil {
			t.be.Free(b)
		}
	}
	t.actBuf, t.act16, t.capB, t.capT = nil, nil, 0, 0
	be := t.be
	actBuf, act16, err := allocArena(be, func(ar *arena) {
		glu := pairedGLU(be, &t.params, t.lo)
		t.acts, t.gacts = trainActs(t.d, B, T, ar, t.cfg.Checkpoint, t.scoreOnly, glu, glu != nil && !t.lo.adaptsAny(modDown),
			packedQKV(be, &t.params, t.lo, t.model.Config.AttentionBias), flashOf(be, t.d) != nil)
		if t.lo != nil {
			t.lo.acts(t.d, B*T, ar, t.cfg.Checkpoint)
		}
		// Two floats a row, so that SetTemperature can move off 1.
		t.acts.rawlogp, t.acts.rawlse = ar.take(B*T), ar.take(B*T)
	})
	if err != nil {
		return fmt.Errorf("gpu: activations for %d × %d tokens: %w", B, T, err)
	}
	N := B * T
	t.actBuf, t.act16, t.capB, t.capT = actBuf, act16, B, T
	t.tokens, t.targets = make([]int32, N), make([]int32, N)
	t.logp, t.dlogp = make([]float32, N), make([]float32, N)
	t.rawLogp = make([]float32, N)
	return be.Err()
}

// bindFrozen uploads m's weights for reading only to a FrozenWeights
// backend: the whole arena through UploadFrozen, of which the matrices
// are read, and the vectors (norm weights and biases, which ops other
// than the products read) as float32 in a small buffer of their own. A
// LoRA trainer's base and a sampler's weights are bound this way.
func bindFrozen(be Backend, fw FrozenWeights, m *Model) (mats, vecs Buf, p Params[Buf], err error) {
	if mats, err = fw.UploadFrozen(m.arena); err != nil {
		return nil, nil, p, fmt.Errorf("gpu: upload frozen weights: %w", err)
	}
	vecAt := map[int]int{} // arena offset -> offset in vec
	var vec []float32
	for _, s := range m.specs {
		if len(s.Shape) == 1 {
			vecAt[s.off] = len(vec)
			vec = append(vec, m.arena[s.off:s.off+s.Shape[0]]...)
		}
	}
	if vecs, err = be.Alloc(len(vec)); err != nil {
		be.Free(mats)
		return nil, nil, p, fmt.Errorf("gpu: allocate norm weights and biases: %w", err)
	}
	be.Upload(vecs, vec)
	p = bindParams(m.Config, func(off, n int) Buf {
		if v, ok := vecAt[off]; ok {
			return be.Slice(vecs, v, n)
		}
		return be.Slice(mats, off, n)
	})
	return mats, vecs, p, be.Err()
}

// bindHost returns a backend buffer holding data: data itself on a
// HostBacked backend (view true), else an uploaded copy.
func bindHost(be Backend, data []float32) (b Buf, view bool, err error) {
	if hb, ok := be.(HostBacked); ok {
		if w := hb.Wrap(data); w != nil {
			return w, true, nil
		}
	}
	if b, err = be.Alloc(len(data)); err != nil {
		return nil, false, fmt.Errorf("gpu: allocate weights: %w", err)
	}
	be.Upload(b, data)
	return b, false, be.Err()
}

func uploadRope(be Backend, c Config, P int) (cos, sin Buf, err error) {
	hc, hs := ropeTables(c, P)
	if cos, err = be.Alloc(len(hc)); err != nil {
		return nil, nil, err
	}
	if sin, err = be.Alloc(len(hs)); err != nil {
		return nil, nil, err
	}
	be.Upload(cos, hc)
	be.Upload(sin, hs)
	return cos, sin, be.Err()
}

// ErrBatch reports a micro-batch that does not fit the Trainer.
var ErrBatch = errors.New("gpu: bad batch")

// pack lays the batch out as tokens and next-token targets in B rows of T
// (right-padded with token 0, masked) and returns B, T and, per sequence,
// the row offset of its first completion target.
func (t *Trainer) pack(batch []Sequence) (B, T int, starts []int, err error) {
	if len(batch) == 0 || len(batch) > t.cfg.MaxBatch {
		return 0, 0, nil, fmt.Errorf("%w: %d sequences, want 1..%d", ErrBatch, len(batch), t.cfg.MaxBatch)
	}
	V := int32(t.d.V)
	for i, s := range batch {
		n := len(s.Prompt) + len(s.Completion) - 1
		if len(s.Prompt) == 0 || len(s.Completion) == 0 {
			return 0, 0, nil, fmt.Errorf("%w: sequence %d has an empty prompt or completion", ErrBatch, i)
		}
		if n > t.cfg.MaxSeq {
			return 0, 0, nil, fmt.Errorf("%w: sequence %d has %d positions, MaxSeq is %d", ErrBatch, i, n, t.cfg.MaxSeq)
		}
		for _, tok := range append(s.Prompt[:len(s.Prompt):len(s.Prompt)], s.Completion...) {
			if tok < 0 || tok >= V {
				return 0, 0, nil, fmt.Errorf("%w: sequence %d has token %d outside the vocabulary of %d", ErrBatch, i, tok, V)
			}
		}
		T = max(T, n)
	}
	B = len(batch)
	if err := t.layout(B, T); err != nil {
		return 0, 0, nil, err
	}
	clear(t.tokens[:B*T])
	clear(t.targets[:B*T])
	starts = make([]int, B)
	for b, s := range batch {
		row := t.tokens[b*T : b*T+T]
		tgt := t.targets[b*T : b*T+T]
		n := copy(row, s.Prompt)
		copy(row[n:], s.Completion[:len(s.Completion)-1])
		copy(tgt, s.Prompt[1:])
		copy(tgt[len(s.Prompt)-1:], s.Completion)
		starts[b] = b*T + len(s.Prompt) - 1
	}
	return B, T, starts, nil
}

// run does forward, the host-side objective and backward for a packed
// batch; objective fills dlogp (zero outside completions) from logp.
// With sampling (Step) the log-probs are at the configured temperature,
// else (SFTStep) at 1.
func (t *Trainer) run(batch []Sequence, sampling bool, objective func(B, T int, starts []int) (Metrics, error)) (Metrics, error) {
	if t.scoreOnly {
		return Metrics{}, ErrScoreOnly
	}
	if err := t.be.Err(); err != nil {
		return Metrics{}, err
	}
	t0 := time.Now()
	B, T, starts, err := t.pack(batch)
	if err != nil {
		return Metrics{}, err
	}
	N := B * T
	s := step{B: B, T: T}
	if sampling {
		s.temp = t.cfg.Temperature
	}
	forward(t.be, t.d, &t.params, t.lo, &t.acts, t.cos, t.sin, s, t.tokens[:N], t.targets[:N])
	if err := t.be.Download(t.logp[:N], t.acts.logp); err != nil {
		return Metrics{}, err
	}
	if s.scaled() {
		if err := t.be.Download(t.rawLogp[:N], t.acts.rawlogp); err != nil {
			return Metrics{}, err
		}
	}
	clear(t.dlogp[:N])
	met, err := objective(B, T, starts)
	if err != nil {
		return Metrics{}, err
	}
	if s.scaled() {
		// d logp_τ / d logits = (onehot − softmax(logits/τ))/τ: the
		// backward's log-softmax reads the scaled logits, and 1/τ goes
		// into dlogp.
		inv := float32(1 / s.temp)
		for i := range t.dlogp[:N] {
			t.dlogp[i] *= inv
		}
	}
	if t.micro == 0 {
		t.be.Zero(t.gradBuf)
	}
	t.be.Upload(t.gacts.dlogp, t.dlogp[:N])
	backward(t.be, t.d, &t.params, &t.grads, t.lo, &t.acts, &t.gacts, t.cos, t.sin, B, T, t.tokens[:N], t.targets[:N], t.cfg.Checkpoint)
	t.micro++
	var opt time.Time
	if t.micro == t.cfg.AccumSteps {
		if err := t.update(&met, &opt); err != nil {
			return met, err
		}
	}
	met.Step = t.step
	err = t.be.Err()
	end := time.Now()
	if opt.IsZero() {
		met.FwdBwdTime = end.Sub(t0)
	} else {
		met.FwdBwdTime, met.OptimizerTime = opt.Sub(t0), end.Sub(opt)
	}
	return met, err
}

// Step runs one GRPO micro-batch: every cfg.AccumSteps calls make one
// optimizer step. Loss is the clipped surrogate (plus KL) averaged as
// configured.
func (t *Trainer) Step(batch []Sequence) (Metrics, error) {
	g := t.cfg.GRPO
	return t.run(batch, true, func(B, T int, starts []int) (Metrics, error) {
		var met Metrics
		total := 0
		for _, s := range batch {
			total += len(s.Completion)
		}
		for i, s := range batch {
			n := len(s.Completion)
			if s.OldLogProbs != nil && len(s.OldLogProbs) != n {
				return met, fmt.Errorf("%w: sequence %d has %d old log-probs for %d completion tokens", ErrBatch, i, len(s.OldLogProbs), n)
			}
			if s.BehavLogProbs != nil && len(s.BehavLogProbs) != n {
				return met, fmt.Errorf("%w: sequence %d has %d behaviour log-probs for %d completion tokens", ErrBatch, i, len(s.BehavLogProbs), n)
			}
			if g.KLCoef > 0 && len(s.RefLogProbs) != n {
				return met, fmt.Errorf("%w: sequence %d has %d reference log-probs for %d completion tokens (KLCoef > 0)", ErrBatch, i, len(s.RefLogProbs), n)
			}
			weight := 1 / float64(total)
			if g.Averaging == SequenceMean {
				weight = 1 / float64(n*len(batch))
			}
			lp := widen(t.logp[starts[i] : starts[i]+n])
			in := PolicyInput{Adv: s.Advantage, Logp: lp, Weight: weight}
			if s.OldLogProbs != nil {
				in.Old = widen(s.OldLogProbs)
			}
			if s.BehavLogProbs != nil {
				in.Behav = widen(s.BehavLogProbs)
				if t.cfg.Temperature != 1 && !s.BehavProcessed {
					if in.Old != nil {
						return met, fmt.Errorf("%w: sequence %d has raw behaviour log-probs and its own old log-probs at temperature %v: the conversion needs the trainer's π_old", ErrBatch, i, t.cfg.Temperature)
					}
					// ln w_τ = (ln π_old,1 − ln π_behav,1)/τ, as a
					// behaviour log-prob at τ.
					raw := t.rawLogp[starts[i] : starts[i]+n]
					for k := range in.Behav {
						in.Behav[k] = lp[k] - (float64(raw[k])-in.Behav[k])/t.cfg.Temperature
					}
				}
			}
			if g.KLCoef > 0 {
				in.Ref = widen(s.RefLogProbs)
			}
			tl := PolicyLoss(g, in)
			met.Loss += tl.Loss
			met.Entropy += tl.Entropy / float64(total)
			met.Rollout.Add(tl.Rollout)
			met.KL += tl.KL / float64(total)
			met.ClipFrac += float64(tl.Clipped) / float64(total)
			met.MaskedFrac += float64(tl.Masked) / float64(total)
			for k, d := range tl.DLogp {
				// backward computes the gradient of sum dlogp*logp; the
				// optimizer descends on the loss.
				t.dlogp[starts[i]+k] = float32(d)
			}
		}
		met.Tokens = total
		return met, nil
	})
}

// SFTStep runs one supervised micro-batch: cross-entropy on the completion
// tokens only, averaged over them (the prompt is context).
func (t *Trainer) SFTStep(batch []Sequence) (Metrics, error) {
	return t.run(batch, false, func(B, T int, starts []int) (Metrics, error) {
		var met Metrics
		for _, s := range batch {
			met.Tokens += len(s.Completion)
		}
		w := 1 / float64(met.Tokens)
		for i, s := range batch {
			for k := range s.Completion {
				met.Loss -= w * float64(t.logp[starts[i]+k])
				t.dlogp[starts[i]+k] = float32(-w)
			}
		}
		return met, nil
	})
}

// update applies AdamW to the accumulated gradients: average over the
// micro-batches, clip the global norm, decay matrices only. It sets
// *start when the gradient norm is read back (the backward pass done).
func (t *Trainer) update(met *Metrics, start *time.Time) error {
	scale := 1 / float64(t.cfg.AccumSteps)
	ss, err := t.be.SumSquares(t.gradBuf)
	if err != nil {
		return err
	}
	*start = time.Now()
	norm := math.Sqrt(ss) * scale
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		t.micro = 0
		return fmt.Errorf("gpu: gradient norm is %v at step %d; step skipped", norm, t.step+1)
	}
	if t.cfg.GradClip > 0 && norm > t.cfg.GradClip {
		scale *= t.cfg.GradClip / norm
	}
	t.step++
	lr := t.cfg.LRAt(t.step)
	h := AdamWParams{
		LR: float32(lr), Beta1: float32(t.cfg.Beta1), Beta2: float32(t.cfg.Beta2),
		Eps: float32(t.cfg.Eps), WeightDecay: float32(t.cfg.WeightDecay), GradScale: float32(scale), Step: t.step,
	}
	window := func(off, n int) (p, g, m, v Buf) {
		return t.be.Slice(t.trainBuf, off, n), t.be.Slice(t.gradBuf, off, n), t.be.Slice(t.mBuf, off, n), t.be.Slice(t.vBuf, off, n)
	}
	if ga, ok := t.be.(GroupedAdamW); ok {
		// One call for each run of adjacent tensors (one for a whole
		// model) instead of one a tensor, most of which are norms and
		// biases of a few hundred floats.
		if t.runs == nil {
			t.runs = adjacentRuns(t.groups)
		}
		for _, r := range t.runs {
			p, g, m, v := window(r.off, r.n)
			ga.AdamWGroups(p, g, m, v, r.groups, h)
		}
	} else {
		for _, g := range t.groups {
			hg := h
			if !g.decay {
				hg.WeightDecay = 0
			}
			p, gr, m, v := window(g.off, g.n)
			t.be.AdamW(p, gr, m, v, g.n, hg)
		}
	}
	t.micro = 0
	met.Applied, met.LR, met.GradNorm = true, lr, norm
	return t.be.Err()
}

// SetTemperature changes TrainConfig.Temperature (0 means 1) from the
// next Step or LogProbs on: a learner whose samples record the
// temperature they were drawn at follows them.
func (t *Trainer) SetTemperature(temp float64) error {
	if temp < 0 || math.IsNaN(temp) || math.IsInf(temp, 0) {
		return fmt.Errorf("gpu: temperature %v, want ≥ 0", temp)
	}
	if temp == 0 {
		temp = 1
	}
	t.cfg.Temperature = temp
	return nil
}

// SyncHost copies the trained weights into their host arena: the model's,
// or with LoRA the adapters' (a no-op on a HostBacked backend, where the
// arena is trained in place). Call it before saving a checkpoint.
func (t *Trainer) SyncHost() error {
	if t.trainView || t.scoreOnly {
		return t.be.Err()
	}
	return t.be.Download(t.host, t.trainBuf)
}

// Grads returns the gradient arena in the order of Model.Tensors, or with
// LoRA of LoRA.Tensors (for tests and diagnostics); valid until the next
// step.
func (t *Trainer) Grads() Buf { return t.gradBuf }

// LoRA returns the adapters being trained (nil without LoRA); their host
// values are current after SyncHost.
func (t *Trainer) LoRA() *LoRA { return t.lora }

// LoRAParams returns the backend's buffer of the adapters, laid out as
// LoRA's arena (nil without LoRA).
func (t *Trainer) LoRAParams() Buf {
	if t.lora == nil {
		return nil
	}
	return t.trainBuf
}

// Params returns the backend's weight buffer, laid out as Model's arena.
// A LoRA trainer on a FrozenWeights backend returns its frozen upload,
// which only the model's weight reads accept.
func (t *Trainer) Params() Buf { return t.paramBuf }

// LogProbs runs a forward pass only and returns log π(Completion[t]) for
// each sequence, under the trainer's current weights.
func (t *Trainer) LogProbs(batch []Sequence) ([][]float32, error) {
	N, starts, err := t.forwardLogProbs(batch)
	if err != nil {
		return nil, err
	}
	if err := t.be.Download(t.logp[:N], t.acts.logp); err != nil {
		return nil, err
	}
	out := make([][]float32, len(batch))
	for i, s := range batch {
		out[i] = append([]float32(nil), t.logp[starts[i]:starts[i]+len(s.Completion)]...)
	}
	return out, nil
}

// LogProbs64 is LogProbs read in the backend's precision when it exposes
// float64 memory (the float64 CPU backend), for gradient checks; other
// backends return LogProbs widened.
func (t *Trainer) LogProbs64(batch []Sequence) ([][]float64, error) {
	N, starts, err := t.forwardLogProbs(batch)
	if err != nil {
		return nil, err
	}
	lp := make([]float64, N)
	if d, ok := t.be.(interface{ Data(Buf) []float64 }); ok {
		copy(lp, d.Data(t.acts.logp))
	} else {
		if err := t.be.Download(t.logp[:N], t.acts.logp); err != nil {
			return nil, err
		}
		lp = widen(t.logp[:N])
	}
	out := make([][]float64, len(batch))
	for i, s := range batch {
		out[i] = lp[starts[i] : starts[i]+len(s.Completion)]
	}
	return out, t.be.Err()
}

// forwardLogProbs packs batch into N rows and runs a forward pass that
// leaves the log-probability of each row's target in t.acts.logp; starts
// are the rows of each sequence's first completion token.
func (t *Trainer) forwardLogProbs(batch []Sequence) (N int, starts []int, err error) {
	B, T, starts, err := t.pack(batch)
	if err != nil {
		return 0, nil, err
	}
	N = B * T
	forward(t.be, t.d, &t.params, t.lo, &t.acts, t.cos, t.sin, step{B: B, T: T, temp: t.cfg.Temperature}, t.tokens[:N], t.targets[:N])
	return N, starts, nil
}

func widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// OptimizerState returns copies of the AdamW moments m and v and the
// number of optimizer steps taken, for a checkpoint from which training
// continues exactly. The moments are laid out as the trained tensors one
// after another: Model.Tensors' order (not the arena's), or with LoRA
// the adapters' arena.
func (t *Trainer) OptimizerState() (m, v []float32, step int, err error) {
	if t.scoreOnly {
		return nil, nil, 0, ErrScoreOnly
	}
	n := len(t.host)
	m, v = make([]float32, n), make([]float32, n)
	if err := t.be.Download(m, t.mBuf); err != nil {
		return nil, nil, 0, err
	}
	if err := t.be.Download(v, t.vBuf); err != nil {
		return nil, nil, 0, err
	}
	if t.lora == nil {
		m, v = tensorOrder(t.model.specs, m, false), tensorOrder(t.model.specs, v, false)
	}
	return m, v, t.step, nil
}

// SetOptimizerState restores what OptimizerState returned. It must be
// called between optimizer steps (no micro-batch accumulated).
func (t *Trainer) SetOptimizerState(m, v []float32, step int) error {
	n := len(t.host)
	switch {
	case t.scoreOnly:
		return ErrScoreOnly
	case len(m) != n || len(v) != n:
		return fmt.Errorf("gpu: optimizer state has %d and %d moments, the trainer %d trained parameters", len(m), len(v), n)
	case step < 0:
		return fmt.Errorf("gpu: negative optimizer step %d", step)
	case t.micro != 0:
		return fmt.Errorf("gpu: SetOptimizerState with %d micro-batches accumulated", t.micro)
	}
	if t.lora == nil {
		m, v = tensorOrder(t.model.specs, m, true), tensorOrder(t.model.specs, v, true)
	}
	t.be.Upload(t.mBuf, m)
	t.be.Upload(t.vBuf, v)
	t.step = step
	return t.be.Err()
}

// SetAccumSteps changes how many micro-batches make the next optimizer
// step (the learner sizes it to each batch). It must be called between
// optimizer steps.
func (t *Trainer) SetAccumSteps(n int) error {
	if n < 1 {
		return fmt.Errorf("gpu: AccumSteps %d, want ≥ 1", n)
	}
	if t.micro != 0 {
		return fmt.Errorf("gpu: SetAccumSteps with %d micro-batches accumulated", t.micro)
	}
	t.cfg.AccumSteps = n
	return nil
}

// Config returns the trainer's configuration with defaults filled in.
func (t *Trainer) Config() TrainConfig { return t.cfg }

// Package learner is swerl's trainer loop: it consumes scored samples in
// batches of whole groups, takes GRPO (or SFT) steps with gpu.Trainer and
// publishes every version through sinks/checkpoint.
//
// Versions: a fresh run publishes the initial model as version 0, so that
// in-process policies ("model:OUT") can serve it; each step then publishes
// version+1. A checkpoint is the Hugging Face model directory plus
// trainer_state/optimizer.safetensors (the AdamW moments, tensors
// "exp_avg" and "exp_avg_sq" over the flat parameter arena, metadata
// "step"), so Resume continues exactly. The index row records the commit
// points (Learner.Offsets: per partition, the lowest position of a sample
// not yet trained), a Committer source is committed only after the
// publish (and the announcement), and trained/vNNNNNN.json (StepRecord)
// records the samples each step trained on and the groups a resumed run
// must skip when it reads them again.
//
// LoRA (Config.LoRA.Rank > 0): only adapters on a frozen base are
// trained, and each version is a PEFT adapter directory
// (adapter_config.json, adapter_model.safetensors, package
// swerl/gpu/peft) plus trainer_state/optimizer.safetensors with the
// adapters' AdamW moments. The adapter config's base_model_name_or_path
// is the absolute path of the base model directory, which modeldir.Load
// merges the adapter into, so "model:OUT" policies serve LoRA runs too. A
// fresh LoRA run publishes the zero adapter (the base itself) as version
// 0; a LoRA run resumed from a full checkpoint (after a full fine-tuning
// warm start) takes that checkpoint as its base, starts a new adapter,
// and keeps that checkpoint's files whatever KeepCheckpoints says.
//
// Tokens: samples from the in-process policy carry prompt and completion
// token ids and the sampler's log-probabilities; those are trained on
// as they are. The log-probabilities are the behaviour policy π_behav:
// π_old is the trainer's own at the start of the step (one optimizer
// update per batch makes the step's forward pass that recomputation), and
// Train.GRPO.Correction weighs each token by w = π_old/π_behav (see
// docs/offpolicy.md); every step record carries the mismatch's
// statistics (StepStats). Samples without token
// ids (an HTTP policy that reported none) are tokenized with the model's
// tokenizer and chat template (completion text, plus the eos token when
// the finish reason is "stop"), and their π_old is taken to be the current
// weights: the ratio is 1 and the gradient is the on-policy policy
// gradient, which is exact when the sampler served the current version.
package learner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"swerl/gpu"
	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/gpu/tokenizer"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/transforms/groups"
)

// Config configures a Learner.
type Config struct {
	// Out is the output root: checkpoints/ and index.parquet.
	Out string
	// Model is the model directory a fresh run starts from (published as
	// version 0). Ignored with Resume when Out has a good checkpoint.
	Model string
	// Resume continues from the newest good checkpoint in Out. Without
	// it, an Out that already has versions is an error.
	Resume bool
	// FreshOptimizer, with Resume, starts AdamW's moments from zero instead
	// of loading them: a new phase (RL after an SFT warm start) whose
	// gradients have another scale than the moments the last phase left.
	FreshOptimizer bool
	// KeepCheckpoints, when positive, keeps the files of only the newest
	// this many versions (and version 0); see checkpoint.Config.Keep. 0
	// keeps all.
	KeepCheckpoints int
	// TiedHeadTensor writes lm_head.weight beside tied embeddings in every
	// full-weight checkpoint (modeldir.WriteCheckpoint's tiedHead), for
	// engines that reload the versions in place: swerl run and swerl learn
	// set it when they push versions to engines.
	TiedHeadTensor bool
	// Reference is the version whose weights are the frozen reference of
	// the KL term (Train.GRPO.KLCoef > 0): 0, the default, is the run's
	// first version; after a warm start, the version RL started from. Its
	// files are kept whatever KeepCheckpoints says.
	Reference int64
	// BatchGroups is the number of whole groups per optimizer step.
	// Default 4.
	BatchGroups int
	// MaxStaleness drops samples whose policy version is more than this
	// many versions behind the version being trained; negative disables.
	MaxStaleness int
	// MaskTruncated leaves out of the loss the samples whose completion
	// was cut at the token limit (finish_reason "length"): DAPO's overlong
	// filtering. The reward reads only the tagged answer, so a cut
	// completion can score 1.0 with hundreds of tokens of babble after
	// </solution>, which plain GRPO then reinforces (seen on the built-in
	// model). They still count in their group's advantages. Off by
	// default: where every completion is cut on purpose (short
	// --max-tokens) it would leave nothing to learn from.
	MaskTruncated bool
	// Temperature is the rollouts' sampling temperature, at which the
	// trainer computes its log-probs (Train.Temperature is set from it).
	// 0: each step follows its samples, at the temperature the first of
	// them records (1 when none does). Either way a sample recorded at
	// another temperature is skipped.
	Temperature float64
	// LoRA, with a positive Rank, trains LoRA adapters on the frozen
	// model instead of every weight, and publishes adapters (see the
	// package comment). Default: full fine-tuning.
	LoRA gpu.LoRAConfig
	// Train configures the trainer; Train.MaxBatch is the micro-batch
	// size (sequences), and a step accumulates as many micro-batches as
	// its groups need.
	Train gpu.TrainConfig
	// Backend runs the model. Required.
	Backend gpu.Backend
	// Announce, when set, is called with every published version (the
	// swerl.weights topic) before offsets are committed.
	Announce func(ctx context.Context, v schemas.WeightVersion) error
	// Log receives warnings (skipped corrupt checkpoints, dropped
	// samples). Default slog.Default().
	Log *slog.Logger
	// Progress receives one line per step (at most one every
	// ProgressEvery) and a summary. Default: none.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Stats count what the learner did.
type Stats struct {
	Steps       int   // optimizer steps taken in this run
	Groups      int   // groups trained on
	Samples     int   // samples trained on
	Stale       int   // samples dropped as too stale
	Skipped     int   // samples skipped (too long, bad tokens, empty)
	Truncated   int   // samples left out of the loss as cut at the token limit (see MaskTruncated)
	Incomplete  int   // samples of groups never completed (dropped at the end)
	Duplicates  int   // samples read again whose group was already trained or holds them
	Tokens      int64 // completion tokens trained on
	Version     int64 // last published version
	LastLoss    float64
	LastReward  float64
	FirstReward float64
}

// Learner trains one model and publishes its versions.
type Learner struct {
	cfg     Config
	log     *slog.Logger
	store   *checkpoint.Store
	model   *gpu.Model
	tok     *tokenizer.Tokenizer
	stop    []int32
	src     string // directory the non-weight files are copied from
	trainer *gpu.Trainer
	ref     *gpu.Trainer // frozen reference for KL; nil without KL
	lora    *gpu.LoRA    // the adapters trained; nil without LoRA
	base    string       // with LoRA, the absolute base model directory

	version int64 // the version being trained from (last published or resumed)
	indexed int64 // the newest indexed version (≥ version after a skipped corrupt one)
	step    int64
	offsets map[string]schemas.TopicOffset // topic/partition → next offset
	stats   Stats

	record       StepRecord // the last one written
	last         StepStats  // of the last GRPO step (its record holds all but the publish and step times)
	lastProgress time.Time
	tty          bool // Progress is a terminal: one line rewritten with \r
	live         bool // a live line is on the terminal
	sft          bool // train runs SFTStep
	sftNext      int  // the example SFT's next batch starts at, across calls
	prog         progress
	done         func() // removes the local store of a bucket Out (see bucketOut)
}

// ErrPublished is the error of a learner started fresh (Config.Resume
// false) on an output root that already holds published versions.
var ErrPublished = errors.New("the output root already holds published versions; resume from them or start in another root")

// New opens the store, loads the model (fresh or resumed) and, on a fresh
// run, publishes it as version 0. The publish (Config.Announce included)
// ends when ctx does, so an interrupt stops a learner that is still
// opening. An Out in a bucket (gs://…, s3://…) is worked on in a local
// store that Close removes; each version is copied to the bucket before
// it is announced.
// DefaultBatchGroups is the whole groups an optimizer step takes when
// Config.BatchGroups is 0, and swerl learn's --batch-groups default.
const DefaultBatchGroups = 4

func New(ctx context.Context, cfg Config) (_ *Learner, err error) {
	if cfg.Backend == nil {
		return nil, errors.New("learner: no backend")
	}
	if cfg.BatchGroups == 0 {
		cfg.BatchGroups = DefaultBatchGroups
	}
	if cfg.BatchGroups < 0 {
		return nil, fmt.Errorf("learner: batch groups %d, want ≥ 1", cfg.BatchGroups)
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 2 * time.Second
	}
	if cfg.Temperature < 0 {
		return nil, fmt.Errorf("learner: temperature %v is negative", cfg.Temperature)
	}
	if cfg.Temperature > 0 {
		cfg.Train.Temperature = cfg.Temperature
	}
	l := &Learner{cfg: cfg, log: cfg.Log, offsets: map[string]schemas.TopicOffset{}}
	if f, ok := cfg.Progress.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			l.tty = true
		}
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.done, err = bucketOut(ctx, &cfg, l.log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.done()
		}
	}()
	l.cfg = cfg
	if l.store, err = checkpoint.Open(checkpoint.Config{Dir: cfg.Out, Log: l.log, Keep: cfg.KeepCheckpoints, Pin: []int64{cfg.Reference}}); err != nil {
		return nil, err
	}
	rows, err := l.store.Versions()
	if err != nil {
		return nil, err
	}
	var optState string
	l.indexed = -1
	if len(rows) > 0 {
		l.indexed = rows[len(rows)-1].Version
	}
	switch {
	case cfg.Resume && len(rows) > 0:
		v, err := l.store.LatestGood()
		if err != nil {
			return nil, fmt.Errorf("learner: resuming: %w", err)
		}
		l.src = l.store.Path(v.Version)
		l.version, l.step = v.Version, v.Step
		for _, o := range v.Offsets {
			l.offsets[offKey(o)] = o
		}
		optState = filepath.Join(l.src, modeldir.TrainerStateDir, "optimizer.safetensors")
		l.log.Info("learner: resuming", "version", v.Version, "step", v.Step, "dir", l.src)
	case len(rows) > 0:
		return nil, fmt.Errorf("learner: %s has %d published versions (latest v%d): %w", l.store.Dir(), len(rows), rows[len(rows)-1].Version, ErrPublished)
	default:
		if cfg.Model == "" {
			// A user reads this (swerl learn --resume on an empty --out):
			// it names the folder and the flag, not the field.
			return nil, fmt.Errorf("learner: nothing to resume in %s (no version published yet) and no model to start from (--model)", l.store.Dir())
		}
		dir, _, _, err := modeldir.Resolve(cfg.Model, l.log)
		if err != nil {
			return nil, err
		}
		l.src = dir
		l.version = -1
	}
	if cfg.LoRA.Rank > 0 {
		if optState, err = l.openLoRA(optState); err != nil {
			return nil, err
		}
	} else {
		mp, err := modeldir.Load(l.src)
		if err != nil {
			return nil, err
		}
		l.model, l.tok, l.stop = mp.Model, mp.Tokenizer, mp.Stop
		if modeldir.IsAdapter(l.src) {
			// Full fine-tuning continues from a LoRA version, merged: the
			// config and tokenizer files come from its base, and the
			// adapters' moments do not fit the full model.
			if l.src, err = modeldir.AdapterBase(l.src); err != nil {
				return nil, err
			}
			l.log.Info("learner: full fine-tuning from a merged LoRA version; AdamW starts fresh")
			optState = ""
		}
		if l.trainer, err = gpu.NewTrainer(l.model, cfg.Backend, cfg.Train); err != nil {
			return nil, err
		}
	}
	if optState != "" && !cfg.FreshOptimizer {
		if err := l.loadOptimizer(optState); err != nil {
			return nil, err
		}
	}
	if cfg.Train.GRPO.KLCoef > 0 {
		if err := l.openReference(); err != nil {
			return nil, err
		}
	}
	if l.version < 0 {
		if err := l.publish(ctx, gpu.Metrics{}, 0, 0); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Close removes what the learner keeps only while it runs: the local
// store of an Out in a bucket. Everything published stays where it was
// published.
func (l *Learner) Close() error {
	l.done()
	return nil
}

// openLoRA loads the base and the adapters of a LoRA run and makes the
// trainer. l.src is an adapter version (resume: its base and adapters) or
// a model directory (a fresh adapter on it, whose moments start at zero:
// the returned optimizer state path is then ""). A base inside the store
// is pinned against pruning.
func (l *Learner) openLoRA(optState string) (string, error) {
	base, adapter := l.src, modeldir.IsAdapter(l.src)
	var err error
	if adapter {
		if base, err = modeldir.AdapterBase(l.src); err != nil {
			return "", err
		}
	} else {
		optState = ""
	}
	if l.base, err = filepath.Abs(base); err != nil {
		return "", fmt.Errorf("learner: %w", err)
	}
	mp, err := modeldir.Load(l.base)
	if err != nil {
		return "", err
	}
	l.model, l.tok, l.stop = mp.Model, mp.Tokenizer, mp.Stop
	if l.lora, err = gpu.NewLoRA(l.model.Config, l.cfg.LoRA); err != nil {
		return "", fmt.Errorf("learner: %w", err)
	}
	if adapter {
		a, err := peft.ReadFor(l.src, l.model.Config)
		if err != nil {
			return "", err
		}
		want := l.lora.Config()
		targets := slices.Sorted(slices.Values(a.Config.TargetModules))
		if a.Config.R != want.Rank || a.Config.LoraAlpha != want.Alpha || !slices.Equal(targets, slices.Sorted(slices.Values(want.Targets))) {
			return "", fmt.Errorf("learner: resuming: %s has rank %d, alpha %g, targets %v; this run asks for rank %d, alpha %g, targets %v",
				l.src, a.Config.R, a.Config.LoraAlpha, a.Config.TargetModules, want.Rank, want.Alpha, want.Targets)
		}
		if err := l.lora.SetTensors(a.Tensors); err != nil {
			return "", fmt.Errorf("learner: %s: %w", l.src, err)
		}
	}
	if rel, err := filepath.Rel(filepath.Join(l.store.Dir(), checkpoint.CheckpointsDir), l.base); err == nil {
		var v int64
		if _, err := fmt.Sscanf(rel, "v%d", &v); err == nil && rel == checkpoint.VersionDir(v) {
			if l.store, err = checkpoint.Open(checkpoint.Config{Dir: l.cfg.Out, Log: l.log, Keep: l.cfg.KeepCheckpoints, Pin: []int64{l.cfg.Reference, v}}); err != nil {
				return "", err
			}
		}
	}
	if l.trainer, err = gpu.NewLoRATrainer(l.model, l.lora, l.cfg.Backend, l.cfg.Train); err != nil {
		return "", err
	}
	return optState, nil
}

// openReference loads the frozen reference for the KL term: version
// Config.Reference of the store. Version 0 may be missing (a fresh run
// publishes it after this, from the weights loaded now) or damaged, and the
// current weights stand in; a later version must be there and verify.
func (l *Learner) openReference() error {
	dir := l.src
	ref := l.cfg.Reference
	v, err := l.store.Get(ref)
	if err == nil {
		err = l.store.Verify(v)
	}
	switch {
	case err == nil:
		dir = l.store.Path(ref)
	case ref == 0 && l.version < 0:
		// A fresh run: version 0 will be published from these weights.
	case ref == 0:
		l.log.Warn("learner: version 0 is missing or does not verify; the KL reference is the current model", "reason", err.Error())
	default:
		return fmt.Errorf("learner: KL reference v%d: %w", ref, err)
	}
	mp, err := modeldir.Load(dir)
	if err != nil {
		return err
	}
	rc := l.cfg.Train
	rc.GRPO.KLCoef = 0
	l.ref, err = gpu.NewScorer(mp.Model, l.cfg.Backend, rc)
	return err
}

func (l *Learner) loadOptimizer(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		l.log.Info("learner: the checkpoint has no optimizer state; AdamW starts fresh", "path", path)
		return nil
	}
	st, err := hf.OpenSafetensors(path)
	if err != nil {
		return fmt.Errorf("learner: optimizer state: %w", err)
	}
	defer st.Close()
	m, err := st.ReadFloat32("exp_avg", nil)
	if err != nil {
		return fmt.Errorf("learner: optimizer state %s: %w", path, err)
	}
	v, err := st.ReadFloat32("exp_avg_sq", nil)
	if err != nil {
		return fmt.Errorf("learner: optimizer state %s: %w", path, err)
	}
	step, err := strconv.Atoi(st.Metadata["step"])
	if err != nil {
		return fmt.Errorf("learner: optimizer state %s: metadata step %q: %w", path, st.Metadata["step"], err)
	}
	return l.trainer.SetOptimizerState(m, v, step)
}

// Version is the last published version.
func (l *Learner) Version() int64 { return l.version }

// Offsets are the commit points, sorted: per partition, the lowest
// position of a sample read but not yet trained (held for the next step or
// in a group still incomplete), or past the last sample read when there is
// none. Everything before them is trained or dropped; what a resumed run
// reads again at or after them is skipped by group (see StepRecord). They
// are the index row's Offsets and what a Kafka source commits.
func (l *Learner) Offsets() []schemas.TopicOffset {
	at := make(map[string]schemas.TopicOffset, len(l.offsets))
	for k, o := range l.offsets {
		at[k] = o
	}
	pin1 := func(o schemas.TopicOffset) {
		k := offKey(o)
		if c, ok := at[k]; ok && o.Topic != "" && o.Offset < c.Offset {
			c.Offset = o.Offset
			at[k] = c
		}
	}
	if b := l.prog.b; b != nil {
		b.positions(pin1)
	}
	for _, g := range l.prog.held {
		for _, o := range g.pos {
			pin1(o)
		}
	}
	out := make([]schemas.TopicOffset, 0, len(at))
	for _, o := range at {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Model returns the model being trained (its host weights are current
// after each publish); with LoRA, the frozen base (see LoRA).
func (l *Learner) Model() *gpu.Model { return l.model }

// LoRA returns the adapters being trained (nil without LoRA); their host
// values are current after each publish. LoRA().Merged(Model()) is the
// policy of the last published version.
func (l *Learner) LoRA() *gpu.LoRA { return l.lora }

// Tokenizer returns the model's tokenizer.
func (l *Learner) Tokenizer() *tokenizer.Tokenizer { return l.tok }

// LastStep returns the statistics of the last GRPO step of this process
// (its record's StepStats).
func (l *Learner) LastStep() StepStats { return l.last }

// Stats returns the counters so far.
func (l *Learner) Stats() Stats { s := l.stats; s.Version = l.version; return s }

func offKey(o schemas.TopicOffset) string { return o.Topic + "/" + strconv.Itoa(o.Partition) }

// consumed records the position o of a sample read (kept or dropped
// alike): the read position moves past it.
func (l *Learner) consumed(o schemas.TopicOffset) {
	o.Offset++ // the next offset to read
	k := offKey(o)
	if o.Offset > l.offsets[k].Offset {
		l.offsets[k] = o
	}
}

// weights are the tensors a version publishes: the adapters with LoRA,
// else the model's.
func (l *Learner) weights() []gpu.Tensor {
	if l.lora != nil {
		return l.lora.Tensors()
	}
	return l.model.Tensors()
}

// publish writes the current weights and optimizer state as version+1.
func (l *Learner) publish(ctx context.Context, met gpu.Metrics, reward float64, samples int) error {
	if err := l.trainer.SyncHost(); err != nil {
		return err
	}
	// A NaN or infinite weight is never published: the step fails.
	if err := gpu.CheckFinite(l.weights()); err != nil {
		return fmt.Errorf("learner: v%d not published: step %d left a weight NaN or infinite: %w", max(l.version, l.indexed)+1, l.step, err)
	}
	m, v, step, err := l.trainer.OptimizerState()
	if err != nil {
		return err
	}
	meta := schemas.WeightVersion{
		Version: max(l.version, l.indexed) + 1, Step: l.step, Loss: met.Loss, KL: met.KL, MeanReward: reward,
		Tokens: int64(met.Tokens), Samples: int64(samples), Offsets: l.Offsets(),
	}
	row, err := l.store.Publish(meta, func(dir string) error {
		if l.lora != nil {
			if err := peft.Write(dir, peft.FromLoRA(l.lora, l.base)); err != nil {
				return err
			}
		} else if _, err := modeldir.WriteCheckpoint(dir, l.src, l.model, l.cfg.TiedHeadTensor); err != nil {
			return err
		}
		sd := filepath.Join(dir, modeldir.TrainerStateDir)
		if err := os.MkdirAll(sd, 0o755); err != nil {
			return err
		}
		n := len(m)
		return hf.WriteSafetensors(filepath.Join(sd, "optimizer.safetensors"), []hf.Tensor{
			{Name: "exp_avg", Shape: []int{n}, Data: m},
			{Name: "exp_avg_sq", Shape: []int{n}, Data: v},
		}, hf.F32, map[string]string{"step": strconv.Itoa(step), "format": "swerl-adamw"})
	})
	if err != nil {
		return err
	}
	l.version, l.indexed = row.Version, row.Version
	l.stats.Version = row.Version
	// The next checkpoint copies its config and tokenizer files from the
	// newest one, which the store always keeps (Config.KeepCheckpoints may
	// have deleted the version this learner started from).
	l.src = l.store.Path(row.Version)
	mVersion.Set(float64(row.Version))
	if l.cfg.Announce != nil {
		if err := l.cfg.Announce(ctx, row); err != nil {
			return fmt.Errorf("learner: announce v%d: %w", row.Version, err)
		}
	}
	return nil
}

// group is the samples of one group id, in arrival order, and where each
// was read (Topic "" when its source has no positions).
type group struct {
	id      string
	samples []schemas.Sample
	pos     []schemas.TopicOffset
}

// read is a sample and where it was read: a member of the batcher's
// groups.
type read struct {
	s   schemas.Sample
	pos schemas.TopicOffset
}

// batcher assembles whole groups from a sample stream (a groups.Assembler
// keyed by group id): a group is whole when it holds its first sample's
// GroupSize samples, or, when its samples say group_complete=false (the
// train pipeline emitted it incomplete, all its samples together), when a
// sample of another group arrives. A sample whose pending group already
// holds its id (a copy the train pipeline produced again) is a duplicate.
type batcher struct {
	l   *Learner
	asm *groups.Assembler[read]
}

func newBatcher(l *Learner) *batcher {
	return &batcher{l: l, asm: groups.New(groups.Config[read]{
		Key:        func(r *read) string { return r.s.GroupID },
		ID:         func(r *read) string { return r.s.ID },
		Full:       func(rs []read) bool { return len(rs) > 0 && len(rs) >= rs[0].s.GroupSize },
		EndsAtNext: func(first *read) bool { return !first.s.GroupComplete },
	})}
}

// add takes one sample, read at pos, and returns the groups it completed:
// its own when full, and the previous group when that one was emitted
// incomplete and a sample of another group arrived. A duplicate is
// counted and dropped.
func (b *batcher) add(s schemas.Sample, pos schemas.TopicOffset) []*group {
	done, dup := b.asm.Add(read{s: s, pos: pos})
	if dup {
		b.l.duplicate(&s)
		return nil
	}
	out := make([]*group, 0, len(done))
	for _, g := range done {
		out = append(out, b.took(g))
	}
	return out
}

// took converts a group out of the assembler and marks it taken.
func (b *batcher) took(ag *groups.Group[read]) *group {
	g := &group{id: ag.Key, samples: make([]schemas.Sample, len(ag.Members)), pos: make([]schemas.TopicOffset, len(ag.Members))}
	for i, r := range ag.Members {
		g.samples[i], g.pos[i] = r.s, r.pos
	}
	b.l.prog.taken[g.id] = true
	return g
}

// positions calls f with where every sample of the pending groups was
// read.
func (b *batcher) positions(f func(schemas.TopicOffset)) {
	for g := range b.asm.Pending() {
		for i := range g.Members {
			f(g.Members[i].pos)
		}
	}
}

// flush returns the pending groups emitted incomplete, and counts and
// drops the others (their missing members never came).
func (b *batcher) flush() []*group {
	var out []*group
	for _, ag := range b.asm.Flush() {
		g := b.took(ag)
		if !g.samples[0].GroupComplete {
			out = append(out, g)
			continue
		}
		b.l.stats.Incomplete += len(g.samples)
		mSamples.WithLabelValues("incomplete").Add(float64(len(g.samples)))
		for i := range g.samples {
			b.l.prog.dropped = append(b.l.prog.dropped, g.samples[i].ID)
		}
		b.l.prog.finish(g, b.l.version)
		b.l.log.Warn("learner: dropping a group that never completed", "group", g.id, "have", len(g.samples), "want", g.samples[0].GroupSize)
	}
	return out
}

// Run consumes src and takes one optimizer step (and publishes one
// version) per BatchGroups groups, until src ends (a last partial batch
// is trained), ctx ends, or steps steps were taken (steps ≤ 0: no limit).
//
// A source that keeps positions (a named SliceSource, ParquetSource) is
// first moved to the commit point of the version training continues from;
// samples of groups already trained or dropped (StepRecord.Finished) are
// skipped, so a resumed run trains every sample once.
func (l *Learner) Run(ctx context.Context, src Source, steps int) (Stats, error) {
	if err := l.loadProgress(); err != nil {
		return l.Stats(), err
	}
	if sk, ok := src.(seeker); ok {
		if err := sk.seek(l.Offsets()); err != nil {
			return l.Stats(), err
		}
	}
	b := newBatcher(l)
	var batch []*group
	l.prog.b = b
	start := time.Now()
	defer func() {
		l.prog.b, l.prog.held = nil, nil
		clear(l.prog.taken)
		l.summary(time.Since(start))
	}()
	// take trains the first n groups of batch; the rest stay held.
	take := func(n int) error {
		l.prog.held = batch[n:]
		if err := l.step1(ctx, src, batch[:n]); err != nil {
			return err
		}
		batch = batch[n:]
		return nil
	}
	for steps <= 0 || l.stats.Steps < steps {
		s, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			batch = append(batch, b.flush()...)
			for len(batch) > 0 && (steps <= 0 || l.stats.Steps < steps) {
				if err := take(min(len(batch), l.cfg.BatchGroups)); err != nil {
					return l.Stats(), err
				}
			}
			return l.Stats(), nil
		}
		if err != nil {
			return l.Stats(), err
		}
		pos, ok := position(src, &s)
		if ok {
			l.consumed(pos)
		}
		if _, done := l.prog.finished[s.GroupID]; done || l.prog.taken[s.GroupID] {
			l.duplicate(&s)
			continue
		}
		if l.cfg.MaxStaleness >= 0 && s.PolicyVersion >= 0 && l.version-s.PolicyVersion > int64(l.cfg.MaxStaleness) {
			l.stats.Stale++
			mSamples.WithLabelValues("stale").Inc()
			l.prog.dropped = append(l.prog.dropped, s.ID)
			continue
		}
		batch = append(batch, b.add(s, pos)...)
		if len(batch) >= l.cfg.BatchGroups {
			if err := take(l.cfg.BatchGroups); err != nil {
				return l.Stats(), err
			}
		}
	}
	return l.Stats(), nil
}

// duplicate counts a sample read again: its group was trained or dropped
// already, or is on its way to a step, or holds it.
func (l *Learner) duplicate(s *schemas.Sample) {
	l.stats.Duplicates++
	mSamples.WithLabelValues("duplicate").Inc()
	l.log.Debug("learner: skipping a sample read again", "id", s.ID, "source", s.Source)
}

// sequence turns a sample into a training sequence; ok is false (and the
// reason logged) when it cannot be trained on.
func (l *Learner) sequence(s *schemas.Sample) (gpu.Sequence, string) {
	seq := gpu.Sequence{Advantage: s.Advantage}
	if math.IsNaN(s.Advantage) || math.IsInf(s.Advantage, 0) {
		return seq, fmt.Sprintf("advantage %v is not finite", s.Advantage)
	}
	// The trainer's log-probs are at its temperature: a sample drawn at
	// another would be trained as if drawn from a policy it was not.
	if tt := l.trainer.Config().Temperature; s.Temperature != 0 && math.Abs(s.Temperature-tt) > 1e-9 {
		return seq, fmt.Sprintf("sampled at temperature %g, the learner trains at %g", s.Temperature, tt)
	}
	if len(s.PromptTokens) > 0 && len(s.CompletionTokens) > 0 {
		seq.Prompt, seq.Completion = s.PromptTokens, s.CompletionTokens
		if len(s.LogProbs) == len(s.CompletionTokens) {
			// The sampler's log-probs are the behaviour policy; π_old is
			// the trainer's own at the start of the step (the step's
			// forward pass), so the engine–trainer mismatch goes into the
			// importance weight, not into the PPO clip.
			seq.BehavLogProbs, seq.BehavProcessed = s.LogProbs, s.LogProbsProcessed
		}
	} else {
		var err error
		if seq.Prompt, seq.Completion, err = l.tok.EncodeChat(s.System, s.Prompt, s.Completion); err != nil {
			return seq, err.Error()
		}
		if s.FinishReason == "stop" && len(l.stop) > 0 {
			seq.Completion = append(seq.Completion, l.stop[0])
		}
	}
	switch {
	case len(seq.Prompt) == 0 || len(seq.Completion) == 0:
		return seq, "empty prompt or completion"
	case len(seq.Prompt)+len(seq.Completion)-1 > l.trainer.Config().MaxSeq:
		return seq, fmt.Sprintf("%d prompt + %d completion tokens exceed the maximum sequence length %d", len(seq.Prompt), len(seq.Completion), l.trainer.Config().MaxSeq)
	}
	V := int32(l.model.Config.VocabSize)
	for _, t := range append(seq.Prompt[:len(seq.Prompt):len(seq.Prompt)], seq.Completion...) {
		if t < 0 || t >= V {
			return seq, fmt.Sprintf("token %d outside the vocabulary of %d", t, V)
		}
	}
	return seq, ""
}

// step1 trains on groups and publishes the next version.
func (l *Learner) step1(ctx context.Context, src Source, groups []*group) error {
	t0 := time.Now()
	if err := l.followTemperature(groups); err != nil {
		return err
	}
	var seqs []gpu.Sequence
	var reward, stale float64
	n := 0
	for _, g := range groups {
		for i := range g.samples {
			s := &g.samples[i]
			reward += s.Reward
			if s.PolicyVersion >= 0 {
				stale += float64(l.version - s.PolicyVersion)
			}
			n++
			if s.FinishReason == "length" && l.cfg.MaskTruncated {
				l.stats.Truncated++
				mSamples.WithLabelValues("truncated").Inc()
				continue
			}
			seq, why := l.sequence(s)
			if why != "" {
				l.stats.Skipped++
				mSamples.WithLabelValues("skipped").Inc()
				l.log.Warn("learner: skipping a sample", "id", s.ID, "source", s.Source, "reason", why)
				continue
			}
			seqs = append(seqs, seq)
		}
	}
	if n > 0 {
		reward /= float64(n)
		stale /= float64(n)
	}
	met, err := l.train(seqs)
	if err != nil {
		return err
	}
	st := stepStats(met, l.trainer.Config().GRPO, l.sft)
	l.step++
	l.stats.Steps++
	l.stats.Groups += len(groups)
	l.stats.Samples += len(seqs)
	l.stats.Tokens += int64(met.Tokens)
	l.stats.LastLoss, l.stats.LastReward = met.Loss, reward
	if l.stats.Steps == 1 {
		l.stats.FirstReward = reward
	}
	mSamples.WithLabelValues("trained").Add(float64(len(seqs)))
	// The record goes first: an indexed version always has one.
	next := l.nextVersion()
	for _, g := range groups {
		l.prog.finish(g, next)
	}
	if err := l.writeRecord(next, groups, l.Offsets(), st); err != nil {
		return err
	}
	tp := time.Now()
	if err := l.publish(ctx, met, reward, len(seqs)); err != nil {
		return err
	}
	st.TimePublish = time.Since(tp).Seconds()
	if c, ok := src.(Committer); ok {
		if err := c.Commit(ctx, l.Offsets()); err != nil {
			return fmt.Errorf("learner: commit offsets of v%d: %w", l.version, err)
		}
	}
	dt := time.Since(t0)
	st.TimeStep = dt.Seconds()
	l.last = st
	// The record went out before the publish; it gets the publish's and
	// the whole step's times now (a crash before this leaves them 0).
	l.record.StepStats = st
	if err := l.saveRecord(&l.record); err != nil {
		return err
	}
	mSteps.Inc()
	mLoss.Set(met.Loss)
	mReward.Set(reward)
	tps := float64(met.Tokens) / dt.Seconds()
	mTokensPerSec.Set(tps)
	st.gauge()
	l.progress(met, st, reward, tps, stale)
	return nil
}

// followTemperature sets the trainer's temperature to that of the step's
// first sample that records one, unless Config.Temperature fixes it.
func (l *Learner) followTemperature(groups []*group) error {
	if l.cfg.Temperature > 0 {
		return nil
	}
	for _, g := range groups {
		for i := range g.samples {
			if t := g.samples[i].Temperature; t > 0 {
				if err := l.trainer.SetTemperature(t); err != nil {
					return err
				}
				if l.ref != nil {
					return l.ref.SetTemperature(t)
				}
				return nil
			}
		}
	}
	return nil
}

// train runs the optimizer step over seqs in micro-batches of MaxBatch.
func (l *Learner) train(seqs []gpu.Sequence) (gpu.Metrics, error) {
	var sum gpu.Metrics
	if len(seqs) == 0 {
		return sum, nil
	}
	mb := l.trainer.Config().MaxBatch
	chunks := (len(seqs) + mb - 1) / mb
	if err := l.trainer.SetAccumSteps(chunks); err != nil {
		return sum, err
	}
	sft := l.sft
	for c := 0; c < chunks; c++ {
		part := seqs[c*mb : min(len(seqs), (c+1)*mb)]
		if l.ref != nil && !sft {
			t0 := time.Now()
			ref, err := l.ref.LogProbs(part)
			sum.FwdBwdTime += time.Since(t0)
			if err != nil {
				return sum, err
			}
			for i := range part {
				part[i].RefLogProbs = ref[i]
			}
		}
		var met gpu.Metrics
		var err error
		if sft {
			met, err = l.trainer.SFTStep(part)
		} else {
			met, err = l.trainer.Step(part)
		}
		if err != nil {
			return sum, err
		}
		sum.Loss += met.Loss / float64(chunks)
		sum.KL += met.KL / float64(chunks)
		sum.ClipFrac += met.ClipFrac * float64(met.Tokens)
		sum.MaskedFrac += met.MaskedFrac * float64(met.Tokens)
		sum.Entropy += met.Entropy * float64(met.Tokens)
		sum.FwdBwdTime += met.FwdBwdTime
		sum.OptimizerTime += met.OptimizerTime
		sum.Rollout.Add(met.Rollout)
		sum.Tokens += met.Tokens
		if met.Applied {
			sum.Applied, sum.LR, sum.GradNorm, sum.Step = true, met.LR, met.GradNorm, met.Step
		}
	}
	if sum.Tokens > 0 {
		n := float64(sum.Tokens)
		sum.Entropy /= n
		sum.ClipFrac /= n
		sum.MaskedFrac /= n
	}
	if math.IsNaN(sum.Loss) {
		return sum, errors.New("learner: loss is NaN")
	}
	return sum, nil
}

func (l *Learner) progress(met gpu.Metrics, st StepStats, reward, tps, staleness float64) {
	if l.cfg.Progress == nil || time.Since(l.lastProgress) < l.cfg.ProgressEvery && l.stats.Steps > 1 {
		return
	}
	l.lastProgress = time.Now()
	line := fmt.Sprintf("step %d v%d loss %.4f reward %.3f kl %.4f grad %.3f entropy %.3f tokens/s %.0f staleness %.1f dropped-stale %d skipped %d truncated %d",
		l.step, l.version, met.Loss, reward, met.KL, met.GradNorm, st.Entropy, tps, staleness, l.stats.Stale, l.stats.Skipped, l.stats.Truncated)
	if st.RolloutTokens > 0 {
		line += fmt.Sprintf(" rollout-kl %.3g is-weight max %.3g mean %.4f is-truncated %.3f ppo-clipped %.3f", st.RolloutKL, st.ISWeightMax, st.ISWeightMean, st.ISTruncatedFrac, st.PPOClippedFrac)
	}
	if l.tty {
		fmt.Fprintf(l.cfg.Progress, "\r\x1b[K%s", line)
		l.live = true
		return
	}
	fmt.Fprintln(l.cfg.Progress, line)
}

func (l *Learner) summary(d time.Duration) {
	if l.cfg.Progress == nil {
		return
	}
	s := l.stats
	if l.live {
		fmt.Fprintln(l.cfg.Progress)
		l.live = false
	}
	fmt.Fprintf(l.cfg.Progress, "trained %d steps (%d groups, %d samples, %d tokens) in %s; published up to v%d; dropped %d stale, %d skipped, %d in incomplete groups; %d cut at the token limit left out of the loss\n",
		s.Steps, s.Groups, s.Samples, s.Tokens, d.Round(time.Millisecond), l.version, s.Stale, s.Skipped, s.Incomplete, s.Truncated)
}

// Package rl runs the whole SWE-RL loop in one process: an SFT warm start on
// the oracle answers, then rounds of rollouts → reward → group advantages →
// one GRPO step, each step published as a checkpoint version that the next
// round's rollouts sample from (on-policy: staleness 0 by construction).
//
// The rollouts of a round come from a RolloutFunc: `swerl run` passes one
// that runs the Beam train pipeline (pipelines/train) over the round's
// instances through Kafka; Local does the same work in process and is what
// tests and the fallback use. Either way the samples of every round are
// appended to DIR/samples/ as Parquet, and the learner writes
// DIR/checkpoints/ and DIR/index.parquet.
package rl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"swerl/gpu"
	"swerl/gpu/learner"
	"swerl/internal/atomicfile"
	"swerl/internal/defaults"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/advantage"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
)

// RolloutFunc produces the scored, advantage-weighted samples of one round:
// GroupSize completions of each instance, sampled from the newest published
// version. It must write nothing itself; Run stores the samples.
type RolloutFunc func(ctx context.Context, round int, instances []schemas.Instance) ([]schemas.Sample, error)

// Config configures Run.
type Config struct {
	// Learner is the learner both phases run. Out is the output root
	// (samples/, checkpoints/, index.parquet, run.json); Resume continues
	// a run in Out (its checkpoints and run.json); Model, Backend
	// (required), KeepCheckpoints, Log and Progress serve both phases.
	// Train (the optimizer, MaxSeq and the GRPO objective, whose KL
	// reference is the version RL starts from), LoRA, Temperature (the
	// rollouts' sampling temperature), MaskTruncated and
	// FreshOptimizer (zeroed AdamW moments instead of the warm start's:
	// the first updates are then sign steps of size LR on every weight,
	// docs/experiments.md) are the RL phase's. The warm start trains full
	// fine-tuning at SFTLR with Train's micro-batch, MaxSeq, clip and
	// activation checkpointing, and no objective; with SFTLoRA it trains
	// LoRA's adapters instead of every weight.
	//
	// Run chooses three fields itself and refuses a Config that sets them:
	// Reference (the version RL starts from), BatchGroups (BatchInstances)
	// and MaxStaleness (off: a round's samples all come from the version
	// published before it).
	Learner learner.Config
	// Instances are the training instances; Run cycles through them in a
	// seeded random order.
	Instances []schemas.Instance
	// SFTSteps of supervised warm start on the oracle answers (batch
	// SFTBatch, learning rate SFTLR) before RL. 0 skips it.
	SFTSteps, SFTBatch int
	SFTLR              float64
	// SFTLoRA trains the warm start with LoRA too (LoRA must be set), so
	// every version of the run, the warm start's included, is an adapter
	// on the base model: for a pretrained model, whose embeddings need no
	// training, and for an engine that loads adapters but not full
	// weights at run time (vLLM), which then samples the warm start's
	// versions exactly. RL continues the warm start's adapter.
	SFTLoRA bool
	// SFTUntil, when positive, ends the warm start early: once the mean
	// probability that the policy samples an oracle answer exactly
	// (learner.AnswerProbs, a lower bound on its exact-match rate) reaches
	// it. It is read every SFTCheck steps (default DefaultSFTCheck) and reported to
	// AfterSFTCheck. RL learns from groups whose rollouts differ; a warm
	// start trained until it answers nearly every task exactly leaves
	// almost none (docs/experiments.md). A check reads at most SFTProbe
	// examples (default DefaultSFTProbe), the same ones every time, spread
	// evenly over the warm start's examples: one forward pass each, so a
	// real model's thousands of hunk tasks do not make every check cost
	// more than the steps between checks.
	SFTUntil      float64
	SFTCheck      int
	SFTProbe      int
	AfterSFTCheck func(step int, answerProb float64)
	// Steps is the number of RL steps; each samples BatchInstances
	// instances GroupSize times and takes one optimizer step.
	Steps, BatchInstances, GroupSize int
	// Method turns a group's rewards into advantages. Default GRPO.
	Method advantage.Method
	// Prompt caps and template.
	Prompt prompt.Options
	// ShortThought replaces the oracle answers' thought with "Edit PATHS."
	// (small models: fewer tokens to imitate before the edits).
	ShortThought bool
	// Rollouts produces a round's samples. Required (see Local).
	Rollouts RolloutFunc
	// RolloutsStore says Rollouts already stored the samples in the
	// round's staging folder, StagedSamples(Out, round) (BeamRollouts
	// does); Run then writes none there.
	RolloutsStore bool
	// BeforeRL, when set, is called once in a run, after the warm start and
	// before the first RL step (swerl run evaluates there); a resumed run
	// that got past it does not call it again.
	BeforeRL func(ctx context.Context) error
	// Sync, when set, is called with the newest published version before
	// BeforeRL and before each RL round's rollouts, so that inference
	// engines sampling the round hold it (weightsync.Syncer.Round). An error stops the
	// run.
	Sync func(ctx context.Context, version int64) error
	// AfterStep, when set, is called after each RL step's version is
	// published (swerl run reloads its policy and prints progress there).
	AfterStep func(ctx context.Context, st StepStats) error
	// Seed orders the instances.
	Seed uint64
}

// StepStats describe one RL step.
type StepStats struct {
	Step, Steps      int
	Version          int64   // version published by the step
	PolicyVersion    int64   // newest version the step's samples came from
	Samples          int     // samples of the round
	MeanReward       float64 // over the round's samples
	FormatErrorRate  float64
	ExactRate        float64 // samples scoring 1
	ZeroVarianceRate float64 // groups with equal rewards
	RolloutTime      time.Duration
	TrainTime        time.Duration
	Loss             float64
	// The time split: SyncTime pushing the version to the engines (part
	// of RolloutTime); SampleTime the policy's answer times summed over
	// the round's groups (the samples' latency_ms; with one request in
	// flight at a time, as swerl run sends them, the wall time of
	// sampling), so RolloutTime − SyncTime − SampleTime is scoring and
	// the data plane (Kafka, Beam, Parquet); Learner the learner step's
	// own split (TrainTime holds it).
	SyncTime, SampleTime time.Duration
	Learner              learner.StepStats
}

// Summary is what Run did.
type Summary struct {
	SFTSteps, RLSteps int
	Version           int64
	Samples           int
	// History holds the stats of every RL step of the run, those an
	// earlier process of a resumed run took included (from run.json), so
	// a resumed run ends on the same step lines as one never stopped.
	History    []StepStats
	SamplesDir string
	// Phase is where Run is, or where it stopped: one of the Phase
	// constants. Done is the RL steps published, in every process of the
	// run.
	Phase string
	Done  int
}

// The phases of Run, for the message of an interrupted run.
const (
	PhaseWarmStart = "warm start"
	PhaseBeforeRL  = "before RL"
	PhaseRL        = "RL"
	PhaseDone      = "done"
)

// Where says where a stopped run was: "in the warm start", "in the
// evaluation before RL", "after RL step N".
func (s Summary) Where() string {
	switch s.Phase {
	case PhaseWarmStart, "":
		return "in the warm start"
	case PhaseBeforeRL:
		return "before RL (in the evaluation of the warm-started model)"
	}
	return fmt.Sprintf("after RL step %d", s.Done)
}

// state is DIR/run.json: how far a run got, for --resume.
type state struct {
	SFTDone bool `json:"sft_done"`
	RLSteps int  `json:"rl_steps"`
	// RLStart is the version RL started from (the warm start's last),
	// the reference of the KL term.
	RLStart int64 `json:"rl_start_version"`
	// BeforeRLDone says Config.BeforeRL returned without error.
	BeforeRLDone bool `json:"before_rl_done"`
	// History are the stats of the RL steps done, one a step.
	History []StepStats `json:"history,omitempty"`
}

// The defaults of Config's counts, which swerl run's flags share.
const (
	DefaultSFTCheck       = 5  // warm-start steps between format checks
	DefaultSFTProbe       = 64 // most examples a format check reads
	DefaultSFTBatch       = 8  // warm-start examples per optimizer step
	DefaultBatchInstances = 4  // instances per RL step
)

func (c *Config) defaults() error {
	if c.Learner.Backend == nil {
		return errors.New("rl: no backend")
	}
	if c.Rollouts == nil {
		return errors.New("rl: no rollout function")
	}
	if l := c.Learner; l.Reference != 0 || l.BatchGroups != 0 || l.MaxStaleness != 0 {
		return fmt.Errorf("rl: Learner.Reference %d, BatchGroups %d, MaxStaleness %d: Run sets these (the version RL starts from, BatchInstances, off)", l.Reference, l.BatchGroups, l.MaxStaleness)
	}
	if len(c.Instances) == 0 {
		return errors.New("rl: no training instances")
	}
	if c.SFTLoRA && c.Learner.LoRA.Rank <= 0 {
		return errors.New("rl: a LoRA warm start (SFTLoRA) needs a LoRA rank")
	}
	if c.SFTUntil < 0 || c.SFTUntil > 1 {
		return fmt.Errorf("rl: SFTUntil %v outside [0,1]", c.SFTUntil)
	}
	c.SFTCheck = defaults.Positive(c.SFTCheck, DefaultSFTCheck)
	c.SFTProbe = defaults.Positive(c.SFTProbe, DefaultSFTProbe)
	c.SFTBatch = defaults.Positive(c.SFTBatch, DefaultSFTBatch)
	c.BatchInstances = defaults.Positive(c.BatchInstances, DefaultBatchInstances)
	c.GroupSize = defaults.Positive(c.GroupSize, advantage.DefaultGroupSize)
	c.Learner.Train.MaxSeq = defaults.Positive(c.Learner.Train.MaxSeq, gpu.DefaultMaxSeq)
	c.Learner.Train.MaxBatch = defaults.Positive(c.Learner.Train.MaxBatch, gpu.DefaultMaxBatch)
	if c.Method == "" {
		c.Method = advantage.GRPO
	}
	if c.Learner.Log == nil {
		c.Learner.Log = slog.Default()
	}
	return nil
}

// learner opens the learner of one phase: the warm start (sft: full
// fine-tuning at SFTLR, no objective, so no KL reference to load) or RL
// (the Config as given, its KL reference the version ref).
func (c *Config) learner(ctx context.Context, sft, resume, freshOptimizer bool, ref int64) (*learner.Learner, error) {
	lc := c.Learner
	lc.Resume, lc.FreshOptimizer, lc.Reference = resume, freshOptimizer, ref
	lc.BatchGroups, lc.MaxStaleness = c.BatchInstances, -1
	if sft {
		lc.Train = gpu.TrainConfig{MaxBatch: c.Learner.Train.MaxBatch, MaxSeq: c.Learner.Train.MaxSeq, LR: c.SFTLR,
			GradClip: c.Learner.Train.GradClip, Checkpoint: c.Learner.Train.Checkpoint}
		lc.Temperature = 1
		if !c.SFTLoRA {
			lc.LoRA = gpu.LoRAConfig{}
		}
	}
	return learner.New(ctx, lc)
}

func readState(out string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("rl: %s: %w", filepath.Join(out, "run.json"), err)
	}
	return st, nil
}

// writeState replaces run.json atomically (synced: on a full disk the
// write fails and the old file stays).
func writeState(out string, st state) error {
	b, _ := json.Marshal(st)
	if err := atomicfile.WriteFile(filepath.Join(out, "run.json"), b); err != nil {
		return fmt.Errorf("rl: %w", err)
	}
	return nil
}

// SFTExamples turns instances into warm-start pairs: the prompt and the
// oracle answer. Instances with no oracle answer are skipped.
func SFTExamples(ins []schemas.Instance, o prompt.Options, short bool, log *slog.Logger) []learner.Example {
	var ex []learner.Example
	for i := range ins {
		p, err := prompt.Build(&ins[i], o)
		if err != nil {
			log.Warn("rl: no prompt for an SFT example", "id", ins[i].ID, "err", err)
			continue
		}
		ans, err := prompt.OracleAnswer(&ins[i], p.Files)
		if err != nil {
			log.Warn("rl: no oracle answer", "id", ins[i].ID, "err", err)
			continue
		}
		if short {
			ans = ShortenThought(ans, schemas.SortedPaths(ins[i].OracleNewContent))
		}
		ex = append(ex, learner.Example{ID: ins[i].ID, System: p.System, Prompt: p.User, Answer: ans})
	}
	return ex
}

// ShortenThought replaces the thought of an answer with "Edit PATHS.".
func ShortenThought(answer string, paths []string) string {
	i := strings.Index(answer, reward.ThinkStart)
	j := strings.Index(answer, reward.ThinkEnd)
	if i < 0 || j < i {
		return answer
	}
	return answer[:i] + reward.ThinkStart + "\nEdit " + strings.Join(paths, ", ") + ".\n" + answer[j:]
}

// Run runs the warm start and the RL steps (what a resumed run has not
// done yet) and returns a summary.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.defaults(); err != nil {
		return Summary{}, err
	}
	sum := Summary{SamplesDir: filepath.Join(cfg.Learner.Out, "samples"), Phase: PhaseWarmStart}
	if err := os.MkdirAll(cfg.Learner.Out, 0o755); err != nil {
		return sum, err
	}
	st := state{}
	if cfg.Learner.Resume {
		var err error
		if st, err = readState(cfg.Learner.Out); err != nil {
			return sum, err
		}
	}
	resume := cfg.Learner.Resume
	if !st.SFTDone && cfg.SFTSteps > 0 {
		l, err := cfg.learner(ctx, true, resume, false, 0)
		if err != nil {
			return sum, err
		}
		defer l.Close()
		ex := SFTExamples(cfg.Instances, cfg.Prompt, cfg.ShortThought, cfg.Learner.Log)
		if len(ex) == 0 {
			return sum, errors.New("rl: no SFT example (no instance has an oracle answer that fits)")
		}
		ls, err := warmStart(ctx, cfg, l, ex)
		if err != nil {
			return sum, err
		}
		st.RLStart = ls.Version
		resume = true
	}
	// Every warm-start step published one version after v0.
	sum.SFTSteps, sum.Version = int(st.RLStart), st.RLStart
	st.SFTDone = true
	if err := writeState(cfg.Learner.Out, st); err != nil {
		return sum, err
	}
	sum.Phase, sum.Done = PhaseBeforeRL, st.RLSteps
	if len(st.History) > st.RLSteps {
		st.History = st.History[:st.RLSteps]
	}
	sum.History = append(sum.History, st.History...)
	// RL keeps the warm start's AdamW moments unless FreshOptimizer: fresh
	// ones make the first updates sign steps of size LR on every weight,
	// whatever its gradient (see FreshOptimizer). A resumed RL phase keeps
	// its own moments either way.
	l, err := cfg.learner(ctx, false, resume, st.RLSteps == 0 && cfg.Learner.FreshOptimizer, st.RLStart)
	if err != nil {
		return sum, err
	}
	defer l.Close()
	if cfg.BeforeRL != nil && !st.BeforeRLDone {
		if err := cfg.sync(ctx, l.Stats().Version); err != nil {
			return sum, err
		}
		if err := cfg.BeforeRL(ctx); err != nil {
			return sum, err
		}
		st.BeforeRLDone = true
		if err := writeState(cfg.Learner.Out, st); err != nil {
			return sum, err
		}
	}
	sum.Version = l.Stats().Version
	sum.Phase = PhaseRL
	// A step killed after its version was published but before run.json
	// said so is done: keep its samples instead of training it again.
	if st.RLSteps < cfg.Steps && l.Stats().Version > st.RLStart+int64(st.RLSteps) {
		step := st.RLSteps + 1
		if err := keepRound(cfg.Learner.Out, step); err != nil {
			return sum, err
		}
		ss, err := restoredStats(cfg, step, l.Stats().Version)
		if err != nil {
			return sum, err
		}
		st.RLSteps, st.History = step, append(st.History, ss)
		if err := writeState(cfg.Learner.Out, st); err != nil {
			return sum, err
		}
		sum.History, sum.Done = append(sum.History, ss), step
	}
	order := rand.New(rand.NewPCG(cfg.Seed, 0x5e71)).Perm(len(cfg.Instances))
	next := st.RLSteps * cfg.BatchInstances
	for step := st.RLSteps + 1; step <= cfg.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		batch := make([]schemas.Instance, cfg.BatchInstances)
		for i := range batch {
			batch[i] = cfg.Instances[order[next%len(order)]]
			next++
		}
		// What a killed attempt at this step staged was never trained on.
		if err := os.RemoveAll(roundDir(cfg.Learner.Out, step)); err != nil {
			return sum, err
		}
		t0 := time.Now()
		if err := cfg.sync(ctx, l.Stats().Version); err != nil {
			return sum, err
		}
		syncTime := time.Since(t0)
		round, err := cfg.Rollouts(ctx, step, batch)
		if err != nil {
			return sum, fmt.Errorf("rl: step %d rollouts: %w", step, err)
		}
		ss := roundStats(round)
		ss.Step, ss.Steps, ss.RolloutTime, ss.SyncTime = step, cfg.Steps, time.Since(t0), syncTime
		if !cfg.RolloutsStore {
			samples := parquetio.NewDirWriter[schemas.Sample](StagedSamples(cfg.Learner.Out, step), "rl", 1<<30)
			if err := samples.Write(round...); err != nil {
				return sum, err
			}
			if err := samples.Flush(); err != nil {
				return sum, err
			}
		}
		t1 := time.Now()
		ls, err := l.Run(ctx, &learner.SliceSource{Samples: round}, l.Stats().Steps+1)
		if err != nil {
			return sum, fmt.Errorf("rl: step %d: %w", step, err)
		}
		ss.TrainTime, ss.Version, ss.Loss, ss.Learner = time.Since(t1), ls.Version, ls.LastLoss, l.LastStep()
		if err := keepRound(cfg.Learner.Out, step); err != nil {
			return sum, err
		}
		st.RLSteps, st.History = step, append(st.History, ss)
		if err := writeState(cfg.Learner.Out, st); err != nil {
			return sum, err
		}
		sum.RLSteps, sum.Version, sum.Samples = sum.RLSteps+1, ls.Version, sum.Samples+len(round)
		sum.History, sum.Done = append(sum.History, ss), step
		if cfg.AfterStep != nil {
			if err := cfg.AfterStep(ctx, ss); err != nil {
				return sum, err
			}
		}
	}
	sum.Phase = PhaseDone
	return sum, nil
}

// restoredStats rebuilds the stats of RL step step, published as version v
// by a process killed before run.json said so, from what it kept: the
// round's samples and the learner's record of v. Times are those of the
// record (the rollout time is lost with the process).
func restoredStats(cfg Config, step int, v int64) (StepStats, error) {
	files, err := filepath.Glob(filepath.Join(cfg.Learner.Out, "samples", fmt.Sprintf("round-%06d-*.parquet", step)))
	if err != nil {
		return StepStats{}, err
	}
	var round []schemas.Sample
	for _, f := range files {
		rows, err := parquetio.ReadFile[schemas.Sample](f)
		if err != nil {
			return StepStats{}, fmt.Errorf("rl: step %d's samples: %w", step, err)
		}
		round = append(round, rows...)
	}
	ss := roundStats(round)
	ss.Step, ss.Steps, ss.Version = step, cfg.Steps, v
	if rec, err := learner.ReadRecord(cfg.Learner.Out, v); err == nil {
		ss.Loss, ss.Learner = rec.Loss, rec.StepStats
		ss.TrainTime = time.Duration(rec.TimeStep * float64(time.Second))
	}
	return ss, nil
}

// warmStart takes the SFT steps: all cfg.SFTSteps of them, or with
// cfg.SFTUntil > 0 only until the oracle answers' mean sampling probability
// (learner.AnswerProbs, read every cfg.SFTCheck steps) reaches SFTUntil.
// The budget counts the steps a killed earlier process published (every
// warm-start step publishes a version after v0, the initial model), so a
// resumed warm start does not start its budget again. The returned Steps
// count them too.
func warmStart(ctx context.Context, cfg Config, l *learner.Learner, ex []learner.Example) (learner.Stats, error) {
	prior := int(l.Stats().Version)
	cumulative := func(ls learner.Stats, err error) (learner.Stats, error) {
		ls.Steps += prior
		return ls, err
	}
	if cfg.SFTUntil <= 0 {
		return cumulative(l.SFT(ctx, ex, cfg.SFTBatch, max(cfg.SFTSteps-prior, 0)))
	}
	ls := l.Stats()
	ls.Steps = prior
	// A warm start killed at a check point, after its step was published
	// and before run.json said the warm start was done, reads the
	// probability there first, as the run that was killed would have: it
	// may have been the last check.
	checkFirst := prior > 0 && (prior%cfg.SFTCheck == 0 || prior >= cfg.SFTSteps)
	probe := probeSet(ex, cfg.SFTProbe)
	for done := prior; done < cfg.SFTSteps || checkFirst; {
		if !checkFirst {
			done = min(cfg.SFTSteps, (done/cfg.SFTCheck+1)*cfg.SFTCheck)
			var err error
			if ls, err = cumulative(l.SFT(ctx, ex, cfg.SFTBatch, done-prior)); err != nil {
				return ls, err
			}
		}
		checkFirst = false
		ps, err := l.AnswerProbs(probe)
		if err != nil {
			return ls, err
		}
		var mean float64
		n := 0
		for _, p := range ps {
			if !math.IsNaN(p) {
				mean += p
				n++
			}
		}
		mean /= float64(max(n, 1))
		if cfg.AfterSFTCheck != nil {
			cfg.AfterSFTCheck(ls.Steps, mean)
		}
		if mean >= cfg.SFTUntil {
			break
		}
	}
	return ls, nil
}

// probeSet returns at most n of ex, spread evenly over it and the same on
// every call: all of ex when it holds n or fewer.
func probeSet(ex []learner.Example, n int) []learner.Example {
	if len(ex) <= n {
		return ex
	}
	out := make([]learner.Example, n)
	for i := range out {
		out[i] = ex[i*len(ex)/n]
	}
	return out
}

// roundStats aggregates a round's samples.
func roundStats(round []schemas.Sample) StepStats {
	var ss StepStats
	ss.Samples = len(round)
	groups := map[string][]float64{}
	ss.PolicyVersion = -1
	for _, s := range round {
		if _, seen := groups[s.GroupID]; !seen {
			// One request a group: its latency is the group's answer time.
			ss.SampleTime += time.Duration(s.LatencyMS) * time.Millisecond
		}
		ss.MeanReward += s.Reward
		if s.FormatError != "" {
			ss.FormatErrorRate++
		}
		if s.Reward == 1 {
			ss.ExactRate++
		}
		ss.PolicyVersion = max(ss.PolicyVersion, s.PolicyVersion)
		groups[s.GroupID] = append(groups[s.GroupID], s.Reward)
	}
	if n := float64(len(round)); n > 0 {
		ss.MeanReward /= n
		ss.FormatErrorRate /= n
		ss.ExactRate /= n
	}
	zv := 0
	for _, r := range groups {
		if advantage.ZeroVariance(r) {
			zv++
		}
	}
	if len(groups) > 0 {
		ss.ZeroVarianceRate = float64(zv) / float64(len(groups))
	}
	return ss
}

// Local returns a RolloutFunc that does the train pipeline's work in
// process, through the same scoring path (transforms/scoring): each
// instance's group (prefix "rNNNNNN/", the round, as the Beam rounds of
// swerl run use; source its position in the round) is asked of pol, scored
// with the SWE-RL reward against the files shown, and its advantages
// computed with m. The run's sampling seed is spec.Seed + round, as for the
// Beam rounds, so a round draws the same completions at the same seed.
func Local(pol rollout.Policy, spec scoring.Spec, m advantage.Method, timeout time.Duration, log *slog.Logger) RolloutFunc {
	return func(ctx context.Context, round int, instances []schemas.Instance) ([]schemas.Sample, error) {
		rs := spec
		if rs.Seed != 0 {
			rs.Seed += int64(round)
		}
		var out []schemas.Sample
		for i := range instances {
			in := &instances[i]
			g, err := rs.Prepare(in, scoring.GroupID(RoundPrefix(round), in.ID, i))
			if err != nil {
				log.Warn("rl: instance has no prompt, skipped", "id", in.ID, "err", err)
				continue
			}
			start := time.Now()
			resp, err := pol.Complete(ctx, g.Request)
			if err != nil {
				return nil, fmt.Errorf("instance %s: %w", in.ID, err)
			}
			group, got := rs.Samples(in, &g, resp, time.Since(start).Milliseconds(), time.Now().UTC().Format(time.RFC3339Nano))
			scored := group[:0]
			task := g.Task() // one oracle diff and memo for the group
			for k := range group[:got] {
				if r, ok := scoring.Score(ctx, task, &group[k], timeout); !ok {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					// As in the train pipeline, an answer that cannot be
					// scored in time leaves its group incomplete.
					log.Warn("rl: sample not scored, left out of its group", "id", group[k].ID, "err", r.Error)
					continue
				}
				scored = append(scored, group[k])
			}
			if len(scored) == 0 {
				continue
			}
			if _, err := advantage.Group(m, scored, len(scored) == rs.GroupSize); err != nil {
				return nil, err
			}
			out = append(out, scored...)
		}
		return out, nil
	}
}

// RoundPrefix is the group-id prefix of RL round round.
func RoundPrefix(round int) string { return fmt.Sprintf("r%06d/", round) }

// roundDir is where RL round round stages its files until its step is
// published.
func roundDir(out string, round int) string {
	return filepath.Join(out, "rounds", fmt.Sprintf("round-%06d", round))
}

// StagedSamples is the folder of round round's sample files until its step
// is published; then Run moves them into out/samples. Samples of a round
// killed before its step was published are never kept, so a resumed run
// holds each trained step's samples once.
func StagedSamples(out string, round int) string {
	return filepath.Join(roundDir(out, round), "samples")
}

// keepRound moves the staged sample files of round into out/samples (each
// name prefixed with the round, so rounds never collide) and removes the
// staging folder. It is idempotent: a kill part way through leaves files
// that a second call moves.
func keepRound(out string, round int) error {
	files, err := parquetio.Files(StagedSamples(out, round))
	if err != nil {
		return err
	}
	dst := filepath.Join(out, "samples")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(dst, fmt.Sprintf("round-%06d-%s", round, filepath.Base(f)))); err != nil {
			return fmt.Errorf("rl: keeping round %d's samples: %w", round, err)
		}
	}
	return os.RemoveAll(roundDir(out, round))
}

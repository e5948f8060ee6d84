package learner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"swerl/gpu"
	"swerl/internal/atomicfile"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
)

// RecordDir is the folder under the output root where the learner writes
// one StepRecord a version, trained/vNNNNNN.json: what the step trained on
// and what a resumed run needs besides the checkpoint. It is written
// (atomically) just before the version is published, so every indexed
// version has its record; a record of a version that never made it into
// the index is an orphan that a later publish of that version replaces.
// Records are small and are kept when --keep-checkpoints deletes the
// checkpoint files.
const RecordDir = "trained"

// finishedWindow is how many versions a finished group's id is remembered
// (in memory and in the records) after the step that finished it, so that a
// copy of one of its samples that the train pipeline produced again after a
// crash of its own is skipped, not trained a second time. A group whose
// samples lie at or above a commit point is remembered however old it is:
// a resumed run reads those samples again.
const finishedWindow = 64

// StepRecord is trained/vNNNNNN.json.
type StepRecord struct {
	Version int64 `json:"version"`
	Step    int64 `json:"step"`
	// Samples are the ids of every sample of the groups the step took (those
	// left out of the loss as too long, truncated or with bad tokens
	// included): each sample the learner accepted appears in exactly one
	// version's record.
	Samples []string `json:"samples,omitempty"`
	// Dropped are the ids of samples dropped (too stale, or in a group that
	// never completed) since the previous version.
	Dropped []string `json:"dropped,omitempty"`
	// SFTNext is the example the next SFT batch starts at.
	SFTNext int `json:"sft_next"`
	// Finished are the groups a resumed run must not train again: those
	// finished in the last finishedWindow versions and those with a sample
	// at or above its partition's commit point (the index row's Offsets).
	Finished []FinishedGroup `json:"finished,omitempty"`
	// StepStats are the step's objective and off-policy statistics
	// (top-level fields of the record).
	StepStats
}

// StepStats describe one optimizer step. The rollout fields are over the
// completion tokens of the step's trained samples that carry the
// sampler's log-probabilities (RolloutTokens of them), with the behaviour
// weight w = π_old/π_behav: π_old the trainer's own log-probabilities at
// the start of the step, π_behav the sampler's. All are 0 for a step with
// no such token (an SFT step, samples without log-probs).
type StepStats struct {
	Loss       float64 `json:"loss"`
	Objective  string  `json:"objective,omitempty"`  // grpo, gspo, cispo
	Correction string  `json:"correction,omitempty"` // off, token-tis, …
	// RolloutKL is the mean of k3 = w − 1 − ln w.
	RolloutKL float64 `json:"rollout_kl"`
	// RolloutLogprobDiffMax and …Mean are of |ln π_old − ln π_behav|.
	RolloutLogprobDiffMax  float64 `json:"rollout_logprob_diff_max"`
	RolloutLogprobDiffMean float64 `json:"rollout_logprob_diff_mean"`
	// ISWeightMean and ISWeightMax are of w before truncation.
	ISWeightMean float64 `json:"is_weight_mean"`
	ISWeightMax  float64 `json:"is_weight_max"`
	// ISTruncatedFrac is the fraction of the tokens whose weight the
	// correction capped or masked.
	ISTruncatedFrac float64 `json:"is_truncated_frac"`
	RolloutTokens   int     `json:"rollout_tokens"`
	// PPOClippedFrac is the fraction of all completion tokens the PPO
	// clip acted on (see gpu.TokenLoss.Clipped).
	PPOClippedFrac float64 `json:"ppo_clipped_frac"`
	// GradNorm is the global gradient norm before clipping.
	GradNorm float64 `json:"grad_norm"`
	// Entropy is the mean over completion tokens of −ln π_old(y_t), the
	// sampled-token estimate of the policy's per-token entropy.
	Entropy float64 `json:"entropy"`
	// Where the step's wall time went, in seconds: the forward and
	// backward passes with the objective (π_old and the correction; the
	// KL reference's forward too), the optimizer, writing and announcing
	// the version, and the whole step (assembling the batch, the record
	// and committing offsets included). The trainer's read-backs wait for
	// the device, so on a GPU these are its busy time up to queueing.
	TimeFwdBwd    float64 `json:"time_fwd_bwd_s"`
	TimeOptimizer float64 `json:"time_optimizer_s"`
	TimePublish   float64 `json:"time_publish_s"`
	TimeStep      float64 `json:"time_step_s"`
}

// stepStats summarizes a step's metrics; non-finite values (a weight
// that overflowed) are written as ±MaxFloat64, which JSON can hold.
func stepStats(met gpu.Metrics, p gpu.GRPOParams, sft bool) StepStats {
	fin := func(x float64) float64 {
		switch {
		case math.IsNaN(x):
			return 0
		case math.IsInf(x, 1):
			return math.MaxFloat64
		case math.IsInf(x, -1):
			return -math.MaxFloat64
		}
		return x
	}
	k3, diff, w, trunc := met.Rollout.Means()
	st := StepStats{
		Loss: fin(met.Loss), RolloutKL: fin(k3), RolloutLogprobDiffMax: fin(met.Rollout.DiffMax), RolloutLogprobDiffMean: fin(diff),
		ISWeightMean: fin(w), ISWeightMax: fin(met.Rollout.WeightMax), ISTruncatedFrac: trunc, RolloutTokens: met.Rollout.Tokens,
		PPOClippedFrac: met.ClipFrac, GradNorm: fin(met.GradNorm), Entropy: fin(met.Entropy),
		TimeFwdBwd: met.FwdBwdTime.Seconds(), TimeOptimizer: met.OptimizerTime.Seconds(),
	}
	if !sft {
		st.Objective, st.Correction = p.Objective.String(), p.Correction.String()
	}
	return st
}

// FinishedGroup is a group trained on or dropped, and the highest position
// of its samples in each partition they were read from.
type FinishedGroup struct {
	ID      string                `json:"id"`
	Version int64                 `json:"version"`
	Last    []schemas.TopicOffset `json:"last,omitempty"`
}

// RecordPath is the record of version v under the output root out.
func RecordPath(out string, v int64) string {
	return filepath.Join(out, RecordDir, checkpoint.VersionDir(v)+".json")
}

// ReadRecord reads the record of version v; a missing record is an error
// wrapping os.ErrNotExist.
func ReadRecord(out string, v int64) (StepRecord, error) {
	path := RecordPath(out, v)
	b, err := os.ReadFile(path)
	if err != nil {
		return StepRecord{}, fmt.Errorf("learner: %w", err)
	}
	r, err := decodeRecord(b)
	if err != nil {
		return StepRecord{}, fmt.Errorf("learner: %s: %w", path, err)
	}
	if r.Version != v {
		return StepRecord{}, fmt.Errorf("learner: %s: the record says version %d", path, r.Version)
	}
	return r, nil
}

// decodeRecord parses a record strictly: one JSON object of known fields.
func decodeRecord(b []byte) (StepRecord, error) {
	var r StepRecord
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return StepRecord{}, err
	}
	if d.More() {
		return StepRecord{}, errors.New("data after the record")
	}
	if r.Version < 0 || r.Step < 0 || r.SFTNext < 0 {
		return StepRecord{}, fmt.Errorf("negative version %d, step %d or sft_next %d", r.Version, r.Step, r.SFTNext)
	}
	for _, g := range r.Finished {
		if g.ID == "" || g.Version < 0 || g.Version > r.Version {
			return StepRecord{}, fmt.Errorf("finished group %q of version %d in the record of version %d", g.ID, g.Version, r.Version)
		}
	}
	return r, nil
}

// progress is the learner's read state between records: which groups are
// done, which are on their way to a step, and what was dropped.
type progress struct {
	loaded   bool
	finished map[string]FinishedGroup
	taken    map[string]bool // groups out of the batcher, not yet trained
	dropped  []string
	// b and held are the batcher and the groups kept for the next step of
	// the Run in progress (nil outside Run): their samples pin the commit
	// points (Learner.Offsets).
	b    *batcher
	held []*group
}

// loadProgress reads the record of the version training continues from, once:
// a fresh run (version 0) and a checkpoint written before records existed
// have none and start empty.
func (l *Learner) loadProgress() error {
	p := &l.prog
	if p.loaded {
		return nil
	}
	p.finished, p.taken = map[string]FinishedGroup{}, map[string]bool{}
	r, err := ReadRecord(l.cfg.Out, l.version)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if l.version > 0 {
			l.log.Info("learner: no record of the version resumed from; every sample at or after its offsets is read as new", "version", l.version)
		}
	case err != nil:
		return fmt.Errorf("%w (delete it to resume without it: samples read again may then be trained again)", err)
	default:
		for _, g := range r.Finished {
			p.finished[g.ID] = g
		}
		l.sftNext = r.SFTNext
	}
	p.loaded = true
	return nil
}

// finish records that group g is done in version v (trained or dropped).
func (p *progress) finish(g *group, v int64) {
	delete(p.taken, g.id)
	fg := FinishedGroup{ID: g.id, Version: v}
	for _, o := range g.pos {
		if o.Topic == "" {
			continue
		}
		i := 0
		for i < len(fg.Last) && offKey(fg.Last[i]) != offKey(o) {
			i++
		}
		if i == len(fg.Last) {
			fg.Last = append(fg.Last, o)
		} else if o.Offset > fg.Last[i].Offset {
			fg.Last[i] = o
		}
	}
	p.finished[g.id] = fg
}

// writeRecord forgets the finished groups no longer needed and writes the
// record of version v, whose step took groups; commit are the commit points
// the version's index row will hold.
func (l *Learner) writeRecord(v int64, groups []*group, commit []schemas.TopicOffset, st StepStats) error {
	p := &l.prog
	at := map[string]int64{}
	for _, o := range commit {
		at[offKey(o)] = o.Offset
	}
	r := StepRecord{Version: v, Step: l.step, SFTNext: l.sftNext, Dropped: p.dropped, StepStats: st}
	for _, g := range groups {
		for i := range g.samples {
			r.Samples = append(r.Samples, g.samples[i].ID)
		}
	}
	for id, g := range p.finished {
		keep := g.Version > v-finishedWindow
		for _, o := range g.Last {
			if c, ok := at[offKey(o)]; ok && o.Offset >= c {
				keep = true
			}
		}
		if !keep {
			delete(p.finished, id)
			continue
		}
		r.Finished = append(r.Finished, g)
	}
	sortFinished(r.Finished)
	if err := l.saveRecord(&r); err != nil {
		return err
	}
	l.record = r
	p.dropped = nil
	return nil
}

// saveRecord writes r atomically.
func (l *Learner) saveRecord(r *StepRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(l.cfg.Out, RecordDir), 0o755); err != nil {
		return fmt.Errorf("learner: %w", err)
	}
	if err := atomicfile.WriteFile(RecordPath(l.cfg.Out, r.Version), append(b, '\n')); err != nil {
		return fmt.Errorf("learner: record of v%d: %w", r.Version, err)
	}
	return nil
}

// nextVersion is the version the next publish writes: after the newest
// indexed one, even when that one was skipped as corrupt on resume.
func (l *Learner) nextVersion() int64 { return max(l.version, l.indexed) + 1 }

// sortFinished orders groups by version, then id: records are stable.
func sortFinished(gs []FinishedGroup) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Version != gs[j].Version {
			return gs[i].Version < gs[j].Version
		}
		return gs[i].ID < gs[j].ID
	})
}

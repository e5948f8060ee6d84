package learner

import (
	"context"
	"fmt"
	"math"
	"time"

	"swerl/gpu"
)

// Example is one supervised warm-start pair: a chat prompt and the answer
// to imitate (for SWE-RL, prompt.OracleAnswer: the oracle edits in the
// policy's output format).
type Example struct {
	ID     string // for messages
	System string
	Prompt string
	Answer string
}

// SFT takes steps of supervised fine-tuning (cross-entropy on the answer
// tokens only, the eos token included) over examples, batch examples per
// optimizer step, cycling through them until steps steps were taken, and
// publishes a version after each step. Examples too long for MaxSeq are
// skipped and counted. A later call with the same examples goes on where
// the last batch ended, so SFT in chunks of steps sees the examples as
// evenly as one call does; so does a resumed learner (each version's
// StepRecord keeps the position).
func (l *Learner) SFT(ctx context.Context, examples []Example, batch, steps int) (Stats, error) {
	if batch <= 0 {
		return l.Stats(), fmt.Errorf("learner: SFT batch %d, want ≥ 1", batch)
	}
	if err := l.loadProgress(); err != nil {
		return l.Stats(), err
	}
	var seqs []gpu.Sequence
	for _, ex := range examples {
		seq, why := l.sftSequence(ex)
		if why != "" {
			l.stats.Skipped++
			mSamples.WithLabelValues("skipped").Inc()
			l.log.Warn("learner: skipping an SFT example", "id", ex.ID, "reason", why)
			continue
		}
		seqs = append(seqs, seq)
	}
	if len(seqs) == 0 {
		return l.Stats(), fmt.Errorf("learner: none of the %d SFT examples fits (see the warnings)", len(examples))
	}
	l.sft = true
	start := time.Now()
	defer func() { l.sft = false; l.summary(time.Since(start)) }()
	for l.stats.Steps < steps {
		if err := ctx.Err(); err != nil {
			return l.Stats(), err
		}
		var part []gpu.Sequence
		for range min(batch, len(seqs)) {
			part = append(part, seqs[l.sftNext%len(seqs)])
			l.sftNext++
		}
		met, err := l.train(part)
		if err != nil {
			return l.Stats(), err
		}
		l.step++
		l.stats.Steps++
		l.stats.Samples += len(part)
		l.stats.Tokens += int64(met.Tokens)
		l.stats.LastLoss = met.Loss
		mSamples.WithLabelValues("trained").Add(float64(len(part)))
		st := stepStats(met, gpu.GRPOParams{}, true)
		if err := l.writeRecord(l.nextVersion(), nil, l.Offsets(), st); err != nil {
			return l.Stats(), err
		}
		if err := l.publish(ctx, met, 0, len(part)); err != nil {
			return l.Stats(), err
		}
		mSteps.Inc()
		mLoss.Set(met.Loss)
		l.progress(met, st, 0, 0, 0)
	}
	return l.Stats(), nil
}

func (l *Learner) sftSequence(ex Example) (gpu.Sequence, string) {
	var seq gpu.Sequence
	var err error
	if seq.Prompt, seq.Completion, err = l.tok.EncodeChat(ex.System, ex.Prompt, ex.Answer); err != nil {
		return gpu.Sequence{}, err.Error()
	}
	if len(l.stop) > 0 {
		seq.Completion = append(seq.Completion, l.stop[0])
	}
	if n := len(seq.Prompt) + len(seq.Completion) - 1; n > l.trainer.Config().MaxSeq {
		return seq, fmt.Sprintf("%d prompt + %d answer tokens exceed the maximum sequence length %d", len(seq.Prompt), len(seq.Completion), l.trainer.Config().MaxSeq)
	}
	return seq, ""
}

// AnswerProbs returns, for each example, the probability that the policy
// samples its answer token for token at temperature 1 under the current
// weights: exp of the sum of the answer tokens' log-probabilities, the eos
// token included. For an answer scored against its own oracle patch it is a
// lower bound on the exact-match rate of rollouts (another thought before
// the same edits also matches), read with forward passes only. Examples that
// do not fit (see SFT) get NaN.
func (l *Learner) AnswerProbs(examples []Example) ([]float64, error) {
	out := make([]float64, len(examples))
	var seqs []gpu.Sequence
	var at []int
	for i, ex := range examples {
		seq, why := l.sftSequence(ex)
		if why != "" {
			out[i] = math.NaN()
			continue
		}
		seqs, at = append(seqs, seq), append(at, i)
	}
	mb := l.trainer.Config().MaxBatch
	for c := 0; c < len(seqs); c += mb {
		part := seqs[c:min(len(seqs), c+mb)]
		lps, err := l.trainer.LogProbs(part)
		if err != nil {
			return nil, err
		}
		for j, lp := range lps {
			var sum float64
			for _, x := range lp {
				sum += float64(x)
			}
			out[at[c+j]] = math.Exp(sum)
		}
	}
	return out, nil
}

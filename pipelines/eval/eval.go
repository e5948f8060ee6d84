// Package eval measures a policy in the paper's repair-with-oracle-files
// setting (SWE-RL.md §3.4): each held-out instance's prompt shows the files
// the merged change touched, the policy answers once (greedy by default),
// and the answer is scored with the SWE-RL reward. It reports the
// format-correct rate, the mean reward and the exact-match rate (the
// answer's edits reproduce the merged files exactly), and writes each
// prediction in SWE-bench's format (instance_id, model_name_or_path,
// model_patch as a git diff) for the official harness.
package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"swerl/schemas"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
)

// Options configure Evaluate.
type Options struct {
	Prompt      prompt.Options
	MaxTokens   int     // default 512
	Temperature float64 // 0: greedy
	// Model is written as model_name_or_path.
	Model string
	// Timeout caps one reward computation. Default 30s.
	Timeout time.Duration
	// Progress, when set, is called after each instance with how many
	// have been done (prompted or not).
	Progress func(done int)
}

// Prediction is one SWE-bench prediction line plus swerl's scores.
type Prediction struct {
	InstanceID    string  `json:"instance_id"`
	Model         string  `json:"model_name_or_path"`
	ModelPatch    string  `json:"model_patch"`
	Reward        float64 `json:"reward"`
	FormatError   string  `json:"format_error,omitempty"`
	Exact         bool    `json:"exact_match"`
	PolicyVersion int64   `json:"policy_version"`
}

// Result aggregates an evaluation.
type Result struct {
	Instances     int     `json:"instances"`
	Unpromptable  int     `json:"unpromptable"`
	FormatCorrect float64 `json:"format_correct_rate"`
	MeanReward    float64 `json:"mean_reward"`
	ExactMatch    float64 `json:"exact_match_rate"`
	PolicyVersion int64   `json:"policy_version"`
}

func (r Result) String() string {
	return fmt.Sprintf("%d instances (v%d): format-correct %.1f%%, mean reward %.4f, exact match %.1f%%",
		r.Instances, r.PolicyVersion, 100*r.FormatCorrect, r.MeanReward, 100*r.ExactMatch)
}

// DefaultMaxTokens is Options.MaxTokens when unset, and swerl eval's
// --max-tokens default.
const DefaultMaxTokens = 512

// Evaluate answers every instance once with pol and scores the answers.
// Each prediction is also written to w as a JSON line when w is not nil.
func Evaluate(ctx context.Context, pol rollout.Policy, instances []schemas.Instance, o Options, w io.Writer) (Result, []Prediction, error) {
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.Timeout <= 0 {
		o.Timeout = reward.DefaultTimeout
	}
	var res Result
	res.PolicyVersion = -1
	var preds []Prediction
	var enc *json.Encoder
	if w != nil {
		enc = json.NewEncoder(w)
		enc.SetEscapeHTML(false)
	}
	for i := range instances {
		if o.Progress != nil && i > 0 {
			o.Progress(i)
		}
		in := &instances[i]
		spec := scoring.Spec{Prompt: o.Prompt, GroupSize: 1, MaxTokens: o.MaxTokens, Temperature: o.Temperature, Greedy: o.Temperature == 0}
		g, err := spec.Prepare(in, scoring.GroupID("eval/", in.ID, i))
		if err != nil {
			res.Unpromptable++
			continue
		}
		start := time.Now()
		resp, err := pol.Complete(ctx, g.Request)
		if err != nil {
			return res, preds, fmt.Errorf("eval: instance %s: %w", in.ID, err)
		}
		if len(resp.Completions) == 0 {
			return res, preds, fmt.Errorf("eval: instance %s: the policy returned no completion", in.ID)
		}
		samples, _ := spec.Samples(in, &g, resp, time.Since(start).Milliseconds(), "")
		sm := &samples[0]
		if r, ok := scoring.Score(ctx, g.Task(), sm, o.Timeout); !ok {
			if err := ctx.Err(); err != nil {
				return res, preds, err
			}
			// An answer that cannot be scored in time counts as a failed one,
			// with the reason as its format error.
			sm.Reward, sm.FormatError = r.Reward, r.Error
		}
		pred := Prediction{InstanceID: schemas.SWEBenchID(in.ID), Model: o.Model, PolicyVersion: resp.PolicyVersion,
			Reward: sm.Reward, FormatError: sm.FormatError}
		files := g.Prompt.Files
		if newFiles, err := reward.ApplyAnswer(files, sm.Completion); err == nil {
			old := map[string]string{}
			for path := range newFiles {
				old[path] = files[path]
			}
			pred.ModelPatch = reward.GitDiff(old, newFiles)
			pred.Exact = sameChange(files, newFiles, in.OracleNewContent)
		}
		res.Instances++
		res.PolicyVersion = max(res.PolicyVersion, resp.PolicyVersion)
		if sm.FormatError == "" {
			res.FormatCorrect++
		}
		res.MeanReward += sm.Reward
		if pred.Exact {
			res.ExactMatch++
		}
		preds = append(preds, pred)
		if enc != nil {
			if err := enc.Encode(&pred); err != nil {
				return res, preds, err
			}
		}
	}
	if o.Progress != nil {
		o.Progress(len(instances))
	}
	if res.Instances > 0 {
		n := float64(res.Instances)
		res.FormatCorrect /= n
		res.MeanReward /= n
		res.ExactMatch /= n
	}
	return res, preds, nil
}

// sameChange reports whether applying the answer left every file exactly
// as the merged change did (files neither side changes are equal).
func sameChange(base, pred, oracle map[string]string) bool {
	paths := map[string]bool{}
	for p := range pred {
		paths[p] = true
	}
	for p := range oracle {
		paths[p] = true
	}
	for p := range paths {
		want, ok := oracle[p]
		if !ok {
			want = base[p]
		}
		got, ok := pred[p]
		if !ok {
			got = base[p]
		}
		if got != want {
			return false
		}
	}
	return true
}

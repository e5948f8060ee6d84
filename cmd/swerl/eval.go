package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"swerl/internal/atomicfile"
	"swerl/pipelines/eval"
	"swerl/pipelines/rl"
	"swerl/transforms/rollout"
)

func init() {
	register(&command{name: "eval", summary: "evaluate a policy on held-out instances (repair with the oracle files): format-correct, mean reward, exact match; SWE-bench predictions", run: runEval})
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval", "--instances FILE|DIR (--model DIR | --policy SPEC) [--out FILE] [flags]", stderr)
	instances := fs.String("instances", "", "instances to evaluate: JSONL, Parquet, or a directory of Parquet (required)")
	modelDir := fs.String("model", "", "model or checkpoint directory to evaluate in process (same as --policy model:DIR)")
	policy := fs.String("policy", "", "policy: model:DIR, http://host:port/v1 (OpenAI-compatible) or file:COMPLETIONS.jsonl")
	out := fs.String("out", filepath.Join("swerl-out", "eval", "predictions.jsonl"), "SWE-bench predictions (instance_id, model_name_or_path, model_patch) plus swerl's scores, one JSON line each")
	name := fs.String("model-name", "", "model_name_or_path written in the predictions (default: the --model or --policy value)")
	limit := fs.Int("limit", 0, "evaluate at most this many instances (0: all)")
	maxTokens := fs.Int("max-tokens", eval.DefaultMaxTokens, "most completion tokens")
	temperature := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	compact := new(bool)
	addCompactPromptFlag(fs, compact, false, "")
	promptOpts := addPromptFlags(fs, 0, "")
	rewardTimeout := new(time.Duration)
	addRewardTimeoutFlag(fs, rewardTimeout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case *instances == "":
		return usagef("want --instances FILE|DIR")
	case (*modelDir == "") == (*policy == ""):
		return usagef("want one of --model DIR or --policy SPEC")
	case *maxTokens < 1 || *limit < 0 || *temperature < 0 || *rewardTimeout <= 0:
		return usagef("--max-tokens ≥ 1, --limit ≥ 0, --temperature ≥ 0 and a positive --reward-timeout, please")
	}
	spec := *policy
	if *modelDir != "" {
		spec = "model:" + *modelDir
	}
	if *name == "" {
		*name = spec
		if *modelDir != "" {
			*name = *modelDir
		}
	}
	ins, err := rl.LoadInstances(*instances)
	if err != nil {
		return fmt.Errorf("eval: %s: %w", *instances, err)
	}
	if *limit > 0 && len(ins) > *limit {
		ins = ins[:*limit]
	}
	if len(ins) == 0 {
		return fmt.Errorf("eval: %s holds no instances", *instances)
	}
	pol, err := rollout.Open(policyFromEnv(spec))
	if err != nil {
		return err
	}
	defer pol.Close()
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	f, err := atomicfile.Create(*out)
	if err != nil {
		return err
	}
	defer f.Abort()
	popts := promptOpts()
	popts.Compact = *compact
	start := time.Now()
	last := start
	o := eval.Options{
		Prompt:    popts,
		MaxTokens: *maxTokens, Temperature: *temperature, Model: *name, Timeout: *rewardTimeout,
		Progress: func(done int) {
			if done < len(ins) && time.Since(last) < 2*time.Second {
				return
			}
			last = time.Now()
			fmt.Fprintf(stderr, "swerl eval: %d/%d instances, %.1fs\n", done, len(ins), time.Since(start).Seconds())
		},
	}
	res, _, err := eval.Evaluate(ctx, pol, ins, o, f)
	if err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "swerl eval: %s → %s\n", res, *out)
	if res.Unpromptable > 0 {
		fmt.Fprintf(stderr, "swerl eval: %d instances had no prompt (no code context) and were not evaluated\n", res.Unpromptable)
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(res)
}

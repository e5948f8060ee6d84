package main

import (
	"context"
	"fmt"
	"io"
	"os"

	agentlessrun "swerl/pipelines/agentless"
	"swerl/transforms/agentless"
)

func init() {
	register(&command{name: "agentless", summary: "Agentless Mini on SWE-bench rows: localize, repair, normalize, vote → predictions.jsonl (check: conformance lines)", run: runAgentless})
}

func runAgentless(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "check" {
		return runAgentlessCheck(args[1:], stdout, stderr)
	}
	fs := newFlags("agentless", "--instances ROWS --repo PATH|--repos FILE --policy SPEC --out DIR  |  check --in FILE --out FILE", stderr)
	instances := fs.String("instances", "", "SWE-bench rows, .jsonl or .parquet (as swerl import swebench reads them)")
	repo := fs.String("repo", "", "local clone holding every row's base_commit")
	repos := fs.String("repos", "", `JSON file {"owner/name": "/path/to/clone", ...} for rows of several repositories`)
	policy := fs.String("policy", "", "policy spec: http://HOST:PORT/v1[?concurrency=N] (swerl serve, vLLM, SGLang), model:DIR, file:PATH")
	out := fs.String("out", "swerl-agentless", "output directory: predictions.jsonl, candidates.parquet, instances.jsonl, failed.jsonl")
	locN := fs.Int("localize-samples", agentless.DefaultOptions.LocalizeSamples, "localization answers per instance (more than 1 varies the tree's presentation)")
	repN := fs.Int("repair-samples", agentless.DefaultOptions.RepairSamples, "repair answers per instance (the paper: 500)")
	maxFiles := fs.Int("max-files", agentless.DefaultOptions.MaxFiles, "localized files shown to repair")
	temp := fs.Float64("temperature", 0, "repair sampling temperature (0: the policy's default; the paper: 1.0)")
	maxTokens := fs.Int("max-tokens", agentless.DefaultOptions.MaxTokens, "tokens per answer")
	maxInput := fs.Int("max-input-tokens", agentless.DefaultOptions.MaxInputTokens, "budget of the repair prompt's file contents (bytes/4); files past it are left out")
	conc := fs.Int("concurrency", 4, "policy requests in flight in each process running the pipeline (localize and repair share them)")
	batch := fs.Int("repair-batch", 0, "most repair samples one request asks for (0: all of an instance's samples in one request; smaller spreads an instance's samples over requests and workers)")
	seed := fs.Int64("seed", 0, "sampling seed")
	model := fs.String("model-name", "swerl", "model_name_or_path written in predictions")
	testCmd := fs.String("test-cmd", "", "optional: shell command run in a checkout of base_commit with each candidate applied (non-zero exit: failing); the candidates failing least vote")
	verbose := fs.Bool("v", false, "also log the Beam runner's own progress")
	addBeamFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *instances == "" || *policy == "" || (*repo == "" && *repos == "") {
		return usagef("want: swerl agentless --instances ROWS --repo PATH|--repos FILE --policy SPEC --out DIR")
	}
	if *conc < 1 || *batch < 0 {
		return usagef("--concurrency must be ≥ 1 and --repair-batch ≥ 0")
	}
	beamInit()
	quietRunner(ctx, stderr, *verbose)
	// Paths travel with the job to workers that may run elsewhere.
	sum, err := agentlessrun.Run(ctx, agentlessrun.Config{Instances: absPath(*instances), Repo: absPath(*repo), Repos: absPath(*repos), Policy: absPolicy(policyFromEnv(*policy)), Out: absPath(*out),
		Concurrency: *conc, RepairBatch: *batch, Progress: stderr, TestCommand: *testCmd, Solve: agentless.Options{LocalizeSamples: *locN, RepairSamples: *repN, MaxFiles: *maxFiles,
			Temperature: *temp, MaxTokens: *maxTokens, MaxInputTokens: *maxInput, Seed: *seed, Model: *model}})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, sum.String())
	return nil
}

// runAgentlessCheck reads conformance lines (kind normalize, apply or
// vote, input fields only) and writes one {"id","kind","result"} line
// each, in order.
func runAgentlessCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agentless check", "--in FILE --out FILE", stderr)
	in := fs.String("in", "", "conformance lines, JSONL (- for stdin)")
	out := fs.String("out", "", "results, JSONL (- for stdout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		return usagef("want: swerl agentless check --in FILE --out FILE")
	}
	var r io.Reader = os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	if *out == "-" {
		return agentless.Check(r, stdout, agentless.DefaultEngine())
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	cerr := agentless.Check(r, f, agentless.DefaultEngine())
	if err := f.Close(); err != nil && cerr == nil {
		cerr = err
	}
	return cerr
}

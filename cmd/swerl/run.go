package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/internal/atomicfile"
	"swerl/pipelines/eval"
	"swerl/pipelines/mine"
	"swerl/pipelines/rl"
	"swerl/pipelines/train"
	"swerl/schemas"

	"swerl/sinks/metrics"
	"swerl/transforms/advantage"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
	"swerl/transforms/window"
)

func init() {
	register(&command{name: "run", summary: "the whole SWE-RL loop on embedded defaults: mine, warm start, RL steps, evaluation", run: runRun})
}

var (
	mRunStep   = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_run_step", Help: "RL steps done by swerl run"})
	mRunReward = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_run_mean_reward", Help: "mean reward of the last RL step's samples"})
	mRunFormat = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_run_format_error_rate", Help: "format-error rate of the last RL step's samples"})
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "[--repo PATH]… [--steps N] [--out DIR] [flags]", stderr)
	var repos, events listFlag
	fs.Var(&repos, "repo", "git repository to mine (repeatable; default: the current directory)")
	addEventsFlag(fs, &events)
	instances := fs.String("instances", "", "use these instances (JSONL, Parquet, or a directory of Parquet) instead of mining")
	out := fs.String("out", "swerl-out", "output root: instances/, samples/, checkpoints/, index.parquet, eval/")
	modelDir := fs.String("model", "", "model directory to start from (default: the built-in tiny model, written to DIR/model)")
	builtin := fs.String("builtin", "tiny", "built-in model config when --model is not given (tiny or small)")
	pol := fs.String("policy", "", "sample rollouts from this OpenAI-compatible server (http://host:port/v1) instead of the in-process model; each published version is pushed to it first (LoRA adapters: vLLM, SGLang, swerl serve; full weights: SGLang; ?engine=sglang, ?sync=false, see sinks/engine)")
	engineTimeout := new(time.Duration)
	addEngineTimeoutFlag(fs, engineTimeout)
	device := new(string)
	addDeviceFlag(fs, device)
	resume := fs.Bool("resume", false, "continue the run in --out (its checkpoints and run.json)")
	steps := fs.Int("steps", 30, "RL steps (one optimizer step and one published version each)")
	keep := new(int)
	addKeepFlag(fs, keep, 10, "swerl run's default bounds its disk: every warm-start and RL step publishes a version")
	sftSteps := fs.Int("sft-steps", 400, "most supervised warm-start steps on the oracle answers before RL (0: none; see --sft-until)")
	sftBatch := fs.Int("sft-batch", 8, "warm-start examples per optimizer step")
	sftLR := fs.Float64("sft-lr", 3e-3, "warm-start learning rate")
	sftUntil := fs.Float64("sft-until", 0.25, "end the warm start once the policy samples the oracle answers exactly with this mean probability (read every 5 steps), leaving RL tasks it sometimes solves; 0: take all --sft-steps")
	of := addOptimizerFlags(fs, 1e-3, "swerl run's default is the built-in model's RL rate, also with --lora-rank, where 1e-2 collapsed it (docs/experiments.md)")
	group := new(int)
	addGroupSizeFlag(fs, group)
	batch := fs.Int("batch", 12, "instances per RL step (the default --max-tasks: every training task each step)")
	adv := new(string)
	addAdvantageFlag(fs, adv)
	maxTokens := fs.Int("max-tokens", 512, "longest completion in tokens")
	temperature := fs.Float64("temperature", 1, "sampling temperature of the rollouts; the RL learner's log-probs are at it (of the distribution sampled from)")
	gf := addGRPOFlags(fs, runGRPO)
	freshOptimizer := fs.Bool("fresh-moments", false, "start RL with zeroed AdamW moments instead of the warm start's")
	hunks := fs.Bool("hunks", true, "cut instances into one task per change hunk (for small models; see transforms/window)")
	hunkContext := fs.Int("hunk-context", 1, "with --hunks, unchanged lines kept on each side of a change")
	hunkBytes := fs.Int("hunk-bytes", 600, "with --hunks, drop hunks whose before or after window is longer")
	issueBytes := fs.Int("issue-bytes", 160, "with --hunks, cut the problem statement to this many bytes")
	compact := new(bool)
	addCompactPromptFlag(fs, compact, true, "swerl run's default is the built-in model's, which cannot read the full prompt (docs/run.md)")
	maxTasks := fs.Int("max-tasks", 12, "with the built-in model, train on at most this many tasks, those with the shortest oracle answers (0: all)")
	evalN := fs.Int("eval", 4, "held-out instances evaluated before RL and at the end (0: none)")
	seed := fs.Uint64("seed", 1, "seed of the built-in model, the data split and the sampling")
	metricsAddr := new(string)
	addMetricsFlag(fs, metricsAddr, "127.0.0.1:0", "")
	mode := fs.String("rollouts", "beam", "how rollouts run: beam (the train pipeline on Prism through Kafka, as swerl train) or local (the same transforms in this goroutine)")
	promptOpts := addPromptFlags(fs, 2500, "swerl run's default keeps a prompt within the built-in model's 1,024 positions")
	lf := addLoRAFlags(fs)
	kf := addKafkaFlags(fs)
	addBeamFlags(fs)
	verbose := fs.Bool("v", false, "log the Beam runner and the learner in full")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	*pol = policyFromEnv(*pol)
	if *steps < 0 || *sftSteps < 0 || *sftBatch < 1 || *group < 2 || *batch < 1 || *maxTokens < 1 || *evalN < 0 || *keep < 0 || *sftUntil < 0 || *sftUntil > 1 {
		return usagef("want --steps ≥ 0, --sft-steps ≥ 0, --sft-batch ≥ 1, --sft-until in [0,1], --group-size ≥ 2, --batch ≥ 1, --max-tokens ≥ 1, --eval ≥ 0, --keep-checkpoints ≥ 0")
	}
	if *mode != "beam" && *mode != "local" {
		return usagef("--rollouts %q: want beam or local", *mode)
	}
	if *engineTimeout <= 0 {
		return usagef("--engine-timeout %s, want > 0", *engineTimeout)
	}
	trainCfg, err := of.train()
	if err != nil {
		return err
	}
	maxSeq := &trainCfg.MaxSeq
	if trainCfg.GRPO, err = gf.params(*pol != ""); err != nil {
		return err
	}
	method, err := advantage.ParseMethod(*adv)
	if err != nil {
		return usagef("%v", err)
	}
	// LoRA applies to the RL steps; the warm start stays full fine-tuning:
	// the built-in model starts from random weights, whose frozen
	// embeddings and norms LoRA could not move.
	lora, err := lf.config(*seed)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	beamInit()
	quietRunner(ctx, stderr, *verbose)
	be, err := openBackend(*device)
	if err != nil {
		return usagef("%v", err)
	}
	srv, err := metrics.Serve(*metricsAddr)
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Close()
		fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", srv.Addr)
	}
	kc, stopKafka, err := kf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer stopKafka()
	if kf.brokers == "" {
		// A new embedded broker starts with empty topics: positions a
		// previous run saved against its own broker mean nothing here.
		if err := os.RemoveAll(filepath.Join(*out, "positions")); err != nil {
			return err
		}
	}
	start := time.Now()

	// 1. Data.
	all, err := runData(ctx, *instances, repos, events, *out, *resume, stderr)
	if err != nil {
		return err
	}
	tasks := all
	if *hunks {
		tasks = nil
		dropped := 0
		for i := range all {
			hs, d := window.Hunks(&all[i], window.Options{Context: *hunkContext, MaxBytes: *hunkBytes, MaxIssueBytes: *issueBytes})
			tasks, dropped = append(tasks, hs...), dropped+d
		}
		fmt.Fprintf(stderr, "swerl run: %d instances → %d hunk tasks (%d hunks over --hunk-bytes %d dropped)\n", len(all), len(tasks), dropped, *hunkBytes)
	}
	popts := promptOpts()
	popts.Compact = *compact
	if *modelDir == "" {
		// The built-in model's context is short: keep the tasks whose
		// prompt and oracle answer fit it with room to spare.
		kept := rl.Fitting(tasks, popts, *maxTokens, *maxSeq)
		if *maxTasks > 0 && len(kept) > *maxTasks+*evalN {
			kept = kept[:*maxTasks+*evalN]
		}
		fmt.Fprintf(stderr, "swerl run: %d of %d tasks fit the built-in model (answer ≤ %d tokens, prompt+answer ≤ %d)\n", len(kept), len(tasks), *maxTokens, *maxSeq)
		tasks = kept
	}
	trainSet, held := rl.Split(tasks, *evalN, *seed)
	if len(trainSet) == 0 {
		return fmt.Errorf("no training tasks: mined %d instances (try --repo with a repository that has more history, --instances, or --hunk-bytes)", len(all))
	}
	fmt.Fprintf(stderr, "swerl run: %d training tasks, %d held out for evaluation\n", len(trainSet), len(held))
	if len(held) > 0 {
		// The held-out tasks, for swerl eval on any checkpoint later.
		if err := rl.WriteInstances(filepath.Join(*out, "eval", "heldout.jsonl"), held); err != nil {
			return err
		}
	}

	// 2. Model.
	if *modelDir == "" && !*resume {
		*modelDir = filepath.Join(*out, "model")
		if _, err := os.Stat(filepath.Join(*modelDir, "config.json")); err != nil {
			if _, err := modeldir.Init(*modelDir, *builtin, *seed); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "swerl run: built-in %s model written to %s\n", *builtin, *modelDir)
		}
	}

	// 3. Rollouts: the in-process policy (reloaded after every step) or a
	// server. served is where the engine sync records what each engine
	// holds and where the rollout policies read which adapter to name.
	var cur rollout.Policy
	served := rollout.NewServed()
	openPolicy := func() (rollout.Policy, error) {
		if *pol != "" {
			return rollout.Open(*pol, rollout.WithServed(served))
		}
		return policy.Open(*out, policy.Options{Device: *device, MaxSeq: *maxSeq, Poll: -1, MaxTokens: *maxTokens,
			Temperature: *temperature, Log: log})
	}
	current := func() (rollout.Policy, error) {
		if cur == nil {
			p, err := openPolicy()
			if err != nil {
				return nil, err
			}
			cur = p
		} else if p, ok := cur.(*policy.Policy); ok {
			if _, err := p.Reload(); err != nil {
				return nil, err
			}
		}
		return cur, nil
	}
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	// With a server as the policy, each published version is pushed to it
	// before the round that samples it (sinks/engine).
	var engineSync func(context.Context, int64) error
	if strings.HasPrefix(*pol, "http://") || strings.HasPrefix(*pol, "https://") {
		if engineSync, err = rl.SpecSync(*pol, *out, served, *engineTimeout, log); err != nil {
			return usagef("--policy: %v", err)
		}
	}
	pub, err := rl.NewPublisher(kc)
	if err != nil {
		return err
	}
	defer pub.Close()
	spec := scoring.Spec{Prompt: popts, GroupSize: *group, MaxTokens: *maxTokens, Temperature: *temperature, Seed: int64(*seed)}
	rollouts := func(ctx context.Context, round int, ins []schemas.Instance) ([]schemas.Sample, error) {
		p, err := current()
		if err != nil {
			return nil, err
		}
		s, err := rl.Local(p, spec, method, 30*time.Second, log)(ctx, round, ins)
		if err != nil {
			return nil, err
		}
		return s, pub.Publish(ctx, s)
	}
	evaluate := func(tag string) (eval.Result, error) {
		if len(held) == 0 {
			return eval.Result{}, nil
		}
		p, err := current()
		if err != nil {
			return eval.Result{}, err
		}
		dir := filepath.Join(*out, "eval")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return eval.Result{}, err
		}
		path := filepath.Join(dir, "predictions-"+tag+".jsonl")
		f, err := os.Create(path)
		if err != nil {
			return eval.Result{}, err
		}
		defer f.Close()
		res, _, err := eval.Evaluate(ctx, p, held, eval.Options{Prompt: popts, MaxTokens: *maxTokens, Model: "swerl-" + tag}, f)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(stderr, "swerl run: eval %s: %s → %s\n", tag, res, path)
		// The result, for the summary of a resumed run (which does not
		// evaluate the start again).
		b, _ := json.Marshal(res)
		return res, atomicfile.WriteFile(filepath.Join(dir, "result-"+tag+".json"), b)
	}

	storeRollouts := false
	if *mode == "beam" {
		polSpec := *pol
		if polSpec == "" {
			polSpec = fmt.Sprintf("model:%s?poll=0&max_tokens=%d&temperature=%g&max_seq=%d&device=%s", *out, *maxTokens, *temperature, *maxSeq, *device)
		}
		rollouts = rl.BeamRollouts(kc, *out, train.Config{Policy: polSpec, Served: served, GroupSize: spec.GroupSize, Method: method, Prompt: spec.Prompt,
			Temperature: spec.Temperature, MaxTokens: spec.MaxTokens, Seed: spec.Seed, Concurrency: 1})
		storeRollouts = true
	}

	// 4. Warm start and RL.
	var evalStart eval.Result
	lastLine := time.Time{}
	cfg := rl.Config{
		Config: learner.Config{
			Out: *out, Model: *modelDir, Resume: *resume, Backend: be, KeepCheckpoints: *keep,
			Train: trainCfg, LoRA: lora, Temperature: *temperature, MaskTruncated: gf.maskTruncated, FreshOptimizer: *freshOptimizer,
			Log: log,
		},
		Instances: trainSet, SFTSteps: *sftSteps, SFTBatch: *sftBatch, SFTLR: *sftLR, SFTUntil: *sftUntil,
		AfterSFTCheck: func(step int, p float64) {
			fmt.Fprintf(stderr, "warm start step %d: oracle answers sampled exactly with mean probability %.3f\n", step, p)
		},
		Steps: *steps, BatchInstances: *batch, GroupSize: *group,
		Method: method, Prompt: popts, Seed: *seed, Rollouts: rollouts, RolloutsStore: storeRollouts, ShortThought: *compact,
		BeforeRL: func(ctx context.Context) error {
			var err error
			evalStart, err = evaluate("start")
			return err
		},
		AfterStep: func(ctx context.Context, st rl.StepStats) error {
			mRunStep.Set(float64(st.Step))
			mRunReward.Set(st.MeanReward)
			mRunFormat.Set(st.FormatErrorRate)
			if time.Since(lastLine) > time.Second || st.Step == st.Steps {
				lastLine = time.Now()
				fmt.Fprintf(stderr, "step %d/%d v%d  reward %+.3f  format-err %3.0f%%  exact %3.0f%%  zero-var %3.0f%%  staleness %d  %.1f samples/s  loss %.4f\n",
					st.Step, st.Steps, st.Version, st.MeanReward, 100*st.FormatErrorRate, 100*st.ExactRate, 100*st.ZeroVarianceRate,
					st.Version-1-st.PolicyVersion, float64(st.Samples)/(st.RolloutTime+st.TrainTime).Seconds(), st.Loss)
			}
			return nil
		},
	}
	if *verbose {
		cfg.Progress = stderr
	}
	cfg.Sync = engineSync
	until := ""
	if *sftUntil > 0 {
		until = fmt.Sprintf(", until the oracle answers are sampled with probability %g", *sftUntil)
	}
	fmt.Fprintf(stderr, "swerl run: warm start of at most %d steps%s, then %d RL steps of %d instances × %d completions\n", *sftSteps, until, *steps, *batch, *group)
	sum, err := rl.Run(ctx, cfg)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "swerl run: interrupted after RL step %d; everything published is kept, continue with --resume\n", sum.RLSteps)
		return nil
	}
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(*out, "eval", "result-start.json")); err == nil && len(held) > 0 {
		// A resumed run evaluated the start in an earlier process.
		if err := json.Unmarshal(b, &evalStart); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(*out, "eval", "result-start.json"), err)
		}
	}
	if engineSync != nil {
		if err := engineSync(ctx, sum.Version); err != nil {
			return err
		}
	}
	evalEnd, err := evaluate("end")
	if err != nil {
		return err
	}
	runSummary(stderr, *out, sum, evalStart, evalEnd, len(held) > 0, time.Since(start))
	return nil
}

// runData mines (or loads) the instances of a run.
func runData(ctx context.Context, instances string, repos, events []string, out string, resume bool, stderr io.Writer) ([]schemas.Instance, error) {
	if instances != "" {
		ins, err := rl.LoadInstances(instances)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "swerl run: %d instances from %s\n", len(ins), instances)
		return ins, nil
	}
	dir := filepath.Join(out, "instances")
	if resume {
		if ins, err := rl.LoadInstances(dir); err == nil && len(ins) > 0 {
			fmt.Fprintf(stderr, "swerl run: %d instances from %s (resumed)\n", len(ins), dir)
			return ins, nil
		}
	}
	if len(repos) == 0 {
		repos = []string{"."}
	}
	sum, err := mine.Run(ctx, mine.Config{Repos: repos, Events: events, Out: out, Commits: true, Progress: stderr})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "swerl run: mined %d instances from %d commits and %d PRs of %s\n", sum.Instances, sum.Commits, sum.PRs, strings.Join(repos, ", "))
	return rl.LoadInstances(dir)
}

func runSummary(w io.Writer, out string, sum rl.Summary, start, end eval.Result, evaluated bool, took time.Duration) {
	fmt.Fprintf(w, "\nswerl run: done in %v: %d warm-start steps, %d RL steps, %d samples, newest version v%d\n",
		took.Round(time.Second), sum.SFTSteps, sum.RLSteps, sum.Samples, sum.Version)
	if n := len(sum.History); n >= 2 {
		h := n / 2
		mean := func(ss []rl.StepStats) (r, f float64) {
			for _, s := range ss {
				r += s.MeanReward
				f += s.FormatErrorRate
			}
			return r / float64(len(ss)), f / float64(len(ss))
		}
		r1, f1 := mean(sum.History[:h])
		r2, f2 := mean(sum.History[h:])
		fmt.Fprintf(w, "  rollout reward, first half of the steps %+.4f (format errors %.0f%%), second half %+.4f (format errors %.0f%%)\n", r1, 100*f1, r2, 100*f2)
	}
	var split rl.TimeSplit
	for _, s := range sum.History {
		split.Add(s.Split())
	}
	split.Fprint(w, len(sum.History))
	if evaluated {
		fmt.Fprintf(w, "  held-out eval before RL: %s\n  held-out eval at the end: %s\n", start, end)
	}
	for _, p := range []struct{ what, path string }{
		{"instances", filepath.Join(out, "instances")},
		{"samples", filepath.Join(out, "samples")},
		{"checkpoints", filepath.Join(out, "checkpoints")},
		{"checkpoint index", filepath.Join(out, "index.parquet")},
		{"eval predictions (SWE-bench format)", filepath.Join(out, "eval")},
	} {
		if _, err := os.Stat(p.path); err == nil {
			fmt.Fprintf(w, "  %-36s %s\n", p.what, p.path)
		}
	}
	fmt.Fprintf(w, "  report: swerl report --out %s\n", out)
}

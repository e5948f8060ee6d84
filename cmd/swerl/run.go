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

	"swerl/gpu"
	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/internal/atomicfile"
	"swerl/pipelines/eval"
	"swerl/pipelines/mine"
	"swerl/pipelines/rl"
	"swerl/pipelines/train"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/kafkaio"

	"swerl/sinks/metrics"
	"swerl/sinks/weightsync"
	"swerl/transforms/advantage"
	"swerl/transforms/prompt"
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
	o, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	env, err := o.setup(ctx, stderr)
	if err != nil {
		return err
	}
	defer env.close()
	start := time.Now()
	// What --out holds decides, before a minute of mining, whether there is
	// a run to continue.
	if err := o.checkOut(stderr); err != nil {
		return err
	}
	trainSet, held, err := o.tasks(ctx, stderr)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while mining: the instances of a stopped mining run
			// are never used (mine.Finished), so --resume mines again.
			fmt.Fprintf(stderr, "swerl run: interrupted while mining; nothing was trained yet, continue with --resume (mining starts again)\n")
			return nil
		}
		return err
	}
	if err := o.initModel(stderr); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "swerl run: interrupted while writing the built-in model; the mined instances are kept, continue with --resume\n")
			return nil
		}
		return err
	}
	loop, err := newRunLoop(o, env, held, stderr)
	if err != nil {
		return err
	}
	defer loop.close()
	cfg := o.rlConfig(env, loop, trainSet, stderr)
	sum, err := rl.Run(ctx, cfg)
	if errors.Is(err, context.Canceled) || (err != nil && ctx.Err() != nil) {
		fmt.Fprintf(stderr, "swerl run: interrupted %s; everything published is kept, continue with --resume\n", sum.Where())
		return nil
	}
	if err != nil {
		return err
	}
	if n := len(sum.History); n > 0 && sum.RLSteps == 0 {
		// Every RL step was taken by an earlier process: its last line,
		// from run.json, as a run never stopped ends on.
		stepLine(stderr, sum.History[n-1])
	}
	if err := loop.finish(ctx, sum, len(held) > 0, time.Since(start)); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "swerl run: interrupted in the final evaluation; every RL step is published, continue with --resume (it evaluates again)\n")
			return nil
		}
		return err
	}
	return nil
}

// runOptions are swerl run's flags, parsed and checked.
type runOptions struct {
	repos, events                  []string
	instances, out, model, builtin string
	policy, device, mode           string
	engineTimeout                  time.Duration
	resume, hunks, compact         bool
	reuseData                      bool // use finished mining output in --out (--resume)
	freshOptimizer, verbose        bool
	sftLoRA                        bool
	steps, keep, group, batch      int
	concurrency                    int
	sftSteps, sftBatch             int
	maxTokens, maxTasks, evalN     int
	hunkContext, hunkBytes         int
	issueBytes                     int
	sftLR, sftUntil, temperature   float64
	seed                           uint64
	metricsAddr                    string
	train                          gpu.TrainConfig
	maskTruncated                  bool
	method                         advantage.Method
	lora                           gpu.LoRAConfig
	prompt                         prompt.Options
	kafka                          *kafkaFlags
}

func parseRunFlags(args []string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{}
	fs := newFlags("run", "[--repo PATH]… [--steps N] [--out DIR] [flags]", stderr)
	var repos, events listFlag
	fs.Var(&repos, "repo", "git repository to mine (repeatable; default: the current directory)")
	addEventsFlag(fs, &events)
	fs.StringVar(&o.instances, "instances", "", "use these instances (JSONL, Parquet, or a directory of Parquet) instead of mining")
	fs.StringVar(&o.out, "out", "swerl-out", "output root: instances/, samples/, checkpoints/, index.parquet, eval/")
	fs.StringVar(&o.model, "model", "", "model directory to start from (default: the built-in tiny model, written to DIR/model)")
	fs.StringVar(&o.builtin, "builtin", "tiny", "built-in model config when --model is not given (tiny or small)")
	fs.StringVar(&o.policy, "policy", "", "sample rollouts from this OpenAI-compatible server (http://host:port/v1) instead of the in-process model; each published version is pushed to it first (LoRA adapters: vLLM, SGLang, swerl serve; full weights: SGLang; ?engine=sglang, ?sync=false, see sinks/weightsync)")
	addEngineTimeoutFlag(fs, &o.engineTimeout)
	addDeviceFlag(fs, &o.device)
	fs.BoolVar(&o.resume, "resume", false, "continue the run in --out (its instances, checkpoints and run.json) from wherever it was stopped, a kill -9 included; with nothing to resume there (no version published yet) the run starts fresh and says so")
	fs.IntVar(&o.steps, "steps", 30, "RL steps (one optimizer step and one published version each)")
	addKeepFlag(fs, &o.keep, 10, "swerl run's default bounds its disk: every warm-start and RL step publishes a version")
	fs.IntVar(&o.sftSteps, "sft-steps", 400, "most supervised warm-start steps on the oracle answers before RL (0: none; see --sft-until)")
	fs.IntVar(&o.sftBatch, "sft-batch", rl.DefaultSFTBatch, "warm-start examples per optimizer step")
	fs.Float64Var(&o.sftLR, "sft-lr", 3e-3, "warm-start learning rate")
	fs.BoolVar(&o.sftLoRA, "sft-lora", false, "train the warm start with the --lora-rank adapters too, instead of every weight: for a pretrained --model, and for a --policy engine that loads adapters but not full weights (vLLM), which then samples every version exactly")
	fs.Float64Var(&o.sftUntil, "sft-until", 0.25, "end the warm start once the policy samples the oracle answers exactly with this mean probability (read every 5 steps, on at most 64 of the tasks), leaving RL tasks it sometimes solves; 0: take all --sft-steps")
	of := addOptimizerFlags(fs, 1e-3, "swerl run's default is the built-in model's RL rate, also with --lora-rank (higher rates: docs/lora.md)")
	addGroupSizeFlag(fs, &o.group)
	fs.IntVar(&o.batch, "batch", 12, "instances per RL step (the default --max-tasks: every training task each step)")
	fs.IntVar(&o.concurrency, "concurrency", 1, "policy requests in flight at once; swerl run's default sends a round's groups (one request each) one after another; more lets a --policy engine such as vLLM decode several groups in one batch (bench/peers/README.md; --rollouts beam only)")
	var adv string
	addAdvantageFlag(fs, &adv)
	fs.IntVar(&o.maxTokens, "max-tokens", 512, "longest completion in tokens")
	fs.Float64Var(&o.temperature, "temperature", 1, "sampling temperature of the rollouts; the RL learner's log-probs are at it (of the distribution sampled from)")
	gf := addGRPOFlags(fs, runGRPO)
	fs.BoolVar(&o.freshOptimizer, "fresh-moments", false, "start RL with zeroed AdamW moments instead of the warm start's")
	fs.BoolVar(&o.hunks, "hunks", true, "cut instances into one task per change hunk (for small models; see transforms/window)")
	fs.IntVar(&o.hunkContext, "hunk-context", 1, "with --hunks, unchanged lines kept on each side of a change")
	fs.IntVar(&o.hunkBytes, "hunk-bytes", 600, "with --hunks, drop hunks whose before or after window is longer")
	fs.IntVar(&o.issueBytes, "issue-bytes", 160, "with --hunks, cut the problem statement to this many bytes")
	addCompactPromptFlag(fs, &o.compact, true, "swerl run's default is the built-in model's, which cannot read the full prompt (docs/run.md)")
	fs.IntVar(&o.maxTasks, "max-tasks", 12, "with the built-in model, train on at most this many tasks, those with the shortest oracle answers (0: all)")
	fs.IntVar(&o.evalN, "eval", 4, "held-out instances evaluated before RL and at the end (0: none)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the built-in model, the data split and the sampling")
	addMetricsFlag(fs, &o.metricsAddr, "127.0.0.1:0", "")
	fs.StringVar(&o.mode, "rollouts", "beam", "how rollouts run: beam (the train pipeline on Prism through Kafka, as swerl train) or local (the same transforms in this goroutine)")
	promptOpts := addPromptFlags(fs, 2500, "swerl run's default keeps a prompt within the built-in model's 1,024 positions")
	lf := addLoRAFlags(fs)
	o.kafka = addKafkaFlags(fs)
	addBeamFlags(fs)
	fs.BoolVar(&o.verbose, "v", false, "log the Beam runner and the learner in full")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q", fs.Args())
	}
	o.repos, o.events = repos, events
	o.policy = policyFromEnv(o.policy)
	if o.steps < 0 || o.sftSteps < 0 || o.sftBatch < 1 || o.group < 2 || o.batch < 1 || o.concurrency < 1 || o.maxTokens < 1 || o.evalN < 0 || o.keep < 0 || o.sftUntil < 0 || o.sftUntil > 1 {
		return nil, usagef("want --steps ≥ 0, --sft-steps ≥ 0, --sft-batch ≥ 1, --sft-until in [0,1], --group-size ≥ 2, --batch ≥ 1, --concurrency ≥ 1, --max-tokens ≥ 1, --eval ≥ 0, --keep-checkpoints ≥ 0")
	}
	if o.mode != "beam" && o.mode != "local" {
		return nil, usagef("--rollouts %q: want beam or local", o.mode)
	}
	if o.engineTimeout <= 0 {
		return nil, usagef("--engine-timeout %s, want > 0", o.engineTimeout)
	}
	var err error
	if o.train, err = of.train(); err != nil {
		return nil, err
	}
	if o.train.GRPO, err = gf.params(o.policy != ""); err != nil {
		return nil, err
	}
	o.maskTruncated = gf.maskTruncated
	if o.method, err = advantage.ParseMethod(adv); err != nil {
		return nil, usagef("%v", err)
	}
	// LoRA applies to the RL steps; the warm start stays full fine-tuning
	// unless --sft-lora: the built-in model starts from random weights,
	// whose frozen embeddings and norms LoRA could not move.
	if o.lora, err = lf.config(o.seed); err != nil {
		return nil, err
	}
	if o.sftLoRA && o.lora.Rank == 0 {
		return nil, usagef("--sft-lora trains the warm start's LoRA adapters: give --lora-rank")
	}
	o.prompt = promptOpts()
	o.prompt.Compact = o.compact
	return o, nil
}

// runEnv is what a run holds open: its log, the training backend, the
// metrics server and Kafka (an embedded broker without --brokers).
type runEnv struct {
	log   *slog.Logger
	be    gpu.Backend
	kafka kafkaio.Config
	close func()
}

func (o *runOptions) setup(ctx context.Context, stderr io.Writer) (*runEnv, error) {
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	env := &runEnv{log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	beamInit()
	quietRunner(ctx, stderr, o.verbose)
	var err error
	if env.be, err = openBackend(o.device); err != nil {
		return nil, usagef("%v", err)
	}
	srv, err := metrics.Serve(o.metricsAddr)
	if err != nil {
		return nil, err
	}
	if srv != nil {
		fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", srv.Addr)
	}
	kc, stopKafka, err := o.kafka.connect(ctx, stderr)
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return nil, err
	}
	env.kafka = kc
	env.close = func() {
		stopKafka()
		if srv != nil {
			srv.Close()
		}
	}
	if o.kafka.brokers == "" {
		// A new embedded broker starts with empty topics: positions a
		// previous run saved against its own broker mean nothing here.
		if err := os.RemoveAll(filepath.Join(o.out, "positions")); err != nil {
			env.close()
			return nil, err
		}
	}
	return env, nil
}

// tasks mines (or loads) the instances, cuts them into hunk tasks with
// --hunks, keeps those that fit the built-in model, and splits off the
// held-out tasks, which it writes to eval/heldout.jsonl.
func (o *runOptions) tasks(ctx context.Context, stderr io.Writer) (trainSet, held []schemas.Instance, err error) {
	all, err := runData(ctx, o.instances, o.repos, o.events, o.out, o.reuseData, stderr)
	if err != nil {
		return nil, nil, err
	}
	tasks := all
	if o.hunks {
		tasks = nil
		dropped := 0
		for i := range all {
			hs, d := window.Hunks(&all[i], window.Options{Context: o.hunkContext, MaxBytes: o.hunkBytes, MaxIssueBytes: o.issueBytes})
			tasks, dropped = append(tasks, hs...), dropped+d
		}
		fmt.Fprintf(stderr, "swerl run: %d instances → %d hunk tasks (%d hunks over --hunk-bytes %d dropped)\n", len(all), len(tasks), dropped, o.hunkBytes)
	}
	if o.model == "" {
		// The built-in model's context is short: keep the tasks whose
		// prompt and oracle answer fit it with room to spare.
		kept := rl.Fitting(tasks, o.prompt, o.maxTokens, o.train.MaxSeq)
		if o.maxTasks > 0 && len(kept) > o.maxTasks+o.evalN {
			kept = kept[:o.maxTasks+o.evalN]
		}
		fmt.Fprintf(stderr, "swerl run: %d of %d tasks fit the built-in model (answer ≤ %d tokens, prompt+answer ≤ %d)\n", len(kept), len(tasks), o.maxTokens, o.train.MaxSeq)
		tasks = kept
	}
	trainSet, held = rl.Split(tasks, o.evalN, o.seed)
	if len(trainSet) == 0 {
		return nil, nil, fmt.Errorf("no training tasks: mined %d instances (try --repo with a repository that has more history, --instances, or --hunk-bytes)", len(all))
	}
	fmt.Fprintf(stderr, "swerl run: %d training tasks, %d held out for evaluation\n", len(trainSet), len(held))
	if len(held) > 0 {
		// The held-out tasks, for swerl eval on any checkpoint later.
		if err := rl.WriteInstances(filepath.Join(o.out, "eval", "heldout.jsonl"), held); err != nil {
			return nil, nil, err
		}
	}
	return trainSet, held, nil
}

// checkOut looks at what --out holds before any work. With --resume and no
// version published there yet (a fresh or empty --out, or a run killed
// before its learner published v0) the run starts fresh and says so, as
// Trainer-style tools do with a resume flag and no checkpoint: users who
// always pass --resume get a run, not an error after a minute of mining.
// Without --resume, an --out that holds published versions is refused here,
// before mining, rather than by the learner after it.
func (o *runOptions) checkOut(stderr io.Writer) error {
	store, err := checkpoint.Open(checkpoint.Config{Dir: o.out, ReadOnly: true})
	if err != nil {
		return err
	}
	rows, err := store.Versions()
	if err != nil {
		return err
	}
	switch {
	case o.resume && len(rows) == 0:
		fmt.Fprintf(stderr, "swerl run: --resume: nothing to resume in %s (no version published yet); starting fresh\n", o.out)
		// Finished mining output is still used (runData), but nothing
		// of an earlier learner: it published nothing.
		o.resume, o.reuseData = false, true
	case o.resume:
		o.reuseData = true
	case len(rows) > 0:
		return fmt.Errorf("--out %s already holds a run (%d published versions, newest v%d): continue it with --resume, or choose another --out",
			o.out, len(rows), rows[len(rows)-1].Version)
	}
	return nil
}

// initModel writes the built-in model to DIR/model when no --model is
// given and none was written there by an earlier run. It is written to a
// temporary folder and renamed into place, so a run killed while writing
// it leaves no partial model behind that a resumed run would take. A
// resumed run whose learner published versions continues from those; the
// model is the start of one that published none.
func (o *runOptions) initModel(stderr io.Writer) error {
	if o.model != "" {
		return nil
	}
	o.model = filepath.Join(o.out, "model")
	if _, err := os.Stat(filepath.Join(o.model, "config.json")); err == nil {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	// Left by a run killed while writing the model.
	if old, _ := filepath.Glob(filepath.Join(o.out, ".model.tmp-*")); len(old) > 0 {
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	tmp, err := os.MkdirTemp(o.out, ".model.tmp-*")
	if err != nil {
		return err
	}
	if _, err := modeldir.Init(tmp, o.builtin, o.seed); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("writing the built-in model to %s: %w", o.model, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	// A model folder without config.json (an older partial write) is
	// replaced.
	os.RemoveAll(o.model)
	if err := os.Rename(tmp, o.model); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	fmt.Fprintf(stderr, "swerl run: built-in %s model written to %s\n", o.builtin, o.model)
	return nil
}

// runLoop is the sampling side of a run: the policy that evaluates (the
// in-process model, reloaded after every step, or a server), the rounds'
// rollouts (the Beam train pipeline or local), and the push of each
// version to a server policy before the round that samples it.
type runLoop struct {
	o          *runOptions
	log        *slog.Logger
	held       []schemas.Instance
	stderr     io.Writer
	cur        rollout.Policy
	table      *weightsync.Table
	engineSync func(context.Context, int64) error
	pub        *rl.Publisher
	rollouts   rl.RolloutFunc
	stored     bool // the rollouts store their samples (Beam)
	evalStart  eval.Result
}

func newRunLoop(o *runOptions, env *runEnv, held []schemas.Instance, stderr io.Writer) (*runLoop, error) {
	// table is where the engine sync records what each engine holds and
	// where the rollout policies read which adapter to name.
	l := &runLoop{o: o, log: env.log, held: held, stderr: stderr, table: weightsync.NewTable()}
	if strings.HasPrefix(o.policy, "http://") || strings.HasPrefix(o.policy, "https://") {
		s, err := weightsync.SpecSyncer(o.policy, l.table, o.engineTimeout, env.log)
		if err != nil {
			return nil, usagef("--policy: %v", err)
		}
		if s != nil {
			l.engineSync = s.Round(o.out)
		}
	}
	pub, err := rl.NewPublisher(env.kafka)
	if err != nil {
		return nil, err
	}
	l.pub = pub
	spec := scoring.Spec{Prompt: o.prompt, GroupSize: o.group, MaxTokens: o.maxTokens, Temperature: o.temperature, Seed: int64(o.seed)}
	if o.mode == "beam" {
		polSpec := o.policy
		if polSpec == "" {
			polSpec = fmt.Sprintf("model:%s?poll=0&max_tokens=%d&temperature=%g&max_seq=%d&device=%s", o.out, o.maxTokens, o.temperature, o.train.MaxSeq, o.device)
		}
		l.rollouts = rl.BeamRollouts(env.kafka, o.out, train.Config{Policy: polSpec, Table: l.table, Method: o.method, Concurrency: o.concurrency, Spec: spec})
		l.stored = true
		return l, nil
	}
	l.rollouts = func(ctx context.Context, round int, ins []schemas.Instance) ([]schemas.Sample, error) {
		p, err := l.current()
		if err != nil {
			return nil, err
		}
		s, err := rl.Local(p, spec, o.method, 30*time.Second, l.log)(ctx, round, ins)
		if err != nil {
			return nil, err
		}
		return s, l.pub.Publish(ctx, s)
	}
	return l, nil
}

// current returns the policy that samples the newest version: opened on
// first use, the in-process model reloaded since.
func (l *runLoop) current() (rollout.Policy, error) {
	if l.cur == nil {
		var p rollout.Policy
		var err error
		if l.o.policy != "" {
			p, err = rollout.Open(l.o.policy, rollout.WithTable(l.table))
		} else {
			p, err = policy.Open(l.o.out, policy.Options{Device: l.o.device, MaxSeq: l.o.train.MaxSeq, MaxTokens: l.o.maxTokens,
				Temperature: l.o.temperature, Log: l.log})
		}
		if err != nil {
			return nil, err
		}
		l.cur = p
	} else if p, ok := l.cur.(*policy.Policy); ok {
		if _, err := p.Reload(); err != nil {
			return nil, err
		}
	}
	return l.cur, nil
}

// evaluate runs the held-out tasks on the current policy and writes the
// predictions and the result under eval/ (tagged start or end).
func (l *runLoop) evaluate(ctx context.Context, tag string) (eval.Result, error) {
	if len(l.held) == 0 {
		return eval.Result{}, nil
	}
	p, err := l.current()
	if err != nil {
		return eval.Result{}, err
	}
	dir := filepath.Join(l.o.out, "eval")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return eval.Result{}, err
	}
	path := filepath.Join(dir, "predictions-"+tag+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		return eval.Result{}, err
	}
	defer f.Close()
	res, _, err := eval.Evaluate(ctx, p, l.held, eval.Options{Prompt: l.o.prompt, MaxTokens: l.o.maxTokens, Model: "swerl-" + tag}, f)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(l.stderr, "swerl run: eval %s: %s → %s\n", tag, res, path)
	// The result, for the summary of a resumed run (which does not
	// evaluate the start again).
	b, _ := json.Marshal(res)
	return res, atomicfile.WriteFile(filepath.Join(dir, "result-"+tag+".json"), b)
}

func (l *runLoop) close() {
	if l.cur != nil {
		l.cur.Close()
	}
	l.pub.Close()
}

// rlConfig is the warm start and RL of the run: the learner both phases
// run, the rounds' rollouts, the evaluation before RL, and a step line
// after each step.
func (o *runOptions) rlConfig(env *runEnv, loop *runLoop, trainSet []schemas.Instance, stderr io.Writer) rl.Config {
	lastLine := time.Time{}
	cfg := rl.Config{
		Learner: learner.Config{
			Out: o.out, Model: o.model, Resume: o.resume, Backend: env.be, KeepCheckpoints: o.keep,
			Train: o.train, LoRA: o.lora, Temperature: o.temperature, MaskTruncated: o.maskTruncated, FreshOptimizer: o.freshOptimizer,
			TiedHeadTensor: loop.engineSync != nil, Log: env.log,
		},
		Instances: trainSet, SFTSteps: o.sftSteps, SFTBatch: o.sftBatch, SFTLR: o.sftLR, SFTLoRA: o.sftLoRA, SFTUntil: o.sftUntil,
		AfterSFTCheck: func(step int, p float64) {
			fmt.Fprintf(stderr, "warm start step %d: oracle answers sampled exactly with mean probability %.3f\n", step, p)
		},
		Steps: o.steps, BatchInstances: o.batch, GroupSize: o.group,
		Method: o.method, Prompt: o.prompt, Seed: o.seed, Rollouts: loop.rollouts, RolloutsStore: loop.stored, ShortThought: o.compact,
		BeforeRL: func(ctx context.Context) error {
			var err error
			loop.evalStart, err = loop.evaluate(ctx, "start")
			return err
		},
		AfterStep: func(ctx context.Context, st rl.StepStats) error {
			mRunStep.Set(float64(st.Step))
			mRunReward.Set(st.MeanReward)
			mRunFormat.Set(st.FormatErrorRate)
			if time.Since(lastLine) > time.Second || st.Step == st.Steps {
				lastLine = time.Now()
				stepLine(stderr, st)
			}
			return nil
		},
		Sync: loop.engineSync,
	}
	if o.verbose {
		cfg.Learner.Progress = stderr
	}
	until := ""
	if o.sftUntil > 0 {
		until = fmt.Sprintf(", until the oracle answers are sampled with probability %g", o.sftUntil)
	}
	fmt.Fprintf(stderr, "swerl run: warm start of at most %d steps%s, then %d RL steps of %d instances × %d completions\n", o.sftSteps, until, o.steps, o.batch, o.group)
	return cfg
}

// stepLine prints the line of one RL step. A round without samples (every
// rollout dead-lettered: an engine down or timing out) says so instead of
// a reward of 0 from none and a staleness measured against version 0.
func stepLine(w io.Writer, st rl.StepStats) {
	if st.Samples == 0 {
		fmt.Fprintf(w, "step %d/%d v%d  no samples: every rollout of the round failed (dead letters under --out's deadletter/); no update\n",
			st.Step, st.Steps, st.Version)
		return
	}
	rate := 0.0
	if t := (st.RolloutTime + st.TrainTime).Seconds(); t > 0 {
		rate = float64(st.Samples) / t
	}
	fmt.Fprintf(w, "step %d/%d v%d  reward %+.3f  format-err %3.0f%%  exact %3.0f%%  zero-var %3.0f%%  staleness %d  %.1f samples/s  loss %.4f\n",
		st.Step, st.Steps, st.Version, st.MeanReward, 100*st.FormatErrorRate, 100*st.ExactRate, 100*st.ZeroVarianceRate,
		st.Version-1-st.PolicyVersion, rate, st.Loss)
}

// finish pushes the last version to a server policy, evaluates the end
// and prints the run's summary.
func (l *runLoop) finish(ctx context.Context, sum rl.Summary, evaluated bool, took time.Duration) error {
	startPath := filepath.Join(l.o.out, "eval", "result-start.json")
	if b, err := os.ReadFile(startPath); err == nil && evaluated {
		// A resumed run evaluated the start in an earlier process.
		if err := json.Unmarshal(b, &l.evalStart); err != nil {
			return fmt.Errorf("%s: %w", startPath, err)
		}
	}
	if l.engineSync != nil {
		if err := l.engineSync(ctx, sum.Version); err != nil {
			return err
		}
	}
	evalEnd, err := l.evaluate(ctx, "end")
	if err != nil {
		return err
	}
	runSummary(l.stderr, l.o.out, sum, l.evalStart, evalEnd, evaluated, took)
	return nil
}

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
		// Only the output of a mining run that finished: a stopped one
		// leaves some of its part files, each complete, but not all.
		done, _, err := mine.Finished(ctx, out)
		if err != nil {
			return nil, err
		}
		if done {
			ins, err := rl.LoadInstances(dir)
			if err != nil {
				return nil, err
			}
			if len(ins) > 0 {
				fmt.Fprintf(stderr, "swerl run: %d instances from %s (resumed)\n", len(ins), dir)
				return ins, nil
			}
		} else if _, err := os.Stat(dir); err == nil {
			fmt.Fprintf(stderr, "swerl run: mining did not finish in the earlier run (%s has no %s): mining again\n", dir, mine.DoneFile)
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
	// The counts are the whole run's, an earlier process of a resumed
	// run included; the time is this process's.
	samples := 0
	for _, s := range sum.History {
		samples += s.Samples
	}
	fmt.Fprintf(w, "\nswerl run: done in %v: %d warm-start steps, %d RL steps, %d samples, newest version v%d\n",
		took.Round(time.Second), sum.SFTSteps, sum.Done, samples, sum.Version)
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

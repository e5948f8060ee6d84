package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"swerl/gpu"
	"swerl/gpu/learner"
	"swerl/internal/engineapi"
	"swerl/sinks/kafkaio"
	"swerl/sinks/metrics"
	"swerl/sinks/weightsync"
)

func init() {
	register(&command{name: "learn", summary: "train the policy with GRPO on scored samples and publish checkpoint versions", run: runLearn})
}

// optimizerFlags are the trainer's flags: learn, sft and run take them.
type optimizerFlags struct {
	microBatch, maxSeq, warmup, decaySteps int
	ckpt                                   bool
	lr, minLR, weightDecay, clip           float64
}

// addOptimizerFlags defines the trainer's flags under the "Model and
// trainer" heading, with this command's learning rate and why it differs.
func addOptimizerFlags(fs *flag.FlagSet, defLR float64, lrWhy string) *optimizerFlags {
	f := &optimizerFlags{}
	section(fs, "Model and trainer")
	defer endSection(fs)
	fs.IntVar(&f.microBatch, "micro-batch", gpu.DefaultMaxBatch, "sequences per micro-batch (a step accumulates as many as it needs)")
	addMaxSeqFlag(fs, &f.maxSeq, gpu.DefaultMaxSeq, "")
	fs.BoolVar(&f.ckpt, "checkpoint-activations", false, "keep only each layer's input and recompute the layer in the backward pass: one layer's activations in memory instead of all, for one more forward pass (a 7B LoRA step at 4×2048 fits 80 GB with it)")
	addLRFlag(fs, &f.lr, defLR, lrWhy)
	fs.Float64Var(&f.minLR, "min-lr", 0, "learning rate at the end of the cosine decay")
	fs.IntVar(&f.warmup, "warmup", 0, "linear warm-up steps")
	fs.IntVar(&f.decaySteps, "decay-steps", 0, "step at which the cosine decay reaches --min-lr (0: constant)")
	fs.Float64Var(&f.weightDecay, "weight-decay", 0, "AdamW weight decay (matrices only)")
	fs.Float64Var(&f.clip, "grad-clip", 1, "maximum global gradient norm (negative: no clipping)")
	return f
}

// train returns the trainer configuration the flags describe (no
// objective: the GRPO flags add it).
func (f *optimizerFlags) train() (gpu.TrainConfig, error) {
	if f.microBatch < 1 || f.maxSeq < 2 {
		return gpu.TrainConfig{}, usagef("--micro-batch ≥ 1 and --max-seq ≥ 2, please")
	}
	return gpu.TrainConfig{
		MaxBatch: f.microBatch, MaxSeq: f.maxSeq, LR: f.lr, MinLR: f.minLR,
		WarmupSteps: f.warmup, DecaySteps: f.decaySteps, WeightDecay: f.weightDecay, GradClip: f.clip,
		Checkpoint: f.ckpt,
	}, nil
}

// trainFlags are the learner flags shared by learn and sft.
type trainFlags struct {
	*optimizerFlags
	out, model, device, metricsAddr string
	resume                          bool
	steps, keep                     int
	progressEvery                   time.Duration
}

func addTrainFlags(fs *flag.FlagSet, defLR float64, lrWhy string) *trainFlags {
	f := &trainFlags{}
	section(fs, "Model and trainer")
	defer endSection(fs)
	fs.StringVar(&f.out, "out", "swerl-out", "output root: checkpoints/ and index.parquet (learn: may be gs:// or s3://, each version is copied there from a local temporary store)")
	fs.StringVar(&f.model, "model", "", "model directory to start from (swerl model init writes one); published as version 0")
	fs.BoolVar(&f.resume, "resume", false, "continue from the newest checkpoint in --out whose hashes verify")
	addDeviceFlag(fs, &f.device)
	fs.IntVar(&f.steps, "steps", 0, "stop after this many optimizer steps (0: until the input ends)")
	f.optimizerFlags = addOptimizerFlags(fs, defLR, lrWhy)
	section(fs, "Model and trainer")
	addKeepFlag(fs, &f.keep, 0, "")
	addMetricsFlag(fs, &f.metricsAddr, "127.0.0.1:0", "")
	addProgressFlag(fs, &f.progressEvery)
	return f
}

func (f *trainFlags) config(stderr io.Writer) (learner.Config, func(), error) {
	be, err := openBackend(f.device)
	if err != nil {
		return learner.Config{}, nil, usagef("%v", err)
	}
	if f.model == "" && !f.resume {
		return learner.Config{}, nil, usagef("want --model DIR (or --resume)")
	}
	if f.steps < 0 || f.keep < 0 {
		return learner.Config{}, nil, usagef("--steps ≥ 0 and --keep-checkpoints ≥ 0, please")
	}
	train, err := f.train()
	if err != nil {
		return learner.Config{}, nil, err
	}
	srv, err := metrics.Serve(f.metricsAddr)
	if err != nil {
		return learner.Config{}, nil, err
	}
	stop := func() {}
	if srv != nil {
		fmt.Fprintf(stderr, "metrics on http://%s/metrics\n", srv.Addr)
		stop = func() { srv.Close() }
	}
	return learner.Config{
		Out: f.out, Model: f.model, Resume: f.resume, Backend: be, KeepCheckpoints: f.keep,
		Train:    train,
		Log:      slog.New(slog.NewTextHandler(stderr, nil)),
		Progress: stderr, ProgressEvery: f.progressEvery,
	}, stop, nil
}

// loraFlags are the LoRA flags of learn and run.
type loraFlags struct {
	rank    int
	alpha   float64
	targets string
}

func addLoRAFlags(fs *flag.FlagSet) *loraFlags {
	f := &loraFlags{}
	section(fs, "LoRA")
	defer endSection(fs)
	fs.IntVar(&f.rank, "lora-rank", 0, "train LoRA adapters of this rank on the frozen model and publish PEFT adapter versions (0: full fine-tuning)")
	fs.Float64Var(&f.alpha, "lora-alpha", gpu.DefaultLoRAAlpha, "LoRA alpha: the adapters are scaled by alpha/rank")
	fs.StringVar(&f.targets, "lora-targets", "q,k,v,o,gate,up,down", "modules that get adapters (q, k, v, o, gate, up, down)")
	return f
}

// config returns the LoRA configuration (Rank 0 when off), A drawn from seed.
func (f *loraFlags) config(seed uint64) (gpu.LoRAConfig, error) {
	if f.rank == 0 {
		return gpu.LoRAConfig{}, nil
	}
	if f.rank < 0 || !(f.alpha > 0) {
		return gpu.LoRAConfig{}, usagef("want --lora-rank ≥ 0 and --lora-alpha > 0")
	}
	ts, err := gpu.ParseLoRATargets(f.targets)
	if err != nil {
		return gpu.LoRAConfig{}, usagef("--lora-targets: %v", err)
	}
	c := gpu.LoRAConfig{Rank: f.rank, Alpha: f.alpha, Targets: ts, Seed: seed}
	if err := c.Validate(); err != nil {
		return gpu.LoRAConfig{}, usagef("%v", err)
	}
	return c, nil
}

func runLearn(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseLearnFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, stop, err := o.learnerConfig(stderr)
	if err != nil {
		return err
	}
	defer stop()
	syncer, err := o.syncer(cfg.Log)
	if err != nil {
		return err
	}
	pc := weightsync.PublisherConfig{Syncer: syncer, Out: cfg.Out, LoRA: cfg.LoRA.Rank > 0, Log: cfg.Log}
	if o.samples != "" {
		src, err := learner.ParquetSource(o.samples)
		if err != nil {
			return err
		}
		pub, err := weightsync.NewPublisher(ctx, pc)
		if err != nil {
			return err
		}
		defer pub.Close()
		l, done, err := openLearner(ctx, &cfg, pub)
		if err != nil {
			return err
		}
		defer done()
		_, err = l.Run(ctx, src, o.tf.steps)
		return learnEnd(ctx, err, l, pub, stderr)
	}
	kcfg, done, err := o.kf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer done()
	kc := learner.KafkaConfig{Kafka: kcfg, Group: o.group, Log: cfg.Log}
	ann, err := learner.NewAnnouncer(kc)
	if err != nil {
		return err
	}
	defer ann.Close()
	pc.Announce = ann.Announce
	pub, err := weightsync.NewPublisher(ctx, pc)
	if err != nil {
		return err
	}
	defer pub.Close() // before ann.Close: no push announces on a closed writer
	l, bdone, err := openLearner(ctx, &cfg, pub)
	if err != nil {
		return err
	}
	defer bdone()
	src, err := learner.NewKafkaSource(kc, l.Offsets())
	if err != nil {
		return err
	}
	defer src.Close()
	fmt.Fprintf(stderr, "swerl learn: consuming %s as group %s from v%d\n", kcfg.Topic(kafkaio.Samples), kc.Group, l.Version())
	_, err = l.Run(ctx, src, o.tf.steps)
	return learnEnd(ctx, err, l, pub, stderr)
}

// learnOptions are swerl learn's flags.
type learnOptions struct {
	tf                              *trainFlags
	kf                              *kafkaFlags
	gf                              *grpoFlags
	lf                              *loraFlags
	samples, group                  string
	batchGroups, staleness          int
	temp                            float64
	engines, engineKind, enginePath string
	engineRetries                   int
	engineTimeout                   time.Duration
}

func parseLearnFlags(args []string, stderr io.Writer) (*learnOptions, error) {
	o := &learnOptions{}
	fs := newFlags("learn", "--model DIR|--resume --samples DIR|FILE.parquet|--brokers HOST:PORT,… [--out DIR] [flags]", stderr)
	o.tf = addTrainFlags(fs, 1e-6, "")
	fs.StringVar(&o.samples, "samples", "", "read scored samples from this Parquet file or directory, or a JSONL file (*.jsonl: the schema's JSON form, as swerl cat prints it) (offline)")
	// The Kafka flags of every subcommand; here --brokers is required for
	// the online mode (no embedded broker: nothing would feed it samples).
	o.kf = addKafkaFlags(fs)
	fs.StringVar(&o.group, "group", "swerl-learner", "Kafka consumer group")
	fs.IntVar(&o.batchGroups, "batch-groups", learner.DefaultBatchGroups, "whole groups per optimizer step")
	fs.IntVar(&o.staleness, "max-staleness", 4, "drop samples more than this many versions behind (-1: keep all, e.g. offline replay)")
	o.gf = addGRPOFlags(fs, learnGRPO)
	fs.Float64Var(&o.temp, "temperature", 0, "the rollouts' sampling temperature: the trainer's log-probs are of softmax(logits/T), the distribution sampled from; an engine's raw log-probs (vLLM's default, swerl serve) are converted, processed ones (policy ?logprobs=processed) used as they are; 0: each step takes the temperature its samples record (1 when they record none); samples recorded at another temperature are skipped")
	o.lf = addLoRAFlags(fs)
	section(fs, "Engines (weight sync)")
	fs.StringVar(&o.engines, "engine", "", "after each published version, make these inference servers load it, in the background (URL[,URL…], e.g. http://h:8000/v1; sinks/weightsync): adapters of a LoRA run, full weights through SGLang's update_weights_from_disk; training never waits for a push, and versions superseded while one is in flight are skipped")
	fs.StringVar(&o.engineKind, "engine-kind", "vllm", "the API the --engine servers speak: vllm or sglang (swerl serve speaks both)")
	fs.StringVar(&o.enginePath, "engine-path-map", "", "FROM=TO: the engines read --out's files under another prefix (FROM is --out's prefix here, TO the engines' mount or object-store prefix)")
	fs.IntVar(&o.engineRetries, "engine-retries", weightsync.DefaultAttempts-1, "retries of a refused or unanswered engine request, with exponential backoff from 1s; then the version is reported and the engine keeps the one it holds")
	addEngineTimeoutFlag(fs, &o.engineTimeout)
	endSection(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments %q", fs.Args())
	}
	if (o.samples == "") == (o.kf.brokers == "") {
		return nil, usagef("want one of --samples DIR|FILE.parquet and --brokers HOST:PORT,…")
	}
	if o.batchGroups < 1 {
		return nil, usagef("--batch-groups %d, want ≥ 1", o.batchGroups)
	}
	return o, nil
}

// learnerConfig is the learner the flags describe; stop ends its metrics
// server.
func (o *learnOptions) learnerConfig(stderr io.Writer) (learner.Config, func(), error) {
	cfg, stop, err := o.tf.config(stderr)
	if err != nil {
		return cfg, nil, err
	}
	fail := func(err error) (learner.Config, func(), error) {
		stop()
		return cfg, nil, err
	}
	cfg.BatchGroups, cfg.MaxStaleness, cfg.MaskTruncated = o.batchGroups, o.staleness, o.gf.maskTruncated
	if cfg.LoRA, err = o.lf.config(1); err != nil {
		return fail(err)
	}
	if cfg.Train.GRPO, err = o.gf.params(true); err != nil {
		return fail(err)
	}
	if o.temp < 0 {
		return fail(usagef("--temperature %v, want ≥ 0", o.temp))
	}
	cfg.Temperature = o.temp
	cfg.TiedHeadTensor = o.engines != ""
	if err := cfg.Train.Validate(); err != nil {
		return fail(usagef("%v", err))
	}
	return cfg, stop, nil
}

// syncer is the weight sync the --engine flags describe, nil without
// --engine.
func (o *learnOptions) syncer(log *slog.Logger) (*weightsync.Syncer, error) {
	if o.engines == "" {
		if o.enginePath != "" {
			return nil, usagef("--engine-path-map without --engine")
		}
		return nil, nil
	}
	es, err := weightsync.ParseEngines(o.engines, engineapi.Kind(o.engineKind))
	if err != nil {
		return nil, usagef("--engine: %v", err)
	}
	if o.engineRetries < 0 {
		return nil, usagef("--engine-retries %d, want ≥ 0", o.engineRetries)
	}
	if o.engineTimeout <= 0 {
		return nil, usagef("--engine-timeout %s, want > 0", o.engineTimeout)
	}
	s, err := weightsync.New(weightsync.Config{Engines: es, PathMap: o.enginePath, APIKey: engineapi.APIKey(), Attempts: o.engineRetries + 1, Timeout: o.engineTimeout, Log: log})
	if err != nil {
		return nil, usagef("--engine-path-map: %v", err)
	}
	return s, nil
}

// openLearner opens the learner with pub publishing each version (its
// announcement and engine push), the start version pushed too. done
// closes the learner (a bucket --out: its local store).
func openLearner(ctx context.Context, cfg *learner.Config, pub *weightsync.Publisher) (*learner.Learner, func(), error) {
	cfg.Announce = pub.Publish
	l, err := learner.New(ctx, *cfg)
	if err != nil {
		return nil, nil, err
	}
	pub.Start(l.Version())
	return l, func() { l.Close() }, nil
}

// learnEnd ends a learn run whose Run returned err. An interrupt is a
// clean stop: every version trained was published, --resume goes on from
// the newest, and the push in flight is cancelled (the engines keep what
// they confirmed). Otherwise the last versions are pushed before exiting
// (within --engine-timeout and --engine-retries each), so the engines
// hold the final one.
func learnEnd(ctx context.Context, err error, l *learner.Learner, pub *weightsync.Publisher, stderr io.Writer) error {
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		fmt.Fprintf(stderr, "swerl learn: interrupted at v%d; everything trained is published, continue with --resume\n", l.Version())
		return nil
	}
	if err != nil || !pub.Pushing() {
		return err
	}
	if werr := pub.Wait(ctx); werr != nil && ctx.Err() != nil {
		fmt.Fprintf(stderr, "swerl learn: interrupted while pushing v%d to the engines; everything trained is published\n", l.Version())
	}
	return nil
}

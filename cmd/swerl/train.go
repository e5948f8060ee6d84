package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"swerl/pipelines/train"
	"swerl/sinks/files"
	"swerl/sinks/weightsync"
	"swerl/transforms/advantage"
	"swerl/transforms/scoring"
)

func init() {
	register(&command{name: "train", summary: "streaming train pipeline: instances → rollouts → reward → advantage → samples (Kafka and Parquet)", run: runTrain})
}

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("train", "--policy SPEC [--instances FILE] [--out DIR] [flags]", stderr)
	instances := fs.String("instances", "", "read instances from this JSONL or Parquet file, local or gs:// / s3:// (default: the instances topic); with no --brokers the file is fed through the embedded broker")
	policy := fs.String("policy", "", "policy: file:COMPLETIONS.jsonl, http://host:port/v1 (OpenAI-compatible; several engines: http://a/v1,http://b/v1), or model:DIR (required)")
	groupSize := new(int)
	addGroupSizeFlag(fs, groupSize)
	adv := new(string)
	addAdvantageFlag(fs, adv)
	dropZero := fs.Bool("drop-zero-variance", false, "drop groups whose rewards are all equal (they are counted either way)")
	groupTimeout := fs.Duration("group-timeout", train.DefaultGroupTimeout, "finish a group still incomplete this long after its instance (event time)")
	incomplete := fs.String("incomplete", "emit", "incomplete groups: emit (advantages over the members present) or drop")
	groupPrefix := fs.String("group-prefix", "", "prefix of every group id (e.g. round3/ to train on the same instances file again into the same --out)")
	out := fs.String("out", train.DefaultOut, "output root: samples/, deadletter/ (Parquet) and positions/ (not with --group); may be gs:// or s3:// when the instances come from --instances or with --group")
	temperature := fs.Float64("temperature", 1.0, "sampling temperature passed to the policy")
	maxTokens := fs.Int("max-tokens", 0, "most completion tokens (0: the policy's default)")
	seed := fs.Int64("seed", 0, "sampling seed passed to the policy (0: none)")
	concurrency := fs.Int("concurrency", train.DefaultConcurrency, "policy requests in flight at once")
	rewardTimeout := new(time.Duration)
	addRewardTimeoutFlag(fs, rewardTimeout)
	promptOpts := addPromptFlags(fs, 0, "")
	verbose := fs.Bool("v", false, "also log the Beam runner's own progress")
	follow := fs.Bool("follow", false, "keep reading the instances topic (unbounded streaming) until interrupted; default: stop when it is drained to the end offsets seen at start. An http(s) policy then follows the LoRA adapters its engines list (follow=true) and those the weights topic announces each engine holds, the newer of the two")
	group := fs.String("group", "", "Kafka consumer group; swerl train's default \"\" reads every partition of the instances topic itself, keeping its positions under --out, while a NAME (with --follow) joins the rollout workers' group NAME on that topic, so workers can be added and removed while they run: this one reads only the partitions the group assigns it, each from the group's committed offset, and commits an offset once the samples of every record below it are written; a worker that leaves or dies hands its partitions to the others, which read again only what it had in flight (the same sample ids: readers de-duplicate)")
	groupSession := fs.Duration("group-session-timeout", 10*time.Second, "with --group: how long the group waits for a silent worker (killed, hung) before giving its partitions to the others (brokers refuse less than their group.min.session.timeout.ms, 6s by default)")
	metricsAddr := new(string)
	addMetricsFlag(fs, metricsAddr, "127.0.0.1:0", "")
	every := new(time.Duration)
	addProgressFlag(fs, every)
	kf := addKafkaFlags(fs)
	addBeamFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *policy == "" {
		return usagef("want --policy (file:C.jsonl, http://host:port/v1 or model:DIR)")
	}
	*instances, *out, *policy = absPath(*instances), absPath(*out), policyFromEnv(absPolicy(*policy)) // workers may run elsewhere
	if *follow {
		// A worker that keeps reading follows the adapters a learner in
		// another process loads on its engines.
		*policy = weightsync.WithDefault(*policy, "follow", "true")
	}
	method, err := advantage.ParseMethod(*adv)
	if err != nil {
		return usagef("--advantage: %v", err)
	}
	inc, err := train.ParseIncomplete(*incomplete)
	if err != nil {
		return usagef("--incomplete: %v", err)
	}
	if *groupSize < 1 || *concurrency < 1 || *groupTimeout <= 0 || *rewardTimeout <= 0 {
		return usagef("--group-size and --concurrency ≥ 1, and positive timeouts, please")
	}
	if *follow && *instances != "" {
		return usagef("--follow reads the instances topic; it does not go with --instances")
	}
	if *group != "" && !*follow {
		return usagef("--group joins a consumer group that reads the instances topic as workers come and go: it goes with --follow")
	}
	if *groupSession < 0 {
		return usagef("--group-session-timeout must be positive")
	}
	embedded := kf.brokers == ""
	kc, stop, err := kf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer stop()
	beamInit()
	quietRunner(ctx, stderr, *verbose)
	cfg := train.Config{
		// Fed instances are read back from the topic, whose positions are
		// local files under --out: an object-store --out reads the file.
		Kafka: kc, Instances: *instances, FeedInstances: *instances != "" && embedded && !files.IsRemote(*out),
		Policy: *policy, Method: method, DropZeroVariance: *dropZero,
		GroupTimeout: *groupTimeout, Incomplete: inc, GroupPrefix: *groupPrefix, Out: *out, Concurrency: *concurrency,
		RewardTimeout: *rewardTimeout, Bounded: !*follow, MetricsAddr: *metricsAddr,
		ConsumerGroup: *group, ConsumerSessionTimeout: *groupSession,
		// A worker that keeps reading also follows the adapters a learner
		// in another process announces on the weights topic for each
		// engine, so it follows engines that do not list them too.
		FollowAnnouncements: *follow && strings.HasPrefix(*policy, "http"),
		Progress:            stderr, ProgressEvery: *every,
		Spec: scoring.Spec{GroupSize: *groupSize, Prompt: promptOpts(), Temperature: *temperature, MaxTokens: *maxTokens, Seed: *seed},
	}
	_, err = train.Run(ctx, cfg)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Interrupted (SIGINT, SIGTERM): a clean stop, as for learn and
		// run; the summary above says what was written.
		fmt.Fprintln(stderr, "swerl train: interrupted; the samples written so far are kept")
		return nil
	}
	return err
}

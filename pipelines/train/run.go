package train

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"

	"swerl/pipelines/beamrun"
	"swerl/sinks/files"
	"swerl/sinks/kafkaio"
	"swerl/sinks/metrics"
	"swerl/sinks/weightsync"
	"swerl/transforms/rollout"
)

// Run builds the train pipeline for cfg and runs it until the input is
// drained (bounded input) or ctx is cancelled. It returns the run's counts.
// The policy is opened once here and shared by the run's DoFns when they
// run in this process.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	start := time.Now()
	if err := cfg.defaults(); err != nil {
		return Summary{}, err
	}
	table := cfg.Table
	if cfg.FollowAnnouncements {
		if table == nil {
			table = weightsync.NewTable()
		}
		stop := followAnnouncements(ctx, cfg.Kafka, table, slog.New(slog.NewTextHandler(cfg.Progress, nil)))
		defer stop()
	}
	pol, err := rollout.Open(cfg.Policy, rollout.WithTable(table))
	if err != nil {
		return Summary{}, fmt.Errorf("train: %w", err)
	}
	defer pol.Close()
	srv, err := metrics.Serve(cfg.MetricsAddr)
	if err != nil {
		return Summary{}, err
	}
	defer srv.Close()
	if srv != nil {
		fmt.Fprintf(cfg.Progress, "train: metrics on http://%s/metrics\n", srv.Addr)
	}

	if !beam.Initialized() {
		beam.Init()
	}
	id := newRunID()
	defer runs.Register(id, &stats{policy: pol})()

	var member *kafkaio.GroupMember
	if cfg.ConsumerGroup != "" {
		if member, err = joinGroup(cfg); err != nil {
			return Summary{}, err
		}
		defer func() {
			// Leaving hands the partitions to the other workers at once.
			member.Close()
			gs := member.Stats()
			fmt.Fprintf(cfg.Progress, "train: left group %s: %d generations, %d commits, %d records acknowledged while draining, %d left in flight\n",
				cfg.ConsumerGroup, gs.Generations, gs.Commits, gs.Drained, gs.Abandoned)
		}()
		// Before the source is made: it reads as the member.
		cfg.consumer = member.Handle()
	}
	var src source
	var fed FeedSummary
	useKafka := len(cfg.Kafka.Brokers) > 0
	switch {
	case cfg.FeedInstances:
		fs, err := Feed(ctx, cfg.Kafka, cfg.Instances, files.Join(cfg.Out, "deadletter"))
		if err != nil {
			return Summary{}, err
		}
		fed = fs
		fmt.Fprintf(cfg.Progress, "train: fed %d instances from %s to %s (%d dead-letters)\n", fs.Produced, cfg.Instances, cfg.Kafka.Topic(kafkaio.Instances), fs.DeadLetters)
		src = kafkaSource(cfg)
	case cfg.Instances != "":
		src = fileSource(cfg.Instances)
	default:
		src = kafkaSource(cfg)
	}
	// After Feed, which counts its dead-letters outside the pipeline.
	since := counts.Mark()
	p, err := build(id, cfg, src, useKafka, cfg.FeedInstances || cfg.Instances == "")
	if err != nil {
		return Summary{}, err
	}
	done := make(chan struct{})
	var lagFn func() (int64, error)
	switch {
	case member != nil:
		lagFn = func() (int64, error) { return member.Stats().Lag, nil }
	case cfg.FeedInstances || cfg.Instances == "":
		lagFn = func() (int64, error) {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return lag(lctx, cfg.Kafka, cfg.Kafka.Topic(kafkaio.Instances), positionsDir(cfg))
		}
	}
	stopped := make(chan struct{})
	go func() {
		progress(cfg, since, start, done, lagFn)
		close(stopped)
	}()
	res, err := beamrun.Run(ctx, cfg.Runner, p)
	close(done)
	<-stopped // its last line is out before the summary
	sum, fromRunner := summarize(res, since)
	// Feed ran before the pipeline, in this process: its records are not
	// in the pipeline's counts.
	sum.Fed = fed.Produced
	sum.Records += fed.DeadLetters
	sum.DeadLetters += fed.DeadLetters
	sum.ElapsedSeconds = time.Since(start).Seconds()
	fmt.Fprintln(cfg.Progress, sum)
	if !fromRunner {
		fmt.Fprintln(cfg.Progress, "train: the runner reported no counts; the summary counts the work done in this process only")
	}
	if err != nil {
		if ctx.Err() != nil {
			return sum, fmt.Errorf("train: stopped: %w", ctx.Err())
		}
		// The write that failed (a full disk) in one line, not the
		// runner's plan dump around it.
		return sum, fmt.Errorf("train: pipeline: %s", beamrun.RootCause(err, "train: ", "kafkaio: ", "parquetio: ", "files: "))
	}
	return sum, nil
}

// build constructs the pipeline graph of one run.
// useKafka writes samples and dead-letters to Kafka; ack acknowledges the
// positions of Kafka input once its outputs are durable.
func build(id string, cfg Config, src source, useKafka, ack bool) (p *beam.Pipeline, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("train: building the pipeline: %v", r)
		}
	}()
	p, s := beam.NewPipelineWithRoot()
	records := src(s)
	instances, dead1 := beam.ParDo2(s.Scope("Decode"), &decodeFn{RunID: id}, records)
	roll := &rolloutFn{RunID: id, Policy: cfg.Policy, Spec: cfg.Spec, GroupPrefix: cfg.GroupPrefix, Concurrency: cfg.Concurrency}
	if cfg.FollowAnnouncements {
		roll.Weights = cfg.Kafka
	}
	members, dead2 := beam.ParDo2(s.Scope("Rollout"), roll, instances)
	whole, partial, dead3 := beam.ParDo3(s.Scope("Reward"), &rewardFn{RunID: id, Timeout: cfg.RewardTimeout, GroupSize: cfg.GroupSize}, members)
	// Groups that arrive whole (all of them, with the built-in rollout
	// stage) get their advantages in the stage that scored them; only split
	// groups cross the data plane to the stateful merge. Each path has its
	// own sink: a Flatten of outputs of one fused stage hangs Prism v2.77.
	samples, dropped := beam.ParDo2(s.Scope("Advantage"), &wholeGroupFn{RunID: id, GroupSize: cfg.GroupSize,
		Method: string(cfg.Method), DropZeroVariance: cfg.DropZeroVariance, DropIncomplete: cfg.Incomplete == IncompleteDrop}, whole)
	sinkSamples(s.Scope("Whole"), id, cfg, useKafka, ack, samples, dropped)
	group := &groupFn{RunID: id, GroupSize: cfg.GroupSize, Method: string(cfg.Method),
		DropZeroVariance: cfg.DropZeroVariance, DropIncomplete: cfg.Incomplete == IncompleteDrop,
		TimeoutMS: cfg.GroupTimeout.Milliseconds(),
		Members:   state.MakeBagState[[]byte]("members"), Arrived: state.MakeValueState[int64]("arrived"),
		Timeout: timers.InEventTime("timeout")}
	merged, mergedDropped := beam.ParDo2(s.Scope("GroupAdvantage"), group, partial)
	sinkSamples(s.Scope("Merged"), id, cfg, useKafka, ack, merged, mergedDropped)
	// One dead-letter sink per stage: a Flatten of outputs of one fused
	// stage hangs Prism v2.77. Decode, prompt and rollout dead-letters are
	// the end of their record, so they acknowledge it; a reward
	// dead-letter's record is acknowledged by its group.
	for i, d := range []beam.PCollection{dead1, dead2, dead3} {
		sd := s.Scope(fmt.Sprintf("DeadLetters%d", i+1))
		out := beam.ParDo(sd, &deadSinkFn{RunID: id, Dir: files.Join(cfg.Out, "deadletter"), AckInput: ack && i < 2}, d)
		if useKafka {
			acked := kafkaio.WriteAcked(sd, kafkaio.WriteConfig{Config: cfg.Kafka, Topic: cfg.Kafka.Topic(kafkaio.DeadLetter)}, out)
			if ack && i < 2 {
				ackOrigins(sd, cfg, acked)
			}
		}
	}
	return p, nil
}

// sinkSamples writes samples (keyed by their input's origin) to Parquet and,
// with Kafka, to the samples topic, then acknowledges their origins and
// those of dropped groups.
func sinkSamples(s beam.Scope, id string, cfg Config, useKafka, ack bool, samples, dropped beam.PCollection) {
	dir := cfg.SamplesDir
	if dir == "" {
		dir = files.Join(cfg.Out, "samples")
	}
	written := beam.ParDo(s.Scope("WriteSamples"), &sampleSinkFn{RunID: id, Dir: dir,
		RowsPerFile: cfg.RowsPerFile, AckInput: ack}, samples)
	if !useKafka {
		return
	}
	acked := kafkaio.WriteAcked(s.Scope("SamplesToKafka"), kafkaio.WriteConfig{Config: cfg.Kafka, Topic: cfg.Kafka.Topic(kafkaio.Samples)}, written)
	if ack {
		ackOrigins(s, cfg, acked)
		ackPositions(s.Scope("AckDropped"), cfg, beam.ParDo(s, originPosition, dropped))
	}
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// progress prints a line every cfg.ProgressEvery until done.
// With Kafka input it also updates the consumer-lag gauge.
// The counts are those of this process (metrics.Baseline): a runner whose
// workers run elsewhere shows them only in the end summary.
func progress(cfg Config, since metrics.Baseline, start time.Time, done <-chan struct{}, lagFn func() (int64, error)) {
	t := time.NewTicker(cfg.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s, _ := summarize(nil, since)
			el := time.Since(start).Seconds()
			lagText := ""
			if lagFn != nil {
				if n, err := lagFn(); err == nil {
					mLag.Set(float64(n))
					lagText = fmt.Sprintf(", lag %d", n)
				}
			}
			fmt.Fprintf(cfg.Progress, "train: %.0fs: %d records, %d rollouts, %d samples (%.1f/s), %d dead-letters%s\n",
				el, s.Records, s.Rollouts, s.Samples, float64(s.Samples)/el, s.DeadLetters, lagText)
		}
	}
}

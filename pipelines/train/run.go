package train

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"swerl/sinks/metrics"
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
	var src source
	switch {
	case cfg.Instances != "":
		src = fileSource(cfg.Instances)
	default:
		return Summary{}, fmt.Errorf("train: no input: want Instances (a JSONL or Parquet file)")
	}
	pol, err := rollout.Open(cfg.Policy)
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
	st := runStats(id)
	st.policy = pol
	defer func() {
		dropRun(id)
		runsMu.Lock()
		delete(semaphores.m, id)
		runsMu.Unlock()
	}()

	p, err := build(id, cfg, src)
	if err != nil {
		return Summary{}, err
	}
	done := make(chan struct{})
	go progress(cfg, st, start, done)
	err = runPipeline(ctx, cfg.Runner, p)
	close(done)
	sum := st.summary()
	sum.ElapsedSeconds = time.Since(start).Seconds()
	fmt.Fprintln(cfg.Progress, sum)
	if err != nil {
		if ctx.Err() != nil {
			return sum, fmt.Errorf("train: stopped: %w", ctx.Err())
		}
		return sum, fmt.Errorf("train: pipeline: %w", err)
	}
	return sum, nil
}

func runPipeline(ctx context.Context, runner string, p *beam.Pipeline) error {
	if runner != "" {
		_, err := beam.Run(ctx, runner, p)
		return err
	}
	return beamx.Run(ctx, p)
}

// build constructs the pipeline graph of one run.
func build(id string, cfg Config, src source) (p *beam.Pipeline, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("train: building the pipeline: %v", r)
		}
	}()
	p, s := beam.NewPipelineWithRoot()
	records := src(s)
	instances, dead1 := beam.ParDo2(s.Scope("Decode"), &decodeFn{RunID: id}, records)
	members, dead2 := beam.ParDo2(s.Scope("Rollout"), &rolloutFn{RunID: id, Policy: cfg.Policy, GroupSize: cfg.GroupSize,
		GroupPrefix: cfg.GroupPrefix, Prompt: cfg.Prompt, Temperature: cfg.Temperature, MaxTokens: cfg.MaxTokens,
		Seed: cfg.Seed, Concurrency: cfg.Concurrency}, instances)
	scored, dead3 := beam.ParDo2(s.Scope("Reward"), &rewardFn{RunID: id, Timeout: cfg.RewardTimeout}, members)
	samples := beam.ParDo(s.Scope("GroupAdvantage"), &groupFn{RunID: id, GroupSize: cfg.GroupSize, Method: string(cfg.Method),
		DropZeroVariance: cfg.DropZeroVariance, DropIncomplete: cfg.Incomplete == IncompleteDrop,
		TimeoutMS: cfg.GroupTimeout.Milliseconds(),
		Members:   state.MakeBagState[[]byte]("members"), Arrived: state.MakeValueState[int64]("arrived"),
		Timeout: timers.InEventTime("timeout")}, scored)
	beam.ParDo0(s.Scope("WriteSamples"), &sampleSinkFn{RunID: id, Dir: filepath.Join(cfg.Out, "samples"), RowsPerFile: cfg.RowsPerFile}, samples)
	// One dead-letter sink per stage: a Flatten of outputs of one fused
	// stage hangs Prism v2.77.
	for i, d := range []beam.PCollection{dead1, dead2, dead3} {
		beam.ParDo0(s.Scope(fmt.Sprintf("WriteDeadLetters%d", i+1)), &deadSinkFn{RunID: id, Dir: filepath.Join(cfg.Out, "deadletter")}, d)
	}
	return p, nil
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// progress prints a line every cfg.ProgressEvery until done.
func progress(cfg Config, st *stats, start time.Time, done <-chan struct{}) {
	t := time.NewTicker(cfg.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s := st.summary()
			el := time.Since(start).Seconds()
			fmt.Fprintf(cfg.Progress, "train: %.0fs: %d records, %d rollouts, %d samples (%.1f/s), %d dead-letters\n",
				el, s.Records, s.Rollouts, s.Samples, float64(s.Samples)/el, s.DeadLetters)
		}
	}
}

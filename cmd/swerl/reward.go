package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"swerl/sinks/parquetio"
	"swerl/transforms/reward"
)

func init() {
	register(&command{name: "reward", summary: "score answers offline with the exact SWE-RL reward (JSONL or Parquet)", run: runReward})
}

func runReward(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseRewardFlags(args, stderr)
	if err != nil {
		return err
	}
	sink, err := openScoredSink(o.out, stdout)
	if err != nil {
		return err
	}
	defer sink.close()
	read := func(emit func(int64, reward.Record, error) error) error { return readRewardRecords(ctx, o.in, emit) }
	jobs, wait := reward.ScoreInOrder(ctx, read, o.workers, o.timeout)
	t, writeErr := writeScored(ctx, jobs, sink, o.progressEvery, stderr)
	if err := wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := ctx.Err(); err != nil {
		sink.flush()
		return err
	}
	if writeErr != nil {
		return writeErr
	}
	if err := sink.finish(); err != nil {
		return err
	}
	t.report(stderr)
	return nil
}

// rewardOptions are swerl reward's flags.
type rewardOptions struct {
	in, out       string
	workers       int
	timeout       time.Duration
	progressEvery time.Duration
}

func parseRewardFlags(args []string, stderr io.Writer) (rewardOptions, error) {
	var o rewardOptions
	fs := newFlags("reward", "--in FILE|- --out FILE|- [flags]", stderr)
	fs.StringVar(&o.in, "in", "-", "records to score: JSONL, or Parquet by the .parquet extension (- for stdin, JSONL)")
	fs.StringVar(&o.out, "out", "-", "results: JSONL, or Parquet by the .parquet extension (- for stdout, JSONL)")
	fs.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "records scored at once (output order is kept)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "cap on one record's similarity computation; a record over it scores −1 with an error (0: none)")
	addProgressFlag(fs, &o.progressEvery)
	if err := parseFlags(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, usagef("unexpected arguments %q", fs.Args())
	}
	if o.workers < 1 {
		return o, usagef("--workers %d, want ≥ 1", o.workers)
	}
	if o.timeout < 0 {
		return o, usagef("--timeout %v, want ≥ 0", o.timeout)
	}
	return o, nil
}

// scoredSink writes scored records: JSONL as they come (a file or stdout),
// or Parquet (.parquet) at the end.
type scoredSink struct {
	parquet string // the Parquet file; "" for JSONL
	rows    []reward.Scored
	w       *bufio.Writer
	enc     *json.Encoder
	file    *os.File
}

func openScoredSink(out string, stdout io.Writer) (*scoredSink, error) {
	if strings.HasSuffix(out, ".parquet") {
		return &scoredSink{parquet: out}, nil
	}
	s := &scoredSink{}
	dst := stdout
	if out != "-" {
		f, err := os.Create(out)
		if err != nil {
			return nil, err
		}
		s.file, dst = f, f
	}
	s.w = bufio.NewWriterSize(dst, 1<<16)
	s.enc = json.NewEncoder(s.w)
	s.enc.SetEscapeHTML(false)
	return s, nil
}

func (s *scoredSink) write(r *reward.Scored) error {
	if s.parquet != "" {
		s.rows = append(s.rows, *r)
		return nil
	}
	return s.enc.Encode(r)
}

// flush writes out what JSONL is buffered (an interrupted run keeps the
// lines it scored).
func (s *scoredSink) flush() {
	if s.w != nil {
		s.w.Flush()
	}
}

// finish completes the output: the Parquet file, or the JSONL's last
// buffered lines.
func (s *scoredSink) finish() error {
	if s.parquet != "" {
		return parquetio.WriteFile(s.parquet, s.rows)
	}
	return s.w.Flush()
}

func (s *scoredSink) close() {
	if s.file != nil {
		s.file.Close()
	}
}

// rewardTally counts what swerl reward scored.
type rewardTally struct {
	n, bad, formatErrs int64
	sum                float64
	start              time.Time
}

// writeScored writes each job's result as it is done, in input order,
// with a progress line every progressEvery, until the jobs end or ctx is
// done. After a write error it counts on without writing.
func writeScored(ctx context.Context, jobs <-chan *reward.Pending, sink *scoredSink, progressEvery time.Duration, stderr io.Writer) (rewardTally, error) {
	t := rewardTally{start: time.Now()}
	lastProgress := t.start
	var writeErr error
	for j := range jobs {
		if !j.Wait(ctx) {
			break
		}
		out := j.Scored()
		t.n++
		switch {
		case j.Invalid():
			t.bad++
		case out.Error != "":
			t.formatErrs++
		}
		if !j.Invalid() {
			t.sum += out.Reward
		}
		if writeErr == nil {
			writeErr = sink.write(out)
		}
		if progressEvery > 0 && time.Since(lastProgress) >= progressEvery {
			lastProgress = time.Now()
			fmt.Fprintf(stderr, "swerl reward: %d records, %.0f/s\n", t.n, float64(t.n)/time.Since(t.start).Seconds())
		}
	}
	return t, writeErr
}

func (t rewardTally) report(stderr io.Writer) {
	mean := 0.0
	if scored := t.n - t.bad; scored > 0 {
		mean = t.sum / float64(scored)
	}
	el := time.Since(t.start)
	fmt.Fprintf(stderr, "swerl reward: %d records in %v (%.0f/s): mean reward %.4f, %d scored −1 with an error, %d malformed input lines\n",
		t.n, el.Round(time.Millisecond), float64(t.n)/el.Seconds(), mean, t.formatErrs, t.bad)
}

func readRewardRecords(ctx context.Context, path string, fn func(line int64, rec reward.Record, err error) error) error {
	if strings.HasSuffix(path, ".parquet") {
		var line int64
		return parquetio.Scan(path, func(rows []reward.Record) error {
			for _, r := range rows {
				line++
				if err := fn(line, r, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if path == "-" {
		return reward.ReadRecords(ctx, os.Stdin, "stdin", fn)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return reward.ReadRecords(ctx, f, path, fn)
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"swerl/sinks/parquetio"
	"swerl/transforms/reward"
)

func init() {
	register(&command{name: "reward", summary: "score answers offline with the exact SWE-RL reward (JSONL or Parquet)", run: runReward})
}

// rewardJob is one input record on its way through the scoring workers; the
// writer takes jobs in input order and waits on done.
type rewardJob struct {
	rec  reward.Record
	out  reward.Scored
	bad  bool // the line did not decode: out is already the error record
	done chan struct{}
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
	jobs, wait := scoreInOrder(ctx, o.in, o.workers, o.timeout)
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

// scoreInOrder reads the records of path and scores them on workers
// goroutines. It returns the jobs in input order (each done when scored;
// a line that did not decode is done at once, as its error record) and a
// function that waits for the reader and the workers and returns the
// reader's error.
func scoreInOrder(ctx context.Context, path string, workers int, timeout time.Duration) (<-chan *rewardJob, func() error) {
	work := make(chan *rewardJob, 4*workers)
	order := make(chan *rewardJob, 64*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				res := reward.Score(ctx, &j.rec, timeout)
				j.out.ID, j.out.Mode = j.rec.ID, j.rec.Mode()
				j.out.Reward, j.out.Error, j.out.Similarities = res.Reward, res.Error, res.Similarities
				close(j.done)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(work)
		readErr <- readRewardRecords(ctx, path, func(line int64, rec reward.Record, err error) error {
			j := &rewardJob{rec: rec, out: reward.Scored{Line: line}, done: make(chan struct{})}
			if err != nil {
				j.bad = true
				j.out.ID, j.out.Mode, j.out.Reward, j.out.Error = rec.ID, "invalid", -1, err.Error()
				close(j.done)
			}
			select {
			case order <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			if !j.bad {
				select {
				case work <- j:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}()
	return order, func() error {
		// Drain so the reader and workers finish.
		for range order {
		}
		wg.Wait()
		return <-readErr
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
func writeScored(ctx context.Context, jobs <-chan *rewardJob, sink *scoredSink, progressEvery time.Duration, stderr io.Writer) (rewardTally, error) {
	t := rewardTally{start: time.Now()}
	lastProgress := t.start
	var writeErr error
	for j := range jobs {
		select {
		case <-j.done:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		t.n++
		switch {
		case j.bad:
			t.bad++
		case j.out.Error != "":
			t.formatErrs++
		}
		if !j.bad {
			t.sum += j.out.Reward
		}
		if writeErr == nil {
			writeErr = sink.write(&j.out)
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
	src := io.Reader(os.Stdin)
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		src, name = f, path
	}
	r := bufio.NewReaderSize(src, 1<<20)
	var long []byte // a line longer than r's buffer, gathered here
	for line := int64(1); ; line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var b []byte
		var err error
		b, long, err = nextLine(r, long)
		if len(bytes.TrimSpace(b)) > 0 {
			rec, derr := decodeRewardRecord(b)
			if derr != nil {
				derr = fmt.Errorf("%s:%d: %v", name, line, derr)
			}
			if ferr := fn(line, rec, derr); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

// nextLine returns the next line of r with its '\n' (none at the end of
// the input). The line is only valid until the next call: it is r's buffer,
// or long (returned for reuse) when it is longer than that buffer, so most
// lines are decoded without being copied. The decoders copy what they keep.
func nextLine(r *bufio.Reader, long []byte) (line, buf []byte, err error) {
	b, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return b, long, err
	}
	long = append(long[:0], b...)
	for errors.Is(err, bufio.ErrBufferFull) {
		b, err = r.ReadSlice('\n')
		long = append(long, b...)
	}
	return long, long, err
}

// rewardWire is a JSONL record with pointer fields, so one decoding tells
// which mode's fields are present.
type rewardWire struct {
	ID               string            `json:"id"`
	CodeContext      map[string]string `json:"code_context"`
	OracleNewContent map[string]string `json:"oracle_new_content"`
	Output           *string           `json:"output"`
	OraclePatches    *[]string         `json:"oracle_patches"`
	PredPatches      *[]string         `json:"pred_patches"`
	Mode             string            `json:"mode"`
}

// decodeRewardRecord decodes one JSONL record and checks it names a mode.
// fastRewardWire decodes the usual lines; encoding/json the rest and the
// malformed ones.
func decodeRewardRecord(b []byte) (reward.Record, error) {
	w, ok := fastRewardWire(b)
	if !ok {
		w = rewardWire{}
		if err := json.Unmarshal(b, &w); err != nil {
			// Keep the id when only a field is wrong, so the error record can name it.
			var id struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(b, &id)
			return reward.Record{ID: id.ID}, fmt.Errorf("invalid record: %v", err)
		}
	}
	rec := reward.Record{ID: w.ID, CodeContext: w.CodeContext, OracleNewContent: w.OracleNewContent, ModeName: w.Mode}
	if w.Output != nil {
		rec.Output = *w.Output
	}
	if w.OraclePatches != nil {
		rec.OraclePatches = *w.OraclePatches
	}
	if w.PredPatches != nil {
		rec.PredPatches = *w.PredPatches
	}
	switch {
	case rec.ModeName != "":
	case w.OraclePatches != nil || w.PredPatches != nil:
		rec.ModeName = reward.ModeUnidiff
	case w.Output != nil:
		rec.ModeName = reward.ModeSearchReplace
	default:
		return rec, errors.New("invalid record: want output (search/replace) or oracle_patches/pred_patches (unidiff)")
	}
	return rec, nil
}

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
	fs := newFlags("reward", "--in FILE|- --out FILE|- [flags]", stderr)
	in := fs.String("in", "-", "records to score: JSONL, or Parquet by the .parquet extension (- for stdin, JSONL)")
	out := fs.String("out", "-", "results: JSONL, or Parquet by the .parquet extension (- for stdout, JSONL)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "records scored at once (output order is kept)")
	timeout := fs.Duration("timeout", time.Minute, "cap on one record's similarity computation; a record over it scores −1 with an error (0: none)")
	progressEvery := new(time.Duration)
	addProgressFlag(fs, progressEvery)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	if *workers < 1 {
		return usagef("--workers %d, want ≥ 1", *workers)
	}
	if *timeout < 0 {
		return usagef("--timeout %v, want ≥ 0", *timeout)
	}
	parquetOut := strings.HasSuffix(*out, ".parquet")
	var w *bufio.Writer
	if !parquetOut {
		dst := stdout
		if *out != "-" {
			f, err := os.Create(*out)
			if err != nil {
				return err
			}
			defer f.Close()
			dst = f
		}
		w = bufio.NewWriterSize(dst, 1<<16)
	}

	work := make(chan *rewardJob, 4**workers)
	order := make(chan *rewardJob, 64**workers)
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				res := reward.Score(ctx, &j.rec, *timeout)
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
		readErr <- readRewardRecords(ctx, *in, func(line int64, rec reward.Record, err error) error {
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

	var (
		n, bad, formatErrs int64
		sum                float64
		rows               []reward.Scored
		enc                = json.NewEncoder(w)
		start              = time.Now()
		lastProgress       = start
		writeErr           error
	)
	if w != nil {
		enc.SetEscapeHTML(false)
	}
	for j := range order {
		select {
		case <-j.done:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		n++
		switch {
		case j.bad:
			bad++
		case j.out.Error != "":
			formatErrs++
		}
		if !j.bad {
			sum += j.out.Reward
		}
		if writeErr == nil {
			if parquetOut {
				rows = append(rows, j.out)
			} else {
				writeErr = enc.Encode(&j.out)
			}
		}
		if *progressEvery > 0 && time.Since(lastProgress) >= *progressEvery {
			lastProgress = time.Now()
			fmt.Fprintf(stderr, "swerl reward: %d records, %.0f/s\n", n, float64(n)/time.Since(start).Seconds())
		}
	}
	// Drain so the reader and workers finish before returning.
	for j := range order {
		_ = j
	}
	wg.Wait()
	if err := <-readErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := ctx.Err(); err != nil {
		if w != nil {
			w.Flush()
		}
		return err
	}
	if writeErr != nil {
		return writeErr
	}
	if parquetOut {
		if err := parquetio.WriteFile(*out, rows); err != nil {
			return err
		}
	} else if err := w.Flush(); err != nil {
		return err
	}
	mean := 0.0
	if scored := n - bad; scored > 0 {
		mean = sum / float64(scored)
	}
	el := time.Since(start)
	fmt.Fprintf(stderr, "swerl reward: %d records in %v (%.0f/s): mean reward %.4f, %d scored −1 with an error, %d malformed input lines\n",
		n, el.Round(time.Millisecond), float64(n)/el.Seconds(), mean, formatErrs, bad)
	return nil
}

// readRewardRecords calls fn for every record of path (JSONL, or Parquet by
// extension; "-" is stdin) in order, with its 1-based line or row number.
// A line that does not decode is passed with an error naming the line, and
// reading goes on.
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

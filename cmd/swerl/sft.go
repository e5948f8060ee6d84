package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"swerl/gpu/learner"
)

func init() {
	register(&command{name: "sft", summary: "supervised warm start: cross-entropy on answers only, publishing checkpoint versions", run: runSFT})
}

// loadPairs reads JSONL lines {"id","system","prompt","answer"}; a bad
// line is an error naming the file and line.
func loadPairs(path string) ([]learner.Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []learner.Example
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ex struct {
			ID, System, Prompt, Answer string
		}
		if err := json.Unmarshal(sc.Bytes(), &ex); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if ex.Prompt == "" || ex.Answer == "" {
			return nil, fmt.Errorf("%s:%d: want non-empty prompt and answer", path, line)
		}
		if ex.ID == "" {
			ex.ID = fmt.Sprintf("%s:%d", path, line)
		}
		out = append(out, learner.Example{ID: ex.ID, System: ex.System, Prompt: ex.Prompt, Answer: ex.Answer})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	return out, nil
}

func runSFT(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sft", "--model DIR --pairs FILE.jsonl --out DIR --steps N [flags]", stderr)
	tf := addTrainFlags(fs, 1e-5, "swerl sft's default is a supervised warm start's, larger than an RL step's")
	pairs := fs.String("pairs", "", `JSONL of {"id","system","prompt","answer"} examples`)
	batch := fs.Int("batch", 8, "examples per optimizer step")
	fs.Lookup("steps").Usage = "optimizer steps of the whole warm start (≥ 1); with --resume, only those --out does not hold yet are taken"
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	examples, err := sftExamples(*pairs, fs)
	if err != nil {
		return err
	}
	if tf.steps < 1 || *batch < 1 {
		return usagef("want --steps ≥ 1 and --batch ≥ 1")
	}
	cfg, stop, err := tf.config(stderr)
	if err != nil {
		return err
	}
	defer stop()
	l, err := learner.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer l.Close()
	// --steps counts the steps of the whole warm start: a resumed one
	// takes those the output does not hold yet (each step publishes one
	// version after v0), so a rerun after a kill ends where an
	// uninterrupted run does.
	steps := tf.steps
	if done := int(l.Version()); tf.resume && done > 0 {
		steps -= done
		if steps <= 0 {
			fmt.Fprintf(stderr, "swerl sft: %s already holds %d steps (--steps %d); nothing to train\n", tf.out, done, tf.steps)
			return nil
		}
		fmt.Fprintf(stderr, "swerl sft: %s holds %d of %d steps; training the other %d\n", tf.out, done, tf.steps, steps)
	}
	_, err = l.SFT(ctx, examples, *batch, steps)
	return err
}

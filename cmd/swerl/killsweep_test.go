package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kill-sweep case is a command SIGKILLed at random points of its run and
// continued by its own resume (fullDiskCase's fields: setup, resume,
// result).
type killSweepCase struct {
	fullDiskCase
	stream uint64 // killRNG's stream: the cases' points differ at one seed
	// redo, when set, is the line a rerun prints when it redoes work a
	// killed run had begun (it holds no state to continue from); unfinished
	// says when the killed run's output calls for it.
	redo       string
	unfinished func(out string) bool
	// finished, when set, says the killed run's output is complete: a
	// command whose reruns add to their output (replay) is then not run
	// again.
	finished func(out string) bool
}

// TestKillSweep SIGKILLs swerl sft, learn (--samples), train (--instances,
// through the embedded broker), agentless and replay at random points drawn over
// the whole of an uninterrupted run's time (killRNG: 3 points each, more
// with SWERL_KILL_CYCLES; early ones included, before anything is
// written), each in its own --out, resumes each to the end with the
// command's own resume (sft and learn: --resume; train, agentless and
// replay: the same command again), and compares the result with the uninterrupted
// run's: the same versions, their weights' and optimizer state's hashes
// and what each trained (sft, learn), the same sample ids once each with
// the same rewards and advantages (train), the same predictions' bytes and
// candidates (agentless), every record once (replay).
func TestKillSweep(t *testing.T) {
	for _, c := range []killSweepCase{
		{fullDiskCase: fullDiskCase{name: "sft", resume: "--resume", setup: sftSetup, result: learnResult}, stream: 11},
		{fullDiskCase: fullDiskCase{name: "learn", resume: "--resume", setup: learnSetup, result: learnResult}, stream: 12},
		{fullDiskCase: fullDiskCase{name: "train", setup: trainSetup, result: trainResult}, stream: 13},
		{fullDiskCase: fullDiskCase{name: "agentless", setup: agentlessSetup, result: agentlessResult}, stream: 14,
			redo: "redoing every instance", unfinished: agentlessUnfinished},
		{fullDiskCase: fullDiskCase{name: "replay", setup: replaySetup, result: replayResult}, stream: 15,
			redo: "the files of a replay that did not finish", unfinished: replayUnfinished, finished: replayFinished},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng, cycles := killRNG(t, c.stream)
			dir := t.TempDir()
			args := c.setup(t, dir)
			ref := filepath.Join(dir, "ref")
			t0 := time.Now()
			runCLI(t, args(ref), 0, 3*time.Minute)
			total := time.Since(t0)
			want := c.result(t, ref)
			first, _, _ := strings.Cut(want, "\n")
			t.Logf("the uninterrupted run took %v (%s, %d lines of result)", total.Round(time.Millisecond), first, strings.Count(want, "\n")+1)
			for k := range cycles {
				// A point anywhere in the run as the uninterrupted one was
				// timed, its start (the process starting) included.
				delay := time.Duration(rng.Float64() * float64(total))
				out := filepath.Join(dir, fmt.Sprintf("out%d", k))
				ch := startCLI(t, args(out)...)
				time.Sleep(delay) // the random kill point, not a synchronization
				if exited, err := ch.kill(); exited {
					if err != nil {
						t.Fatalf("kill %d: the run failed before its kill: %v\n%s", k, err, ch.out.String())
					}
					t.Logf("kill %d: the run finished before its kill %v in", k, delay)
				} else {
					t.Logf("kill %d: killed %v in", k, delay)
				}
				unfinished := c.unfinished != nil && c.unfinished(out)
				rerun := args(out)
				if c.resume != "" {
					rerun = append(rerun, c.resume)
				}
				var log string
				if c.finished != nil && c.finished(out) {
					t.Logf("kill %d: the output is complete; not run again", k)
				} else {
					_, log = runCLI(t, rerun, 0, 3*time.Minute)
				}
				if unfinished && !strings.Contains(log, c.redo) {
					t.Errorf("kill %d: the rerun redoes the killed run's work without saying so (%q):\n%s", k, c.redo, log)
				}
				if got := c.result(t, out); got != want {
					t.Fatalf("kill %d at %v, resumed:\n%s\nwant (uninterrupted):\n%s\nkilled run:\n%s\nresumed run:\n%s", k, delay, got, want, ch.out.String(), log)
				}
			}
		})
	}
}

// agentlessUnfinished reports whether out holds outputs of swerl agentless
// but not its summary, which it writes last.
func agentlessUnfinished(out string) bool {
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
		return false
	}
	for _, f := range []string{"candidates.parquet", "instances.jsonl", "predictions.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			return true
		}
	}
	return false
}

// replayUnfinished reports whether out holds the staging folder of a
// replay that did not finish.
func replayUnfinished(out string) bool {
	m, _ := filepath.Glob(filepath.Join(out, ".replay-staging-*"))
	return len(m) > 0
}

// replayFinished reports whether out holds a replay's samples and no
// staging folder: the replay finished.
func replayFinished(out string) bool {
	files, _ := filepath.Glob(filepath.Join(out, "samples", "replay-*.parquet"))
	return len(files) > 0 && !replayUnfinished(out)
}

// Package agentless runs Agentless Mini (transforms/agentless) over
// SWE-bench rows as a Beam pipeline (see Build): each row's Python tree is
// read at base_commit from a local clone, every localization and repair
// sample is its own element (so one instance's samples can run on
// different workers), candidates group by instance for the vote, and the
// run writes SWE-bench predictions plus a Parquet file of every repair
// candidate.
package agentless

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"swerl/internal/atomicfile"
	"swerl/pipelines/beamrun"
	"swerl/pipelines/mine"
	"swerl/sinks/parquetio"
	"swerl/transforms/agentless"
	"swerl/transforms/rollout"
)

// Config configures Run.
type Config struct {
	Instances string // SWE-bench rows, .jsonl or .parquet
	// Repo is the local clone holding every row's base_commit; Repos, a
	// JSON object {"owner/name": "/path/to/clone"}, serves several. The
	// workers read the clones at these paths.
	Repo, Repos string
	Policy      string // rollout spec: http://…/v1, model:DIR, file:…
	Out         string // output directory
	// Concurrency is how many policy requests are in flight in each
	// process running the pipeline; default 4.
	Concurrency int
	// TestCommand, when set, is run (sh -c) in a checkout of base_commit
	// with each candidate applied; a non-zero exit is a failure, and only
	// the candidates with the fewest failures vote.
	TestCommand string
	// RepairBatch is the most repair samples one request asks for; 0: all
	// of an instance's samples in one request.
	RepairBatch int
	Solve       agentless.Options // Executor is not used: see TestCommand
	// Runner is the Beam runner; "" uses Beam's --runner flag (Prism by
	// default).
	Runner   string
	Progress io.Writer // one line per instance (in-process runners); nil for none
}

// Summary is what a run did, with the time spent waiting on the policy
// apart from the rest.
type Summary struct {
	Instances  int `json:"instances"`
	Resolved   int `json:"with_patch"`
	Failed     int `json:"failed"`
	BadRows    int `json:"bad_rows"`
	Candidates int `json:"candidates"`
	// MalformedLocalizations counts localization answers naming no file
	// of the tree.
	MalformedLocalizations int `json:"malformed_localizations"`
	Dropped                int `json:"dropped_candidates"`
	// DroppedBy counts the dropped candidates by reason (the reason's
	// text before any colon).
	DroppedBy map[string]int `json:"dropped_by"`
	Wall      time.Duration  `json:"wall_ns"`
	// PolicyTime sums the policy requests' times, SwerlTime the rest of
	// the stages' work (reading trees and files, prompts, apply,
	// normalize, vote), over the instances.
	PolicyTime time.Duration `json:"policy_ns"`
	SwerlTime  time.Duration `json:"swerl_ns"`
	PerMinute  float64       `json:"instances_per_minute"`
	// Stages sums each stage's time over the instances (policy time is in
	// Localize and Repair).
	Stages      agentless.StageTimes `json:"stages"`
	Predictions string               `json:"predictions"`
}

func (s Summary) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	var b strings.Builder
	fmt.Fprintf(&b, "stages (summed over instances): localize %s, repair %s (both mostly the policy), apply %s, normalize %s, vote %s\n",
		r(s.Stages.Localize), r(s.Stages.Repair), r(s.Stages.Apply), r(s.Stages.Normalize), r(s.Stages.Vote))
	if len(s.DroppedBy) > 0 {
		reasons := make([]string, 0, len(s.DroppedBy))
		for k := range s.DroppedBy {
			reasons = append(reasons, k)
		}
		sort.Strings(reasons)
		b.WriteString("dropped candidates:")
		for i, k := range reasons {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s %d", k, s.DroppedBy[k])
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d instances (%d with a patch, %d failed, %d bad rows), %d malformed localization answers, %d candidates (%d dropped) in %s: %.1f instances/min; policy %s, swerl %s; predictions in %s\n",
		s.Instances, s.Resolved, s.Failed, s.BadRows, s.MalformedLocalizations, s.Candidates, s.Dropped, r(s.Wall), s.PerMinute,
		r(s.PolicyTime), r(s.SwerlTime), s.Predictions)
	return b.String()
}

// runSeq numbers the runs of this process, for their ids.
var runSeq atomic.Int64

// Run solves every row on the Beam runner cfg.Runner names and writes
// DIR/predictions.jsonl (instance_id, model_name_or_path, model_patch: the
// chosen raw patch), DIR/candidates.parquet (every repair sample: raw and
// normalized patch, votes, test failures, why dropped) and
// DIR/instances.jsonl (localized files, files the token budget left out,
// stage times), in input order. A row that cannot be read or solved is
// named in DIR/failed.jsonl and gets an empty prediction, so every row is
// accounted for.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	start := time.Now()
	var sum Summary
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	repos := map[string]string{}
	if cfg.Repos != "" {
		b, err := os.ReadFile(cfg.Repos)
		if err != nil {
			return sum, err
		}
		if err := json.Unmarshal(b, &repos); err != nil {
			return sum, fmt.Errorf("agentless: %s: want a JSON object {\"owner/name\": \"path\"}: %w", cfg.Repos, err)
		}
	}
	// The workers read the clones at these paths, whatever their
	// working directory.
	for name, dir := range repos {
		if abs, err := filepath.Abs(dir); err == nil {
			repos[name] = abs
		}
	}
	if cfg.Repo != "" {
		if abs, err := filepath.Abs(cfg.Repo); err == nil {
			cfg.Repo = abs
		}
	}
	rows, bad, err := readRows(ctx, cfg.Instances, cfg.Repo, repos)
	if err != nil {
		return sum, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return sum, err
	}
	p := Params{LocalizeSamples: cfg.Solve.LocalizeSamples, RepairSamples: cfg.Solve.RepairSamples, MaxFiles: cfg.Solve.MaxFiles,
		Temperature: cfg.Solve.Temperature, MaxTokens: cfg.Solve.MaxTokens, MaxInputTokens: cfg.Solve.MaxInputTokens, Seed: cfg.Solve.Seed,
		Model: cfg.Solve.Model, RepairBatch: cfg.RepairBatch, TestCommand: cfg.TestCommand}
	w := writeFn{Out: cfg.Out, Model: cfg.Solve.Model, Bad: bad}
	if len(rows) == 0 {
		sum, err = w.write(nil)
		sum.finish(time.Since(start))
		return sum, err
	}
	pol, err := rollout.Open(cfg.Policy)
	if err != nil {
		return sum, err
	}
	defer pol.Close()

	// The steps of this process share the policy opened here, the pool of
	// requests and the progress lines.
	runID := fmt.Sprintf("agentless-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), runSeq.Add(1))
	var mu sync.Mutex
	done := 0
	st := &runState{ctx: ctx, policy: pol, sem: make(chan struct{}, cfg.Concurrency)}
	if cfg.Progress != nil {
		st.progress = func(o outcome) {
			mu.Lock()
			defer mu.Unlock()
			done++
			status := "ok"
			if o.Err != "" {
				status = "failed: " + o.Err
			} else if o.Prediction.ModelPatch == "" {
				status = "no patch"
			}
			fmt.Fprintf(cfg.Progress, "[%d/%d] %s: %s (%d candidates, policy %s, total %s)\n", done, len(rows), o.Info.Row.ID, status,
				len(o.Candidates), o.PolicyNS.Round(time.Millisecond), o.total().Round(time.Millisecond))
		}
	}
	defer runs.Register(runID, st)()
	if unfinished(cfg.Out) && cfg.Progress != nil {
		// The outputs are written together once every instance is voted
		// on, so a run stopped before has nothing to continue from.
		fmt.Fprintf(cfg.Progress, "agentless: %s holds outputs of a run that did not finish; redoing every instance\n", cfg.Out)
	}
	if err := os.Remove(filepath.Join(cfg.Out, summaryFile)); err != nil && !os.IsNotExist(err) {
		return sum, err
	}

	if !beam.Initialized() {
		beam.Init()
	}
	pipe, s := beam.NewPipelineWithRoot()
	Build(s, runID, cfg.Policy, cfg.Concurrency, p, beam.CreateList(s, rows), w)
	if _, err := beamrun.Run(ctx, cfg.Runner, pipe); err != nil {
		return sum, fmt.Errorf("agentless: %s", beamrun.RootCause(err, "agentless: "))
	}
	b, err := os.ReadFile(filepath.Join(cfg.Out, summaryFile))
	if err != nil {
		return sum, fmt.Errorf("agentless: the pipeline wrote no summary: %w", err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		return sum, fmt.Errorf("agentless: %s: %w", summaryFile, err)
	}
	// The pipeline's write step cannot know the run's wall time: the
	// launcher adds it (and the rate) to the file it reads back.
	sum.finish(time.Since(start))
	if b, err = json.Marshal(sum); err == nil {
		err = atomicfile.WriteFile(filepath.Join(cfg.Out, summaryFile), b)
	}
	if err != nil {
		return sum, fmt.Errorf("agentless: %s: %w", summaryFile, err)
	}
	return sum, nil
}

func (s *Summary) finish(wall time.Duration) {
	s.Wall = wall
	if wall > 0 {
		s.PerMinute = float64(s.Instances) / wall.Minutes()
	}
}

// readRows reads the SWE-bench rows and resolves each one's clone. Rows
// that do not parse, lack an instance_id or base_commit, or repeat an
// instance_id are bad rows, named by file and line (or row).
func readRows(ctx context.Context, file, repo string, repos map[string]string) ([]row, []badRow, error) {
	raw, badLines, err := mine.ReadSWEBench(ctx, file)
	if err != nil {
		return nil, nil, err
	}
	var bad []badRow
	for _, b := range badLines {
		bad = append(bad, badRow{Where: b[0], Error: b[1]})
	}
	seen := map[string]bool{}
	var rows []row
	for i, r := range raw {
		where := fmt.Sprintf("%s row %d", file, i+1) // counting the rows that parsed
		switch {
		case r.InstanceID == "":
			bad = append(bad, badRow{Where: where, Error: where + ": no instance_id"})
			continue
		case r.BaseCommit == "":
			bad = append(bad, badRow{Where: where, Error: fmt.Sprintf("%s: %s: no base_commit", where, r.InstanceID)})
			continue
		case seen[r.InstanceID]:
			bad = append(bad, badRow{Where: where, Error: fmt.Sprintf("%s: instance_id %s repeats an earlier row", where, r.InstanceID)})
			continue
		}
		seen[r.InstanceID] = true
		clone := repo
		if c, ok := repos[r.Repo]; ok {
			clone = c
		}
		rows = append(rows, row{Index: len(rows), ID: r.InstanceID, Repo: r.Repo, Clone: clone, Commit: r.BaseCommit, Problem: r.ProblemStatement})
	}
	return rows, bad, nil
}

// badRow is an input row that could not be read.
type badRow struct {
	Where, Error string
}

// unfinished reports whether out holds any output of a run but not the
// summary, written last: a run stopped or failed while writing.
func unfinished(out string) bool {
	if _, err := os.Stat(filepath.Join(out, summaryFile)); err == nil {
		return false
	}
	for _, f := range []string{"candidates.parquet", "instances.jsonl", "predictions.jsonl", "failed.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			return true
		}
	}
	return false
}

// summaryFile is the summary the write step leaves for the launcher.
const summaryFile = "summary.json"

// writeFn writes every output once all rows are voted on (a single group
// of every outcome).
type writeFn struct {
	Out, Model string
	Bad        []badRow
}

func (w *writeFn) ProcessElement(ctx context.Context, _ int, outcomes func(*outcome) bool) error {
	var all []outcome
	var o outcome
	for outcomes(&o) {
		all = append(all, o)
		o = outcome{}
	}
	if _, err := w.write(all); err != nil {
		return fmt.Errorf("agentless: writing the outputs: %w", err)
	}
	return nil
}

// total is the work time of the outcome's stages.
func (o *outcome) total() time.Duration {
	s := o.Stages
	return s.Localize + s.Repair + s.Apply + s.Normalize + s.Vote
}

// write writes the outputs of outcomes, in input order, and DIR/summary.json.
func (w *writeFn) write(outcomes []outcome) (Summary, error) {
	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].Info.Row.Index < outcomes[j].Info.Row.Index })
	sum := Summary{DroppedBy: map[string]int{}}
	var failed []map[string]string
	for _, b := range w.Bad {
		failed = append(failed, map[string]string{"where": b.Where, "error": b.Error})
	}
	predPath := filepath.Join(w.Out, "predictions.jsonl")
	var preds, insts bytes.Buffer
	penc := json.NewEncoder(&preds)
	penc.SetEscapeHTML(false)
	ienc := json.NewEncoder(&insts)
	ienc.SetEscapeHTML(false)
	cw, err := parquetio.Create[agentless.Candidate](filepath.Join(w.Out, "candidates.parquet"))
	if err != nil {
		return sum, err
	}
	defer cw.Abort()
	for i := range outcomes {
		o := &outcomes[i]
		in := o.Info
		sum.Instances++
		pred := o.Prediction
		if o.Err != "" {
			sum.Failed++
			failed = append(failed, map[string]string{"instance_id": in.Row.ID, "error": o.Err})
			pred = agentless.Prediction{InstanceID: in.Row.ID, Model: w.Model}
		}
		if pred.ModelPatch != "" {
			sum.Resolved++
		}
		dropped := 0
		for _, c := range o.Candidates {
			if c.Dropped != "" {
				dropped++
				sum.DroppedBy[dropClass(c.Dropped)]++
			}
		}
		sum.Candidates += len(o.Candidates)
		sum.Dropped += dropped
		sum.MalformedLocalizations += in.Malformed
		sum.Stages.Localize += o.Stages.Localize
		sum.Stages.Repair += o.Stages.Repair
		sum.Stages.Apply += o.Stages.Apply
		sum.Stages.Normalize += o.Stages.Normalize
		sum.Stages.Vote += o.Stages.Vote
		sum.PolicyTime += o.PolicyNS
		sum.SwerlTime += o.total() - o.PolicyNS
		// One line per instance: the files shown to repair, those the
		// token budget left out, and the stage times.
		rec := struct {
			InstanceID             string               `json:"instance_id"`
			Localized              []string             `json:"localized_files"`
			Omitted                []string             `json:"omitted_files"`
			MalformedLocalizations int                  `json:"malformed_localizations"`
			Candidates             int                  `json:"candidates"`
			Dropped                int                  `json:"dropped_candidates"`
			RepairRequests         int                  `json:"repair_requests"`
			PolicyNS               time.Duration        `json:"policy_ns"`
			TotalNS                time.Duration        `json:"total_ns"`
			Stages                 agentless.StageTimes `json:"stages_ns"`
			Error                  string               `json:"error,omitempty"`
		}{InstanceID: in.Row.ID, Localized: in.Localized, Omitted: in.Omitted, MalformedLocalizations: in.Malformed,
			Candidates: len(o.Candidates), Dropped: dropped, RepairRequests: in.Batches, PolicyNS: o.PolicyNS, TotalNS: o.total(), Stages: o.Stages, Error: o.Err}
		if err := ienc.Encode(rec); err != nil {
			return sum, err
		}
		if err := penc.Encode(pred); err != nil {
			return sum, err
		}
		if err := cw.Write(o.Candidates...); err != nil {
			return sum, err
		}
	}
	if err := cw.Close(); err != nil {
		return sum, err
	}
	if err := atomicfile.WriteFile(filepath.Join(w.Out, "instances.jsonl"), insts.Bytes()); err != nil {
		return sum, err
	}
	if err := atomicfile.WriteFile(predPath, preds.Bytes()); err != nil {
		return sum, err
	}
	sum.BadRows = len(w.Bad)
	failedPath := filepath.Join(w.Out, "failed.jsonl")
	if len(failed) > 0 {
		var b bytes.Buffer
		fe := json.NewEncoder(&b)
		fe.SetEscapeHTML(false)
		for _, f := range failed {
			fe.Encode(f)
		}
		if err := atomicfile.WriteFile(failedPath, b.Bytes()); err != nil {
			return sum, err
		}
	} else if err := os.Remove(failedPath); err != nil && !os.IsNotExist(err) {
		return sum, err
	}
	sum.Predictions = predPath
	b, err := json.Marshal(sum)
	if err != nil {
		return sum, err
	}
	return sum, atomicfile.WriteFile(filepath.Join(w.Out, summaryFile), b)
}

// Package lineage answers "what trained version N?" from a run's outputs
// alone: the learner's step record of the version (trained/vNNNNNN.json,
// gpu/learner.StepRecord) lists the ids of the samples the step took; each
// is joined to its row in samples/*.parquet (prompt, completion, reward,
// advantage, the version that sampled it), that row to its instance in
// instances/*.parquet (the pull request: repository, number, merge commit,
// oracle patch), and the version to its row of index.parquet (step,
// parent, loss). Nothing else is read: no broker, no model.
//
// sinks/report/queries/lineage.sql gives the same join in DuckDB.
package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/parquetio"
	"swerl/transforms/reward"
	"swerl/transforms/window"
)

// Paths are where a run's outputs are; Dirs fills the defaults under one
// output root.
type Paths struct {
	Out       string // the root: trained/, index.parquet
	Samples   string // samples/*.parquet (default Out/samples)
	Instances string // instances/*.parquet (default Out/instances)
}

// Dirs returns the default paths under out, with samples and instances
// overriding them when set (the train pipeline and the learner may write
// to different roots).
func Dirs(out, samples, instances string) Paths {
	p := Paths{Out: out, Samples: samples, Instances: instances}
	if p.Samples == "" {
		p.Samples = filepath.Join(out, "samples")
	}
	if p.Instances == "" {
		p.Instances = filepath.Join(out, "instances")
	}
	return p
}

// record is the part of gpu/learner.StepRecord lineage reads (decoded
// leniently: the learner's other fields are its own).
type record struct {
	Version int64    `json:"version"`
	Step    int64    `json:"step"`
	Samples []string `json:"samples"`
	Dropped []string `json:"dropped"`
}

func recordPath(out string, v int64) string {
	return filepath.Join(out, "trained", checkpoint.VersionDir(v)+".json")
}

func readRecord(out string, v int64) (record, error) {
	path := recordPath(out, v)
	b, err := os.ReadFile(path)
	if err != nil {
		return record{}, fmt.Errorf("lineage: the step record of version %d: %w", v, err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("lineage: %s: %w", path, err)
	}
	if r.Version != v {
		return record{}, fmt.Errorf("lineage: %s: the record says version %d", path, r.Version)
	}
	return r, nil
}

// Step is what trained one version.
type Step struct {
	Version int64
	Step    int64
	// Index is the version's row of index.parquet (nil when the index has
	// none: a record written just before a crash, before the publish).
	Index *schemas.WeightVersion
	// Samples are the record's samples, in its order, joined.
	Samples []Trained
	// Missing are ids of the record that samples/ does not hold (its
	// Parquet files were moved, or the train pipeline wrote elsewhere:
	// see Paths.Samples).
	Missing []string
	// Dropped are the ids of samples dropped since the previous version
	// (too stale, incomplete groups), as the record lists them.
	Dropped []string
}

// Trained is one sample a version trained on, joined to its instance.
type Trained struct {
	schemas.Sample
	// Copies is how many rows of samples/ carry the id (more than 1: the
	// train pipeline wrote the group again after a crash; the learner
	// trained it once). The first row is the one shown.
	Copies int
	// Instance is the instance the prompt was built from, or nil when
	// instances/ lacks it. For a hunk task ("owner/repo#N/path:line") it
	// is the pull request's instance.
	Instance *schemas.Instance
	// Task is what the policy was asked to change: Instance itself, or for
	// a hunk task its window, rebuilt from Instance (transforms/window,
	// the window whose id is the sample's and whose code the prompt
	// shows); nil when it cannot be rebuilt.
	Task *schemas.Instance
	// OraclePatch is Task's oracle change as a git diff (for a hunk, that
	// hunk's); empty when Task is nil.
	OraclePatch string
	// AnswerPatch is the answer's edits as a git diff against the code
	// the policy was shown (Task's); empty when the answer is malformed
	// (FormatError) or changes nothing.
	AnswerPatch string
	// OracleDiff is a git diff from the oracle's files to the answer's
	// (a/ the oracle, b/ the answer) over every file either changes:
	// empty when the answer reproduces the oracle.
	OracleDiff string
}

// ErrNotTrained is returned by Sample for an id no step record lists.
var ErrNotTrained = errors.New("lineage: no version trained on the sample")

// Version joins what trained version v.
func Version(ctx context.Context, p Paths, v int64) (*Step, error) {
	r, err := readRecord(p.Out, v)
	if err != nil {
		return nil, err
	}
	return join(ctx, p, r, r.Samples)
}

// Sample finds the version that trained the sample id (scanning the step
// records) and joins that sample alone. An id no record lists is
// ErrNotTrained; the error says when a record lists it as dropped.
func Sample(ctx context.Context, p Paths, id string) (*Step, error) {
	recs, err := Records(p.Out)
	if err != nil {
		return nil, err
	}
	for _, v := range recs {
		r, err := readRecord(p.Out, v)
		if err != nil {
			return nil, err
		}
		if slices.Contains(r.Samples, id) {
			return join(ctx, p, r, []string{id})
		}
		if slices.Contains(r.Dropped, id) {
			return nil, fmt.Errorf("%w %s: the learner dropped it before version %d (too stale or in an incomplete group)", ErrNotTrained, id, v)
		}
	}
	return nil, fmt.Errorf("%w %s (none of the %d step records under %s lists it)", ErrNotTrained, id, len(recs), filepath.Join(p.Out, "trained"))
}

// Records lists the versions that have a step record, ascending.
func Records(out string) ([]int64, error) {
	ents, err := os.ReadDir(filepath.Join(out, "trained"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lineage: %s holds no step records (trained/): is it a learner's output root?", out)
	}
	if err != nil {
		return nil, fmt.Errorf("lineage: %w", err)
	}
	var vs []int64
	for _, e := range ents {
		var v int64
		if n, _ := fmt.Sscanf(e.Name(), "v%d.json", &v); n == 1 && e.Name() == checkpoint.VersionDir(v)+".json" {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs, nil
}

// All joins every version that has a step record with samples, in
// version order, reading the samples and instances once (the report's
// pages).
func All(ctx context.Context, p Paths) ([]*Step, error) {
	vs, err := Records(p.Out)
	if err != nil {
		return nil, err
	}
	var recs []record
	var ids [][]string
	for _, v := range vs {
		r, err := readRecord(p.Out, v)
		if err != nil {
			return nil, err
		}
		if len(r.Samples) > 0 {
			recs, ids = append(recs, r), append(ids, r.Samples)
		}
	}
	return joinAll(ctx, p, recs, ids)
}

// join reads the rows of the samples ids (of record r) and their instances.
func join(ctx context.Context, p Paths, r record, ids []string) (*Step, error) {
	sts, err := joinAll(ctx, p, []record{r}, [][]string{ids})
	if err != nil {
		return nil, err
	}
	return sts[0], nil
}

// joinAll joins the samples ids[i] of each record recs[i], scanning the
// samples, the instances and the index once.
func joinAll(ctx context.Context, p Paths, recs []record, ids [][]string) ([]*Step, error) {
	index, err := readIndex(p.Out)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, l := range ids {
		for _, id := range l {
			want[id] = true
		}
	}
	rows, copies, err := scanSamples(p.Samples, want)
	if err != nil {
		return nil, err
	}
	instIDs := map[string]bool{}
	for _, s := range rows {
		for _, id := range instanceIDs(s.InstanceID) {
			instIDs[id] = true
		}
	}
	insts, err := scanInstances(p.Instances, instIDs)
	if err != nil {
		return nil, err
	}
	var out []*Step
	for i, r := range recs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := &Step{Version: r.Version, Step: r.Step, Dropped: r.Dropped, Index: index[r.Version]}
		for _, id := range ids[i] {
			s, ok := rows[id]
			if !ok {
				st.Missing = append(st.Missing, id)
				continue
			}
			st.Samples = append(st.Samples, joinSample(ctx, s, copies[id], insts))
		}
		out = append(out, st)
	}
	return out, nil
}

func joinSample(ctx context.Context, s schemas.Sample, copies int, insts map[string]*schemas.Instance) Trained {
	t := Trained{Sample: s, Copies: copies}
	for _, id := range instanceIDs(s.InstanceID) {
		if in, ok := insts[id]; ok {
			t.Instance = in
			break
		}
	}
	if t.Instance != nil {
		t.Task = task(t.Instance, s.InstanceID, s.Prompt)
	}
	if t.Task != nil {
		t.OraclePatch = reward.GitDiff(t.Task.CodeContext, t.Task.OracleNewContent)
	}
	if t.Task != nil && s.FormatError == "" {
		t.AnswerPatch, t.OracleDiff = diffs(ctx, t.Task, s.Completion)
	}
	return t
}

// instanceIDs are the ids a sample's instance may have in instances/,
// best first: its own, then each prefix ending before a "/", longest first.
// A hunk task's id is its instance's id, "/", path and line
// (transforms/window: "owner/repo#12/pkg/a.go:40" → "owner/repo#12").
func instanceIDs(id string) []string {
	out := []string{id}
	for i := len(id) - 1; i > 0; i-- {
		if id[i] == '/' {
			out = append(out, id[:i])
		}
	}
	return out
}

// task rebuilds the task a sample's prompt was built from: in itself, or
// the hunk window of in with the id id (transforms/window.Hunks; the run's
// --hunk-context is not in the outputs, so each context is tried, the
// run's default first, and the window must be the code the prompt shows).
func task(in *schemas.Instance, id, prompt string) *schemas.Instance {
	if in.ID == id {
		return in
	}
	for _, c := range []int{1, 3, 2, 4, 5, 6, 7, 8, 9, 10} {
		hs, _ := window.Hunks(in, window.Options{Context: c, MaxBytes: math.MaxInt, MaxPerInstance: math.MaxInt})
		for i := range hs {
			h := &hs[i]
			if h.ID != id {
				continue
			}
			for _, code := range h.CodeContext {
				if strings.Contains(prompt, strings.TrimSpace(code)) {
					return h
				}
			}
		}
	}
	return nil
}

// diffs are the answer's patch and its diff against the oracle's files.
func diffs(ctx context.Context, in *schemas.Instance, completion string) (answer, vsOracle string) {
	pred, err := reward.ApplyAnswer(in.CodeContext, completion)
	if err != nil {
		return "", ""
	}
	answer = reward.GitDiff(in.CodeContext, pred)
	oracle, got := map[string]string{}, map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(in.OracleNewContent)) {
		oracle[p] = in.OracleNewContent[p]
	}
	for path := range in.CodeContext {
		if _, ok := oracle[path]; !ok {
			oracle[path] = in.CodeContext[path]
		}
	}
	for _, path := range slices.Concat(slices.Collect(maps.Keys(in.OracleNewContent)), slices.Collect(maps.Keys(pred))) {
		if c, ok := pred[path]; ok {
			got[path] = c
		} else {
			got[path] = in.CodeContext[path]
		}
	}
	return answer, reward.GitDiff(oracle, got)
}

// readIndex reads the checkpoint index (index.parquet at the root, or
// under checkpoints/) by version; empty when there is none.
func readIndex(out string) (map[int64]*schemas.WeightVersion, error) {
	byV := map[int64]*schemas.WeightVersion{}
	for _, p := range []string{filepath.Join(out, checkpoint.IndexFile), filepath.Join(out, "checkpoints", checkpoint.IndexFile)} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		rows, err := parquetio.ReadFile[schemas.WeightVersion](p)
		if err != nil {
			return nil, fmt.Errorf("lineage: %w", err)
		}
		for i := range rows {
			byV[rows[i].Version] = &rows[i]
		}
		break
	}
	return byV, nil
}

// scanSamples reads the rows of the wanted sample ids from every Parquet
// file of dir, keeping the first row of each and counting the copies.
func scanSamples(dir string, want map[string]bool) (map[string]schemas.Sample, map[string]int, error) {
	files, err := parquetFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	rows, copies := map[string]schemas.Sample{}, map[string]int{}
	for _, f := range files {
		err := parquetio.Scan(f, func(batch []schemas.Sample) error {
			for _, s := range batch {
				if !want[s.ID] {
					continue
				}
				if copies[s.ID] == 0 {
					rows[s.ID] = s
				}
				copies[s.ID]++
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("lineage: %w", err)
		}
	}
	return rows, copies, nil
}

func scanInstances(dir string, want map[string]bool) (map[string]*schemas.Instance, error) {
	files, err := parquetFiles(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*schemas.Instance{}
	for _, f := range files {
		err := parquetio.Scan(f, func(batch []schemas.Instance) error {
			for i := range batch {
				if want[batch[i].ID] && out[batch[i].ID] == nil {
					in := batch[i]
					out[in.ID] = &in
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("lineage: %w", err)
		}
	}
	return out, nil
}

// parquetFiles lists dir's Parquet files in name order; an absent dir has
// none (the caller reports the ids it could not join).
func parquetFiles(dir string) ([]string, error) {
	files, err := parquetio.Files(dir)
	if err != nil {
		return nil, fmt.Errorf("lineage: %w", err)
	}
	return files, nil
}

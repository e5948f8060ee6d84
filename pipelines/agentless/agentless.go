// Package agentless runs Agentless Mini (transforms/agentless) over
// SWE-bench rows: each row's Python tree is read at base_commit from a
// local clone, the instances are solved concurrently against a policy,
// and the run writes SWE-bench predictions plus a Parquet file of every
// repair candidate.
package agentless

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"swerl/pipelines/mine"
	"swerl/sinks/parquetio"
	"swerl/transforms/agentless"
	"swerl/transforms/rollout"
)

// Config configures Run.
type Config struct {
	Instances string // SWE-bench rows, .jsonl or .parquet
	// Repo is the local clone holding every row's base_commit; Repos, a
	// JSON object {"owner/name": "/path/to/clone"}, serves several.
	Repo, Repos string
	Policy      string // rollout spec: http://…/v1, model:DIR, file:…
	Out         string // output directory
	Concurrency int    // instances in flight; default 4
	// TestCommand, when set, is run (sh -c) in a checkout of base_commit
	// with each candidate applied; a non-zero exit is a failure, and only
	// the candidates with the fewest failures vote.
	TestCommand string
	Solve       agentless.Options
	Progress    io.Writer // one line per instance; nil for none
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
	MalformedLocalizations int           `json:"malformed_localizations"`
	Dropped                int           `json:"dropped_candidates"`
	Wall                   time.Duration `json:"wall_ns"`
	PolicyTime             time.Duration `json:"policy_ns"`
	SwerlTime              time.Duration `json:"swerl_ns"`
	PerMinute              float64       `json:"instances_per_minute"`
	// Stages sums each stage's time over the instances (policy time is in
	// Localize and Repair).
	Stages      agentless.StageTimes `json:"stages"`
	Predictions string               `json:"predictions"`
}

func (s Summary) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("stages (summed over instances): localize %s, repair %s (both mostly the policy), apply %s, normalize %s, vote %s\n",
		r(s.Stages.Localize), r(s.Stages.Repair), r(s.Stages.Apply), r(s.Stages.Normalize), r(s.Stages.Vote)) + fmt.Sprintf("%d instances (%d with a patch, %d failed, %d bad rows), %d malformed localization answers, %d candidates (%d dropped) in %s: %.1f instances/min; policy %s, swerl %s; predictions in %s\n",
		s.Instances, s.Resolved, s.Failed, s.BadRows, s.MalformedLocalizations, s.Candidates, s.Dropped, s.Wall.Round(time.Millisecond), s.PerMinute,
		s.PolicyTime.Round(time.Millisecond), s.SwerlTime.Round(time.Millisecond), s.Predictions)
}

// pythonTree reads every .py file of commit in repo.
func pythonTree(ctx context.Context, repo, commit string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "ls-tree", "-r", "-z", "--full-tree", commit).Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-tree %s: %w", commit, err)
	}
	var hashes, paths []string
	for _, e := range bytes.Split(out, []byte{0}) {
		meta, path, ok := strings.Cut(string(e), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[1] != "blob" || !strings.HasSuffix(path, ".py") {
			continue
		}
		hashes = append(hashes, f[2])
		paths = append(paths, path)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(hashes, "\n") + "\n")
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	files := map[string]string{}
	br := bufio.NewReader(bytes.NewReader(data))
	for _, p := range paths {
		header, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file: %s: %w", p, err)
		}
		var hash, typ string
		var size int
		if _, err := fmt.Sscanf(header, "%s %s %d", &hash, &typ, &size); err != nil {
			return nil, fmt.Errorf("git cat-file: %s: header %q", p, header)
		}
		buf := make([]byte, size+1)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("git cat-file: %s: %w", p, err)
		}
		files[p] = string(buf[:size])
	}
	return files, nil
}

// Run solves every row and writes DIR/predictions.jsonl (instance_id,
// model_name_or_path, model_patch: the chosen raw patch),
// DIR/candidates.parquet (every repair sample: raw and normalized patch,
// votes, test failures, why dropped) and DIR/instances.jsonl (localized
// files, files the token budget left out, stage times). A row that cannot be read or solved is named in
// DIR/failed.jsonl and gets an empty prediction, so every row is
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
	rows, bad, err := mine.ReadSWEBench(ctx, cfg.Instances)
	if err != nil {
		return sum, err
	}
	pol, err := rollout.Open(cfg.Policy)
	if err != nil {
		return sum, err
	}
	defer pol.Close()
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return sum, err
	}
	type result struct {
		out agentless.Outcome
		err error
	}
	results := make([]result, len(rows))
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			row := rows[i]
			repo := cfg.Repo
			if r, ok := repos[row.Repo]; ok {
				repo = r
			}
			var res result
			if repo == "" {
				res.err = fmt.Errorf("%s: no clone for repo %q (--repo or --repos)", row.InstanceID, row.Repo)
			} else if files, err := pythonTree(ctx, repo, row.BaseCommit); err != nil {
				res.err = fmt.Errorf("%s: %w", row.InstanceID, err)
			} else {
				opts := cfg.Solve
				if cfg.TestCommand != "" {
					opts.Executor = agentless.LocalExecutor{Repo: repo, Command: cfg.TestCommand}
				}
				res.out, res.err = agentless.Solve(ctx, pol, agentless.Instance{ID: row.InstanceID, Problem: row.ProblemStatement, Files: files, Commit: row.BaseCommit}, opts)
			}
			results[i] = res
			mu.Lock()
			done++
			if cfg.Progress != nil {
				status := "ok"
				if res.err != nil {
					status = "failed: " + res.err.Error()
				} else if res.out.Prediction.ModelPatch == "" {
					status = "no patch"
				}
				fmt.Fprintf(cfg.Progress, "[%d/%d] %s: %s (%d candidates, policy %s, total %s)\n", done, len(rows), row.InstanceID, status,
					len(res.out.Candidates), res.out.PolicyTime.Round(time.Millisecond), res.out.Time.Round(time.Millisecond))
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()

	predPath := filepath.Join(cfg.Out, "predictions.jsonl")
	pf, err := os.Create(predPath)
	if err != nil {
		return sum, err
	}
	enc := json.NewEncoder(pf)
	enc.SetEscapeHTML(false)
	var cands []agentless.Candidate
	var failed []map[string]string
	for _, b := range bad {
		failed = append(failed, map[string]string{"where": b[0], "error": b[1]})
	}
	// One line per instance on localization: the files shown to repair,
	// those the token budget left out, and the stage times.
	lf, err := os.Create(filepath.Join(cfg.Out, "instances.jsonl"))
	if err != nil {
		return sum, err
	}
	lenc := json.NewEncoder(lf)
	lenc.SetEscapeHTML(false)
	for i, r := range results {
		rec := struct {
			InstanceID             string               `json:"instance_id"`
			Localized              []string             `json:"localized_files"`
			Omitted                []string             `json:"omitted_files"`
			MalformedLocalizations int                  `json:"malformed_localizations"`
			Candidates             int                  `json:"candidates"`
			PolicyNS               time.Duration        `json:"policy_ns"`
			TotalNS                time.Duration        `json:"total_ns"`
			Stages                 agentless.StageTimes `json:"stages_ns"`
			Error                  string               `json:"error,omitempty"`
		}{InstanceID: rows[i].InstanceID, Localized: r.out.Localized, Omitted: r.out.Omitted, MalformedLocalizations: r.out.MalformedLocalizations,
			Candidates: len(r.out.Candidates), PolicyNS: r.out.PolicyTime, TotalNS: r.out.Time, Stages: r.out.Stages}
		if r.err != nil {
			rec.Error = r.err.Error()
		}
		if err := lenc.Encode(rec); err != nil {
			lf.Close()
			return sum, err
		}
	}
	if err := lf.Close(); err != nil {
		return sum, err
	}
	for i, r := range results {
		sum.Instances++
		pred := r.out.Prediction
		if r.err != nil {
			sum.Failed++
			failed = append(failed, map[string]string{"instance_id": rows[i].InstanceID, "error": r.err.Error()})
			pred = agentless.Prediction{InstanceID: rows[i].InstanceID, Model: cfg.Solve.Model}
		}
		if pred.ModelPatch != "" {
			sum.Resolved++
		}
		sum.MalformedLocalizations += r.out.MalformedLocalizations
		sum.Stages.Localize += r.out.Stages.Localize
		sum.Stages.Repair += r.out.Stages.Repair
		sum.Stages.Apply += r.out.Stages.Apply
		sum.Stages.Normalize += r.out.Stages.Normalize
		sum.Stages.Vote += r.out.Stages.Vote
		sum.PolicyTime += r.out.PolicyTime
		sum.SwerlTime += r.out.Time - r.out.PolicyTime
		for _, c := range r.out.Candidates {
			sum.Candidates++
			if c.Dropped != "" {
				sum.Dropped++
			}
		}
		cands = append(cands, r.out.Candidates...)
		if err := enc.Encode(pred); err != nil {
			pf.Close()
			return sum, err
		}
	}
	if err := pf.Close(); err != nil {
		return sum, err
	}
	sum.BadRows = len(bad)
	if len(failed) > 0 {
		b := &bytes.Buffer{}
		fe := json.NewEncoder(b)
		for _, f := range failed {
			fe.Encode(f)
		}
		if err := os.WriteFile(filepath.Join(cfg.Out, "failed.jsonl"), b.Bytes(), 0o644); err != nil {
			return sum, err
		}
	}
	if err := parquetio.WriteFile(filepath.Join(cfg.Out, "candidates.parquet"), cands); err != nil {
		return sum, err
	}
	sum.Wall = time.Since(start)
	sum.PerMinute = float64(sum.Instances) / sum.Wall.Minutes()
	sum.Predictions = predPath
	return sum, nil
}

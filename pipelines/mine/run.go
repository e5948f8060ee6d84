package mine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"swerl/internal/gitio"
	"swerl/pipelines/beamrun"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/metrics"
	"swerl/sinks/parquetio"
	"swerl/transforms/mining"
	"swerl/transforms/mining/ghevents"
)

// Config configures a mining run. The zero value mines the repository in
// the current directory into ./swerl-out/.
type Config struct {
	// Repos are local repositories (work trees or bare) or git URLs
	// (https://, ssh://, file://, git@host:owner/repo); default ".". A URL
	// is cloned (bare, whole) into DIR/.clones by the scan worker, mined,
	// and removed at the end of the run; one that cannot be cloned is a
	// dead letter, not a failed run.
	Repos []string
	// Events are GH Archive files or folders of hourly .json/.json.gz
	// files, local or in object storage (gs://, s3://).
	Events []string
	// Out is the output directory, local or in object storage (gs://bucket/…,
	// s3://bucket/…: package files); default "swerl-out". Repositories
	// given by URL are then cloned to a local temporary directory.
	Out string
	// Refs are mined besides HEAD: branches, tags, commits or for-each-ref
	// patterns ("refs/heads/*"). Every commit reachable from them is read,
	// whichever branch it was made on.
	Refs []string
	// Commits makes every first-parent non-merge commit that is not a PR
	// (and not a root commit, which has no parent to be its base) an
	// instance too (source "commit", id "owner/repo@<sha12>", problem
	// statement = the commit message).
	Commits bool
	// MaxFiles, MaxLines and MaxBytes cap a change (mining.Limits: 0 for
	// the defaults 50 files, 5000 lines, 2 MiB; negative for no cap).
	MaxFiles, MaxLines, MaxBytes int
	// RelevantFiles is how many relevant unmodified files an instance gets
	// (default 3, negative for none); RelevantBytes skips larger files
	// (default 64 KiB).
	RelevantFiles, RelevantBytes int
	// Exclude is a decontamination file: one "owner/repo", "owner/repo#N"
	// or "owner/repo@sha12" a line.
	Exclude string
	// ExcludeSWEBench excludes SWE-bench's twelve repositories.
	ExcludeSWEBench bool
	// JSONL also writes the instances as JSON lines, sorted by id, to
	// JSONLPath (default DIR/instances.jsonl).
	JSONL     bool
	JSONLPath string
	// RowsPerFile caps the rows of one instance file; default
	// DefaultRowsPerFile. Memory does not depend on it: instances are
	// staged and written one at a time.
	RowsPerFile int
	// Workers is how many goroutines of each worker build instances
	// (sharing git cat-file processes); default 4 a core.
	Workers int
	// Runner is the Beam runner ("prism", "flink", "dataflow", …); ""
	// uses Beam's --runner flag, itself defaulting to prism.
	Runner string
	// Progress receives a live progress line every ProgressEvery (default
	// 1s) and, when several repositories are mined, a line as each one
	// finishes (RepoProgress; in-process runners only); nil for none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Publish, when set, is applied to the kept instances, a
	// PCollection<KV<string, []byte>> of id → JSON wire form: the seam for
	// the Kafka sink.
	Publish func(s beam.Scope, instances beam.PCollection)
}

// Summary is what a run did.
type Summary struct {
	Repos      int64
	Commits    int64 // commits read (all reachable from the mined refs)
	PRs        int64 // pull requests found (history and events)
	Candidates int64 // PRs and commits that reached the file stage
	Instances  int64 // kept and written
	// Rejected counts what was not kept, by mining.Reason.
	Rejected map[string]int64
	// ExcludedRepos are repositories skipped whole by decontamination.
	ExcludedRepos []string
	Files         []string // instance Parquet files
	JSONL         string   // the JSONL file, when written
	DeadLetters   string   // the dead-letter file, when written
	Elapsed       time.Duration
}

// String is the end-of-run summary, one reason a line.
func (s Summary) String() string {
	var b strings.Builder
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Instances) / s.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "mine: %d repos, %d commits, %d PRs, %d candidates, %d instances in %s (%.1f instances/s)\n",
		s.Repos, s.Commits, s.PRs, s.Candidates, s.Instances, s.Elapsed.Round(time.Millisecond), rate)
	reasons := make([]string, 0, len(s.Rejected))
	for r := range s.Rejected {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(&b, "  rejected %-15s %d\n", r, s.Rejected[r])
	}
	for _, r := range s.ExcludedRepos {
		fmt.Fprintf(&b, "  excluded repository %s\n", r)
	}
	for _, f := range s.Files {
		fmt.Fprintf(&b, "  wrote %s\n", f)
	}
	if s.JSONL != "" {
		fmt.Fprintf(&b, "  wrote %s\n", s.JSONL)
	}
	if s.DeadLetters != "" {
		fmt.Fprintf(&b, "  dead letters in %s\n", s.DeadLetters)
	}
	return b.String()
}

// Run mines cfg.Repos and writes the outputs. It returns an error for
// unusable configuration (a path that is not a repository, an unreadable
// exclude or event path) or a failed pipeline; problems with single PRs,
// commits or event lines are counted in Summary.Rejected instead. The
// progress line shows the counts of this process since Run began (two runs
// at once in one process share it); the summary reads the pipeline
// result's.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	start := time.Now()
	since := counts.Mark()
	var sum Summary
	if len(cfg.Repos) == 0 {
		cfg.Repos = []string{"."}
	}
	if cfg.Out == "" {
		cfg.Out = "swerl-out"
	}
	ex, err := loadExclude(cfg)
	if err != nil {
		return sum, err
	}
	tasks, excluded, err := repoTasks(ctx, cfg.Repos, ex)
	if err != nil {
		return sum, err
	}
	sum.ExcludedRepos = excluded
	events, err := eventFiles(ctx, cfg.Events)
	if err != nil {
		return sum, fmt.Errorf("mine: events: %w", err)
	}
	instDir := files.Join(cfg.Out, "instances")
	deadPath := files.Join(cfg.Out, "deadletter", "mine.parquet")
	if err := clearOutput(ctx, instDir, deadPath); err != nil {
		return sum, err
	}
	clones, err := cloneFolder(cfg.Out)
	if err != nil {
		return sum, err
	}
	defer os.RemoveAll(clones)
	if len(tasks) == 0 {
		sum.Elapsed = time.Since(start)
		sum.Rejected = map[string]int64{}
		return sum, writeDone(ctx, cfg.Out, &sum)
	}

	if !beam.Initialized() {
		beam.Init()
	}
	var tr *repoTracker
	var trKey string
	if cfg.Progress != nil && len(tasks) > 1 {
		trKey = fmt.Sprintf("%s#%d", cfg.Out, runSeq.Add(1))
		var untrack func()
		tr, untrack = trackRepos(trKey, tasks)
		defer untrack()
	}
	p, s := beam.NewPipelineWithRoot()
	kept := Build(s, Params{
		Repos: tasks, EventFiles: events, Out: cfg.Out, CloneDir: clones, Commits: cfg.Commits, Refs: cfg.Refs,
		Limits:   mining.Limits{MaxFiles: cfg.MaxFiles, MaxLines: cfg.MaxLines, MaxBytes: cfg.MaxBytes},
		Relevant: mining.RelevantConfig{MaxFiles: cfg.RelevantFiles, MaxFileBytes: cfg.RelevantBytes},
		Exclude:  ex, RowsPerFile: cfg.RowsPerFile, Workers: cfg.Workers, Emit: cfg.Publish != nil, Progress: trKey,
	})
	if cfg.Publish != nil {
		cfg.Publish(s, kept)
	}
	stopProgress := reportProgress(cfg, tr, since, len(tasks), start)
	res, err := beamrun.Run(ctx, cfg.Runner, p)
	stopProgress()
	if err != nil && ctx.Err() != nil {
		// Stopped: the runner's own errors (its metrics call, its job
		// service's "rpc error: code = Canceled") say nothing more.
		return sum, fmt.Errorf("mine: %w", ctx.Err())
	}
	if err != nil {
		return sum, fmt.Errorf("mine: pipeline: %s", beamrun.RootCause(err, "mine: "))
	}
	if err := summarize(ctx, cfg, res, since, instDir, deadPath, &sum); err != nil {
		return sum, err
	}
	// Last: the marker that the instance files are all there (Finished).
	if err := writeDone(ctx, cfg.Out, &sum); err != nil {
		return sum, err
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// loadExclude reads cfg.Exclude (and adds SWE-bench's repositories with
// cfg.ExcludeSWEBench).
func loadExclude(cfg Config) (*mining.Exclude, error) {
	ex := &mining.Exclude{}
	if cfg.Exclude != "" {
		f, err := os.Open(cfg.Exclude)
		if err != nil {
			return nil, fmt.Errorf("mine: exclude: %w", err)
		}
		ex, err = mining.ParseExclude(f, cfg.Exclude)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if cfg.ExcludeSWEBench {
		ex.AddRepos(mining.SWEBenchRepos...)
	}
	return ex, nil
}

// repoTasks names each repository to mine (a URL by its owner/name, a
// local clone by its remote), leaving out the excluded ones, which it
// returns apart.
func repoTasks(ctx context.Context, repos []string, ex *mining.Exclude) (tasks []RepoTask, excluded []string, err error) {
	for _, dir := range repos {
		if gitio.IsURL(dir) {
			name := gitio.NameFromURL(dir)
			if name == "" {
				name = dir
			}
			if ex.Repo(name) {
				excluded = append(excluded, name)
				continue
			}
			tasks = append(tasks, RepoTask{Dir: dir, Name: name})
			continue
		}
		r, err := gitio.Open(ctx, dir)
		if err != nil {
			return nil, nil, fmt.Errorf("mine: %w", err)
		}
		if ex.Repo(r.Name) {
			excluded = append(excluded, r.Name)
			continue
		}
		tasks = append(tasks, RepoTask{Dir: r.Dir, Name: r.Name})
	}
	return tasks, excluded, nil
}

// clearOutput removes an earlier run's instance files, dead letters and
// staging folder, so that the output is this run's alone. The marker of a
// finished run goes first: a kill part way through leaves a folder that
// says it is not finished.
func clearOutput(ctx context.Context, instDir, deadPath string) error {
	if !files.IsRemote(instDir) {
		if err := os.MkdirAll(instDir, 0o755); err != nil {
			return fmt.Errorf("mine: %w", err)
		}
	}
	if err := files.Remove(ctx, files.Join(instDir, DoneFile)); err != nil {
		return fmt.Errorf("mine: remove earlier output: %w", err)
	}
	old, err := files.List(ctx, files.Join(instDir, "part-*.parquet"))
	if err != nil {
		return fmt.Errorf("mine: %w", err)
	}
	for _, f := range old {
		if err := files.Remove(ctx, f); err != nil {
			return fmt.Errorf("mine: remove earlier output: %w", err)
		}
	}
	if err := files.Remove(ctx, deadPath); err != nil {
		return fmt.Errorf("mine: remove earlier output: %w", err)
	}
	if err := files.RemoveAll(ctx, files.Join(instDir, stagingDir)); err != nil {
		return fmt.Errorf("mine: %w", err)
	}
	return nil
}

// cloneFolder is the empty folder the run clones URLs into: under out, or
// a temporary one when out is object storage.
func cloneFolder(out string) (string, error) {
	clones := filepath.Join(out, cloneDir)
	if files.IsRemote(out) {
		var err error
		if clones, err = os.MkdirTemp("", "swerl-clones-*"); err != nil {
			return "", fmt.Errorf("mine: %w", err)
		}
	}
	os.RemoveAll(clones)
	return clones, nil
}

// reportProgress prints a progress line every cfg.ProgressEvery and each
// repository's line as it finishes (tr), until the returned stop is
// called; stop prints the repository lines still pending.
func reportProgress(cfg Config, tr *repoTracker, since metrics.Baseline, repos int, start time.Time) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cfg.Progress == nil {
			<-quit
			return
		}
		every := cfg.ProgressEvery
		if every <= 0 {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		var finished <-chan struct{}
		if tr != nil {
			finished = tr.notify
		}
		for {
			select {
			case <-quit:
				return
			case <-finished:
				for _, r := range tr.take() {
					fmt.Fprintln(cfg.Progress, r)
				}
			case <-t.C:
				fmt.Fprintln(cfg.Progress, progressLine(since, repos, time.Since(start)))
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		for _, r := range tr.take() {
			fmt.Fprintln(cfg.Progress, r)
		}
	}
}

// summarize fills sum from the pipeline's counts and output files, and
// writes the JSONL copy when cfg asks for one.
func summarize(ctx context.Context, cfg Config, res beam.PipelineResult, since metrics.Baseline, instDir, deadPath string, sum *Summary) error {
	if ok, err := readCounts(ctx, countsPath(cfg.Out), sum); err != nil {
		return err
	} else if !ok {
		fillSummary(sum, res, since)
	}
	if err := files.RemoveAll(ctx, files.Join(instDir, stagingDir)); err != nil {
		return fmt.Errorf("mine: %w", err)
	}
	var err error
	if sum.Files, err = files.List(ctx, files.Join(instDir, "part-*.parquet")); err != nil {
		return err
	}
	if ok, err := files.Exists(ctx, deadPath); err != nil {
		return err
	} else if ok {
		sum.DeadLetters = deadPath
	}
	if cfg.JSONL {
		path := cfg.JSONLPath
		if path == "" {
			path = files.Join(cfg.Out, "instances.jsonl")
		}
		if err := writeJSONL(ctx, path, sum.Files); err != nil {
			return err
		}
		sum.JSONL = path
	}
	return nil
}

// runSeq numbers the runs of this process, for their progress keys.
var runSeq atomic.Int64

// progressLine is the live progress line: the counts of this process
// since the baseline.
func progressLine(since metrics.Baseline, repos int, elapsed time.Duration) string {
	secs := elapsed.Seconds()
	if secs <= 0 {
		secs = 1
	}
	var rej int64
	for _, n := range since.SinceVec(cRejected) {
		rej += n
	}
	b := since.Since(cBuilt)
	return fmt.Sprintf("mine: repos %d/%d, commits %d, PRs %d, candidates %d, built %d (%.0f/s), rejected %d, kept %d, %s",
		since.Since(cRepos), repos, since.Since(cCommits), since.Since(cPRs), since.Since(cCandidates), b, float64(b)/secs, rej, since.Since(cKept), elapsed.Round(time.Second))
}

// countsPath is the file the pipeline writes its counts to (see tally.go):
// scratch, in the staging directory.
func countsPath(out string) string {
	return files.Join(out, "instances", stagingDir, "counts.json")
}

// eventFiles expands the --events arguments: local files and folders as
// ghevents.Files does; in object storage, a name ending in .json or
// .json.gz (or holding a glob) is taken as is, anything else as a folder
// of such files.
func eventFiles(ctx context.Context, args []string) ([]string, error) {
	var local, out []string
	for _, a := range args {
		if !files.IsRemote(a) {
			local = append(local, a)
			continue
		}
		if strings.HasSuffix(a, ".json") || strings.HasSuffix(a, ".json.gz") || strings.ContainsAny(files.Base(a), "*?[") {
			got, err := files.List(ctx, a)
			if err != nil {
				return nil, err
			}
			if len(got) == 0 {
				return nil, fmt.Errorf("%s: no such file", a)
			}
			out = append(out, got...)
			continue
		}
		for _, pat := range []string{"*.json", "*.json.gz"} {
			got, err := files.List(ctx, files.Join(a, pat))
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
	}
	if len(local) > 0 || len(out) == 0 {
		got, err := ghevents.Files(local)
		if err != nil {
			return nil, err
		}
		out = append(got, out...)
	}
	return out, nil
}

// fillSummary reads the counts from the pipeline result's Beam metrics, or,
// when the runner reports none, from what this process counted since the
// baseline.
func fillSummary(sum *Summary, res beam.PipelineResult, since metrics.Baseline) {
	t := counts.Totals(res, since)
	sum.Repos, sum.Commits, sum.PRs = t.Count(cRepos), t.Count(cCommits), t.Count(cPRs)
	sum.Candidates, sum.Instances = t.Count(cCandidates), t.Count(cKept)
	sum.Rejected = t.Counts(cRejected)
}

// writeJSONL writes the instances of parts as JSON lines sorted by id.
func writeJSONL(ctx context.Context, path string, parts []string) error {
	var all []schemas.Instance
	for _, f := range parts {
		local, done, err := files.Local(ctx, f, "")
		if err != nil {
			return err
		}
		rows, err := parquetio.ReadFile[schemas.Instance](local)
		done()
		if err != nil {
			return err
		}
		all = append(all, rows...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	var buf strings.Builder
	for i := range all {
		b, err := schemas.Encode(&all[i])
		if err != nil {
			return fmt.Errorf("mine: jsonl: %s: %w", all[i].ID, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return files.WriteFile(ctx, path, []byte(buf.String()))
}

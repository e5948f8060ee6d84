package mine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"swerl/internal/gitio"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/parquetio"
	"swerl/transforms/mining"
)

// SWEBenchRow is one row of a SWE-bench-format dataset (JSONL or Parquet).
type SWEBenchRow struct {
	InstanceID       string `json:"instance_id" parquet:"instance_id"`
	Repo             string `json:"repo" parquet:"repo"`
	BaseCommit       string `json:"base_commit" parquet:"base_commit"`
	Patch            string `json:"patch" parquet:"patch"`
	ProblemStatement string `json:"problem_statement" parquet:"problem_statement"`
	HintsText        string `json:"hints_text,omitempty" parquet:"hints_text,optional"`
	TestPatch        string `json:"test_patch,omitempty" parquet:"test_patch,optional"`
	CreatedAt        string `json:"created_at,omitempty" parquet:"created_at,optional"`
}

// ParquetProjection marks SWEBenchRow as reading some of the columns of
// SWE-bench's files, which hold more (FAIL_TO_PASS, version, …): they are
// not reported (parquetio.Projection).
func (SWEBenchRow) ParquetProjection() {}

// ImportConfig configures ImportSWEBench.
type ImportConfig struct {
	// File is a .jsonl (or .json lines) or .parquet file of SWEBenchRow.
	File string
	// Repo is the local clone holding every row's base_commit.
	Repo string
	// Out is the output directory; instances go to
	// DIR/instances/swebench.parquet. Default "swerl-out".
	Out string
	// RelevantFiles and RelevantBytes as in Config.
	RelevantFiles, RelevantBytes int
}

// ImportSWEBench turns SWE-bench rows into instances (source "swebench",
// the row's instance_id, "owner__repo-N", as the id, so predictions match
// SWE-bench's harness; PR number N): code context = the
// files the gold patch modifies, read at base_commit from the local clone;
// oracle new content = those files after `git apply` of the patch (in a
// scratch index and object directory, leaving the clone untouched); oracle
// patch = reward.GitDiff of the two; problem statement from the row. Rows
// that cannot be used (bad JSON, a missing base commit, a patch that does
// not apply) are counted by reason and named in Summary.Rejected's dead
// letters, never dropped silently. The size and bot filters do not apply.
func ImportSWEBench(ctx context.Context, cfg ImportConfig) (Summary, error) {
	start := time.Now()
	sum := Summary{Rejected: map[string]int64{}, Repos: 1}
	if cfg.Out == "" {
		cfg.Out = "swerl-out"
	}
	repo, err := gitio.Open(ctx, cfg.Repo)
	if err != nil {
		return sum, fmt.Errorf("mine: import: %w", err)
	}
	rows, bad, err := readSWEBench(ctx, cfg.File)
	if err != nil {
		return sum, err
	}
	var dead []schemas.DeadLetter
	deadLetter := func(key, reason, detail string) {
		sum.Rejected[reason]++
		dead = append(dead, schemas.DeadLetter{SchemaVersion: schemas.Version, Stage: "import", Source: cfg.File, Key: key, Reason: reason + ": " + detail})
	}
	for _, b := range bad {
		deadLetter(b[0], string(mining.BadRecord), b[1])
	}
	scratch, err := os.MkdirTemp("", "swerl-import-")
	if err != nil {
		return sum, fmt.Errorf("mine: import: %w", err)
	}
	defer os.RemoveAll(scratch)
	objects := filepath.Join(scratch, "objects")
	os.MkdirAll(objects, 0o755)
	gitDir, err := gitOutput(ctx, repo.Dir, nil, nil, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return sum, fmt.Errorf("mine: import: %w", err)
	}
	env := []string{
		"GIT_INDEX_FILE=" + filepath.Join(scratch, "index"),
		"GIT_OBJECT_DIRECTORY=" + objects,
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(strings.TrimSpace(gitDir), "objects"),
	}
	// A cat-file that sees the scratch objects as well as the clone's.
	cat, err := gitio.NewCatFileEnv(ctx, repo, env)
	if err != nil {
		return sum, err
	}
	defer cat.Close()
	var insts []schemas.Instance
	seen := map[string]bool{}
	for _, row := range rows {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		inst, reason, detail := importRow(ctx, repo, cat, env, row, cfg)
		if reason != "" {
			deadLetter(row.InstanceID, reason, detail)
			continue
		}
		if seen[inst.ID] {
			deadLetter(row.InstanceID, string(mining.Duplicate), inst.ID+" appears twice")
			continue
		}
		seen[inst.ID] = true
		insts = append(insts, inst)
		sum.Candidates++
	}
	sort.Slice(insts, func(i, j int) bool { return mining.IDLess(insts[i].ID, insts[j].ID) })
	path := files.Join(cfg.Out, "instances", "swebench.parquet")
	if err := files.Via(ctx, path, func(local string) error { return parquetio.WriteFile(local, insts) }); err != nil {
		return sum, err
	}
	sum.Files = []string{path}
	sum.Instances = int64(len(insts))
	sum.PRs = int64(len(rows))
	if len(dead) > 0 {
		sum.DeadLetters = files.Join(cfg.Out, "deadletter", "import.parquet")
		if err := files.Via(ctx, sum.DeadLetters, func(local string) error { return parquetio.WriteFile(local, dead) }); err != nil {
			return sum, err
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// readSWEBench reads rows (a local file, or one in object storage);
// bad holds (key, error) for unusable lines.
func readSWEBench(ctx context.Context, file string) (rows []SWEBenchRow, bad [][2]string, err error) {
	if strings.HasSuffix(file, ".parquet") {
		local, done, err := files.Local(ctx, file, "")
		if err != nil {
			return nil, nil, fmt.Errorf("mine: import: %w", err)
		}
		defer done()
		rows, err := parquetio.ReadFile[SWEBenchRow](local)
		if err != nil {
			return nil, nil, fmt.Errorf("mine: import: %s: %w", file, err)
		}
		return rows, nil, nil
	}
	f, err := files.Open(ctx, file)
	if err != nil {
		return nil, nil, fmt.Errorf("mine: import: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for line := 1; ; line++ {
		b, rerr := br.ReadBytes('\n')
		if t := bytes.TrimSpace(b); len(t) > 0 {
			row, perr := ParseSWEBenchLine(t)
			if perr != nil {
				bad = append(bad, [2]string{fmt.Sprintf("%s:%d", file, line), fmt.Sprintf("%s:%d: %v", file, line, perr)})
			} else {
				rows = append(rows, row)
			}
		}
		if rerr != nil {
			break
		}
	}
	return rows, bad, nil
}

// ParseSWEBenchLine parses one JSON line of a SWE-bench dataset and checks
// the fields ImportSWEBench needs.
func ParseSWEBenchLine(b []byte) (SWEBenchRow, error) {
	var row SWEBenchRow
	if err := json.Unmarshal(b, &row); err != nil {
		return row, fmt.Errorf("invalid JSON: %w", err)
	}
	switch {
	case row.InstanceID == "":
		return row, fmt.Errorf("no instance_id")
	case strings.Count(row.Repo, "/") != 1:
		return row, fmt.Errorf("%s: repo %q is not owner/repo", row.InstanceID, row.Repo)
	case row.BaseCommit == "":
		return row, fmt.Errorf("%s: no base_commit", row.InstanceID)
	case row.Patch == "":
		return row, fmt.Errorf("%s: no patch", row.InstanceID)
	}
	if _, err := SWEBenchNumber(row.InstanceID); err != nil {
		return row, err
	}
	return row, nil
}

// SWEBenchNumber returns N of an instance id "owner__repo-N".
func SWEBenchNumber(id string) (int, error) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, fmt.Errorf("instance_id %q does not end in -<number>", id)
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("instance_id %q does not end in -<number>", id)
	}
	return n, nil
}

func importRow(ctx context.Context, repo *gitio.Repo, cat *gitio.CatFile, env []string, row SWEBenchRow, cfg ImportConfig) (schemas.Instance, string, string) {
	n, err := SWEBenchNumber(row.InstanceID)
	if err != nil {
		return schemas.Instance{}, string(mining.BadRecord), err.Error()
	}
	base, err := gitOutput(ctx, repo.Dir, env, nil, "rev-parse", "--verify", "--quiet", row.BaseCommit+"^{commit}")
	if err != nil {
		return schemas.Instance{}, string(mining.MissingObject), fmt.Sprintf("%s: base_commit %s is not in %s", row.InstanceID, row.BaseCommit, repo.Dir)
	}
	base = strings.TrimSpace(base)
	if _, err := gitOutput(ctx, repo.Dir, env, nil, "read-tree", base); err != nil {
		return schemas.Instance{}, string(mining.GitError), fmt.Sprintf("%s: read-tree: %v", row.InstanceID, err)
	}
	if _, err := gitOutput(ctx, repo.Dir, env, strings.NewReader(row.Patch), "apply", "--cached", "-"); err != nil {
		return schemas.Instance{}, string(mining.BadRecord), fmt.Sprintf("%s: patch does not apply at %s: %v", row.InstanceID, short(base), err)
	}
	tree, err := gitOutput(ctx, repo.Dir, env, nil, "write-tree")
	if err != nil {
		return schemas.Instance{}, string(mining.GitError), fmt.Sprintf("%s: write-tree: %v", row.InstanceID, err)
	}
	cand := Candidate{RepoDir: repo.Dir, Repo: row.Repo, ID: row.InstanceID, Number: n, Source: schemas.SourceSWEBench,
		Base: base, Head: strings.TrimSpace(tree), CreatedAt: row.CreatedAt, ProblemStatement: row.ProblemStatement,
		LinkedIssues: []int{}}
	inst, rej := build(cat, cand, buildConfig{
		Limits:   mining.Limits{MaxFiles: -1, MaxLines: -1, MaxBytes: -1},
		Relevant: mining.RelevantConfig{MaxFiles: cfg.RelevantFiles, MaxFileBytes: cfg.RelevantBytes},
	})
	if rej != nil {
		return schemas.Instance{}, string(rej.Reason), rej.Detail
	}
	inst.HeadCommit = ""        // a scratch tree, not a commit of the repository
	inst.PRBody = row.HintsText // after the filters: hints are not a PR body to judge
	return inst, "", ""
}

// gitOutput runs git with extra environment and optional stdin.
func gitOutput(ctx context.Context, dir string, env []string, stdin *strings.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// ReadSWEBench reads SWE-bench rows from a .jsonl or .parquet file (local
// or gs:// / s3://); unparseable JSON lines come back in bad as
// {where, why}, never dropped silently.
func ReadSWEBench(ctx context.Context, file string) (rows []SWEBenchRow, bad [][2]string, err error) {
	return readSWEBench(ctx, file)
}

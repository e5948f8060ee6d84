package mine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"swerl/internal/bincode/bincodetest"
	"swerl/internal/gitio/gittest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/mining"
)

// history builds a repository whose first-parent history holds one PR per
// case the miner must handle, and returns it with the PR numbers expected
// to become instances.
func history(t *testing.T) (*gittest.Repo, []int) {
	r := gittest.New(t)
	r.Git("remote", "add", "origin", "https://github.com/acme/widgets.git")
	r.Commit("initial import", map[string]string{
		"go.mod":        "module example.com/widgets\n\ngo 1.22\n",
		"calc/calc.go":  "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a - b }\n",
		"calc/mul.go":   "package calc\n\nfunc Mul(a, b int) int { return a * b }\n",
		"cmd/main.go":   "package main\n\nimport \"example.com/widgets/calc\"\n\nfunc main() { println(calc.Add(1, 2)) }\n",
		"README.md":     "# widgets\n",
		"old/legacy.go": "package old\n\nfunc Legacy() {}\n",
		"util/strs.py":  "def up(s):\n    return s.upper()\n",
		"lib/remove.go": "package lib\n\nvar Gone = 1\n",
	})
	pr := func(n int, branch, title string, files map[string]string) {
		r.PR(n, branch, title+" (work)", files, title)
	}
	// #1: an ordinary merge commit fixing an issue; main moves first, so the
	// merge base is not the first parent.
	r.Git("checkout", "-q", "-b", "fix-add", "main")
	r.Commit("fix Add", map[string]string{"calc/calc.go": "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n"})
	r.Git("checkout", "-q", "main")
	r.Commit("unrelated main work", map[string]string{"util/strs.py": "def up(s):\n    return s.upper()\n\n\ndef low(s):\n    return s.lower()\n"})
	r.MergePR(1, "fix-add", "Fix Add\n\nFixes #10: Add subtracted.")
	// #2: squash merge.
	r.Commit("Add Sub to calc (#2)", map[string]string{"calc/sub.go": "package calc\n\nfunc Sub(a, b int) int { return a - b }\n"})
	// #3: a bot PR.
	pr(3, "dependabot/x", "Bump golang.org/x/text from 0.1 to 0.2", map[string]string{"calc/mul.go": "package calc\n\n// bumped\nfunc Mul(a, b int) int { return a * b }\n"})
	// #4: docs only.
	pr(4, "docs", "Improve the README", map[string]string{"README.md": "# widgets\n\nBetter.\n"})
	// #5: a binary file.
	pr(5, "logo", "Add a logo", map[string]string{"calc/logo.png": "\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", "calc/mul.go": "package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n"})
	// #6: not UTF-8.
	pr(6, "latin1", "Latin-1 comment", map[string]string{"calc/calc.go": "package calc\n\n// Add adds. caf\xe9\nfunc Add(a, b int) int { return a + b }\n"})
	// #7: a rename with an edit.
	r.Git("checkout", "-q", "-b", "rename", "main")
	r.Git("mv", "old/legacy.go", "old/modern.go")
	r.Commit("rename legacy", map[string]string{"old/modern.go": "package old\n\nfunc Modern() {}\n"})
	r.MergePR(7, "rename", "Rename Legacy to Modern")
	// #8: a deletion plus an edit.
	pr(8, "delete", "Remove lib.Gone", map[string]string{"lib/remove.go!": "", "cmd/main.go": "package main\n\nimport \"example.com/widgets/calc\"\n\nfunc main() { println(calc.Add(1, 2), calc.Mul(2, 3)) }\n"})
	// #9: too large.
	pr(9, "huge", "Generated tables", map[string]string{"calc/table.go": "package calc\n\nvar T = []int{\n" + strings.Repeat("\t1,\n", 6000) + "}\n"})
	// #11: the same change as #2 again after a revert: a duplicate patch.
	r.Commit("Revert sub", map[string]string{"calc/sub.go!": ""})
	pr(11, "sub-again", "Add Sub again", map[string]string{"calc/sub.go": "package calc\n\nfunc Sub(a, b int) int { return a - b }\n"})
	// #12: a Python change (imports in both directions).
	pr(12, "py", "Handle None in up", map[string]string{"util/strs.py": "def up(s):\n    if s is None:\n        return ''\n    return s.upper()\n\n\ndef low(s):\n    return s.lower()\n", "util/use.py": "from util import strs\n"})
	// #13: a blob the clone lacks.
	pr(13, "lost", "Lost change", map[string]string{"calc/lost.go": "package calc\n\nvar Lost = \"this blob is removed from the object store\"\n"})
	h := r.Git("rev-parse", "HEAD^2:calc/lost.go")
	if err := os.Remove(filepath.Join(r.Dir, ".git", "objects", h[:2], h[2:])); err != nil {
		t.Fatal(err)
	}
	// A plain commit that is not a PR.
	r.Commit("tweak main", map[string]string{"cmd/main.go": "package main\n\nimport \"example.com/widgets/calc\"\n\nfunc main() { println(calc.Add(1, 2) + calc.Mul(2, 3)) }\n"})
	// #14: a merge commit from the GitHub button whose PR has no code change.
	r.Git("checkout", "-q", "-b", "noop", "main")
	r.Git("commit", "-q", "--allow-empty", "-m", "nothing")
	r.MergePR(14, "noop", "Nothing really")
	return r, []int{1, 2, 7, 8, 12}
}

func readInstances(t *testing.T, files []string) []schemas.Instance {
	t.Helper()
	var all []schemas.Instance
	for _, f := range files {
		rows, err := parquetio.ReadFile[schemas.Instance](f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all
}

// onlyInstance fails the test unless the run that returned sum and err
// succeeded and wrote exactly one instance, and returns that instance.
func onlyInstance(t *testing.T, sum Summary, err error) schemas.Instance {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	insts := readInstances(t, sum.Files)
	if len(insts) != 1 {
		t.Fatalf("instances %d\n%s", len(insts), sum)
	}
	return insts[0]
}

// checkApplies checks out the instance's base with git itself, checks the
// code context against it, and applies the oracle patch with `git apply`:
// the result must be the oracle new content.
func checkApplies(t *testing.T, repoDir string, inst schemas.Instance) {
	t.Helper()
	dir := t.TempDir()
	// Read the base with git itself: every file the oracle touches that
	// exists there, and every code-context file.
	paths := map[string]bool{}
	for p := range inst.CodeContext {
		paths[p] = true
	}
	for p := range inst.OracleNewContent {
		paths[p] = true
	}
	for p := range paths {
		cmd := exec.Command("git", "cat-file", "blob", inst.BaseCommit+":"+p)
		cmd.Dir = repoDir
		b, err := cmd.Output()
		c, inContext := inst.CodeContext[p]
		if err != nil {
			if inContext {
				t.Errorf("%s: %s is in the code context but not at the base: %v", inst.ID, p, err)
			}
			continue
		}
		if !inContext || string(b) != c {
			t.Errorf("%s: code_context[%s] differs from git's base (in context %v)", inst.ID, p, inContext)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), b, 0o644)
	}
	check := exec.Command("git", "apply", "--check", "-")
	check.Dir = dir
	check.Stdin = strings.NewReader(inst.OraclePatch)
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("%s: git apply --check: %v\n%s", inst.ID, err, out)
	}
	apply := exec.Command("git", "apply", "-")
	apply.Dir = dir
	apply.Stdin = strings.NewReader(inst.OraclePatch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("%s: git apply: %v\n%s\n%s", inst.ID, err, out, inst.OraclePatch)
	}
	for p, want := range inst.OracleNewContent {
		b, _ := os.ReadFile(filepath.Join(dir, p))
		if string(b) != want {
			t.Errorf("%s: after git apply %s = %q, oracle %q", inst.ID, p, b, want)
		}
	}
}

func TestMinePipeline(t *testing.T) {
	r, want := history(t)
	out := t.TempDir()
	var progress strings.Builder
	sum, err := Run(context.Background(), Config{Repos: []string{r.Dir}, Out: out, Runner: "prism", JSONL: true, MaxLines: 1000, Progress: &progress, ProgressEvery: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(sum)
	// The progress line counts the build stage, the longest one: the count
	// never goes back and ends at every candidate.
	lineRE := regexp.MustCompile(`candidates (\d+), built (\d+) \(\d+/s\)`)
	most := int64(-1)
	for _, l := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("progress line %q", l)
		}
		built, _ := strconv.ParseInt(m[2], 10, 64)
		if built < most {
			t.Errorf("built went back: %q after %d", l, most)
		}
		most = built
	}
	if most != sum.Candidates {
		t.Errorf("the last progress line has built %d, want all %d candidates", most, sum.Candidates)
	}
	insts := readInstances(t, sum.Files)
	var got []int
	for _, inst := range insts {
		got = append(got, inst.PRNumber)
		if !strings.HasSuffix(inst.ID, fmt.Sprintf("#%d", inst.PRNumber)) || !strings.HasPrefix(inst.ID, "acme/widgets#") {
			t.Errorf("id %q for PR %d", inst.ID, inst.PRNumber)
		}
		if inst.Repo != "acme/widgets" || inst.Source != schemas.SourceGit || inst.SchemaVersion != schemas.Version {
			t.Errorf("%s: repo %q source %q", inst.ID, inst.Repo, inst.Source)
		}
		checkApplies(t, r.Dir, inst)
	}
	sort.Ints(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("instances for PRs %v, want %v\n%s", got, want, sum)
	}
	wantRej := map[string]int64{"bot": 1, "non_code": 1, "binary": 1, "non_utf8": 1, "too_large": 1, "duplicate": 1, "missing_object": 1, "empty": 1}
	if !reflect.DeepEqual(sum.Rejected, wantRej) {
		t.Errorf("rejected %v, want %v", sum.Rejected, wantRej)
	}
	if sum.PRs != 13 || sum.Instances != int64(len(want)) || sum.Repos != 1 {
		t.Errorf("summary %+v", sum)
	}
	by := map[int]schemas.Instance{}
	for _, inst := range insts {
		by[inst.PRNumber] = inst
	}
	// #1: the merge base is the fork point, not main's later commit.
	fork := r.Git("merge-base", by[1].MergeCommit+"^1", by[1].MergeCommit+"^2")
	if by[1].BaseCommit != fork || by[1].HeadCommit != r.Git("rev-parse", by[1].MergeCommit+"^2") {
		t.Errorf("#1 base %s head %s, want base %s", by[1].BaseCommit, by[1].HeadCommit, fork)
	}
	if _, ok := by[1].CodeContext["util/strs.py"]; ok {
		t.Error("#1 shows main's later change as part of the PR")
	}
	if !reflect.DeepEqual(by[1].LinkedIssues, []int{10}) || by[1].PRTitle != "Fix Add" || !strings.Contains(by[1].ProblemStatement, "Add subtracted") {
		t.Errorf("#1 title %q linked %v statement %q", by[1].PRTitle, by[1].LinkedIssues, by[1].ProblemStatement)
	}
	// Relevant files: calc/mul.go is a sibling of the file of #1; #8's
	// cmd/main.go imports package calc, whose files are relevant except
	// calc/calc.go, which is not UTF-8 at #8's base (#6 merged it).
	if !reflect.DeepEqual(by[1].RelevantFiles, []string{"calc/mul.go"}) || !reflect.DeepEqual(by[8].RelevantFiles, []string{"calc/mul.go", "calc/sub.go"}) {
		t.Errorf("relevant files #1 %v #8 %v", by[1].RelevantFiles, by[8].RelevantFiles)
	}
	for _, inst := range insts {
		for _, p := range inst.RelevantFiles {
			if _, modified := inst.OracleNewContent[p]; modified || inst.CodeContext[p] == "" {
				t.Errorf("%s: relevant file %s is modified or empty", inst.ID, p)
			}
		}
	}
	// #7: the rename is a deletion plus an addition.
	if c, ok := by[7].OracleNewContent["old/legacy.go"]; !ok || c != "" || by[7].OracleNewContent["old/modern.go"] == "" {
		t.Errorf("#7 oracle %v", by[7].OracleNewContent)
	}
	if by[2].PRTitle != "Add Sub to calc" || by[2].BaseCommit != r.Git("rev-parse", by[2].MergeCommit+"^") {
		t.Errorf("#2 squash %q base %s", by[2].PRTitle, by[2].BaseCommit)
	}
	// JSONL agrees with Parquet.
	b, err := os.ReadFile(sum.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(insts) {
		t.Fatalf("%d JSONL lines, %d instances", len(lines), len(insts))
	}
	for i, l := range lines {
		var inst schemas.Instance
		if err := schemas.Decode([]byte(l), &inst); err != nil || inst.ID != insts[i].ID || inst.OraclePatch != insts[i].OraclePatch {
			t.Errorf("JSONL line %d: %v", i+1, err)
		}
	}
	// The missing blob is a dead letter naming the PR and the file.
	dead, err := parquetio.ReadFile[schemas.DeadLetter](sum.DeadLetters)
	if err != nil || len(dead) != 1 || dead[0].Key != "acme/widgets#13" || !strings.Contains(dead[0].Reason, "calc/lost.go") {
		t.Errorf("dead letters %+v, %v", dead, err)
	}
	// A second run replaces the output and gives the same rows.
	sum2, err := Run(context.Background(), Config{Repos: []string{r.Dir}, Out: out, Runner: "prism", MaxLines: 1000, RowsPerFile: 2})
	if err != nil {
		t.Fatal(err)
	}
	again := readInstances(t, sum2.Files)
	if len(sum2.Files) < 3 || !reflect.DeepEqual(again, insts) {
		t.Errorf("rerun with 2 rows a file: %d files, equal rows %v", len(sum2.Files), reflect.DeepEqual(again, insts))
	}
	// Each file holds at most 2 rows, sorted by id and named by their hash;
	// no staging file is left.
	for _, f := range sum2.Files {
		rows, err := parquetio.ReadFile[schemas.Instance](f)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(rows))
		for i := range rows {
			ids[i] = rows[i].ID
		}
		sorted := sort.SliceIsSorted(ids, func(i, j int) bool { return mining.IDLess(ids[i], ids[j]) })
		if len(rows) == 0 || len(rows) > 2 || !sorted || filepath.Base(f) != idsName("part", ".parquet", ids) {
			t.Errorf("%s: ids %v", f, ids)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "instances", stagingDir)); !os.IsNotExist(err) {
		t.Errorf("staging directory left behind: %v", err)
	}
}

func TestMineCommitsAndExclude(t *testing.T) {
	r, _ := history(t)
	out := t.TempDir()
	excl := filepath.Join(t.TempDir(), "exclude.txt")
	os.WriteFile(excl, []byte("# decontamination\nacme/widgets#8\n"), 0o644)
	sum, err := Run(context.Background(), Config{Repos: []string{r.Dir}, Out: out, Runner: "prism", Commits: true, MaxLines: 1000, Exclude: excl, RelevantFiles: -1})
	if err != nil {
		t.Fatal(err)
	}
	insts := readInstances(t, sum.Files)
	commits := map[string]schemas.Instance{}
	for _, inst := range insts {
		if inst.PRNumber == 8 {
			t.Error("excluded #8 was mined")
		}
		if len(inst.RelevantFiles) != 0 {
			t.Errorf("%s has relevant files with RelevantFiles<0", inst.ID)
		}
		if inst.Source == SourceCommit {
			commits[inst.ID] = inst
			checkApplies(t, r.Dir, inst)
		}
	}
	tweak := r.Git("log", "--first-parent", "--format=%H", "--grep=tweak main", "-1")
	unrelated := r.Git("log", "--first-parent", "--format=%H", "--grep=unrelated main work", "-1")
	for _, h := range []string{tweak, unrelated} {
		inst, ok := commits["acme/widgets@"+h[:12]]
		if !ok {
			t.Errorf("commit %s not mined; have %v", h[:12], keys(commits))
			continue
		}
		if inst.PRNumber != 0 || inst.BaseCommit != r.Git("rev-parse", h+"^") || inst.ProblemStatement == "" {
			t.Errorf("commit instance %+v", inst)
		}
	}
	// The squash PR and the initial import are not plain commits: root is
	// mined (its base is the empty tree) only if it passes the filters.
	if _, ok := commits["acme/widgets@"+r.Git("log", "--format=%H", "--grep=(#2)", "-1")[:12]]; ok {
		t.Error("a squash-merged PR was also mined as a commit")
	}
	if sum.Rejected["excluded"] != 1 {
		t.Errorf("rejected %v", sum.Rejected)
	}
	// Excluding the whole repository skips it.
	sum, err = Run(context.Background(), Config{Repos: []string{r.Dir}, Out: t.TempDir(), Runner: "prism", Exclude: writeFile(t, "acme/widgets\n")})
	if err != nil || len(sum.ExcludedRepos) != 1 || sum.Instances != 0 {
		t.Errorf("repo exclusion: %+v %v", sum, err)
	}
}

func TestMineEvents(t *testing.T) {
	r := gittest.New(t)
	r.Git("remote", "add", "origin", "git@github.com:acme/gadgets.git")
	r.Commit("init", map[string]string{"g.py": "def g():\n    return 1\n"})
	// A squash merge without "(#N)" in the subject: only the event knows it.
	m := r.Commit("Make g return 2", map[string]string{"g.py": "def g():\n    return 2\n"})
	ev := func(typ string, payload map[string]any) string {
		b, _ := json.Marshal(map[string]any{"type": typ, "created_at": "2024-03-01T00:00:00Z", "repo": map[string]any{"name": "acme/gadgets"}, "payload": payload})
		return string(b)
	}
	lines := []string{
		ev("IssuesEvent", map[string]any{"action": "opened", "issue": map[string]any{"number": 3, "title": "g returns 1", "body": "It should return 2."}}),
		ev("PullRequestEvent", map[string]any{"action": "closed", "number": 4, "pull_request": map[string]any{
			"number": 4, "title": "Return 2", "body": "Closes #3", "user": map[string]any{"login": "alice"},
			"merged": true, "merge_commit_sha": m, "base": map[string]any{"sha": r.Git("rev-parse", m+"^")}, "head": map[string]any{"sha": m}}}),
		ev("PullRequestEvent", map[string]any{"action": "closed", "number": 5, "pull_request": map[string]any{"number": 5, "merged": true, "merge_commit_sha": "ffff"}}),
		`{"type": "PullRequestEvent", "repo": {"name": "acme/gadgets"}, "payload": {}}`,
		`{broken`,
	}
	evFile := writeFile(t, strings.Join(lines, "\n")+"\n")
	sum, err := Run(context.Background(), Config{Repos: []string{r.Dir}, Events: []string{evFile}, Out: t.TempDir(), Runner: "prism"})
	inst := onlyInstance(t, sum, err)
	if inst.ID != "acme/gadgets#4" || inst.Source != schemas.SourceGHArchive || inst.PRUser != "alice" ||
		inst.ProblemStatement != "g returns 1\n\nIt should return 2." || !reflect.DeepEqual(inst.LinkedIssues, []int{3}) {
		t.Errorf("event instance %+v", inst)
	}
	checkApplies(t, r.Dir, inst)
	if sum.Rejected["bad_record"] != 2 {
		t.Errorf("rejected %v, want 2 bad_record", sum.Rejected)
	}
}

func TestMineRejectsNonRepository(t *testing.T) {
	_, err := Run(context.Background(), Config{Repos: []string{t.TempDir()}, Out: t.TempDir(), Runner: "prism"})
	if err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("err = %v", err)
	}
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A staging record gives back the instance it was made from, byte for
// byte, whatever its strings hold, compressed (object stores) or not.
func TestStagingRoundTrip(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprint("compress=", compress), func(t *testing.T) { testStagingRoundTrip(t, compress) })
	}
}

func testStagingRoundTrip(t *testing.T, compress bool) {
	in := []schemas.Instance{
		{SchemaVersion: schemas.Version, ID: "acme/w#2", Repo: "acme/w", PRNumber: 2, ProblemStatement: "caf\xe9 \x00 ünï",
			LinkedIssues: []int{3}, CodeContext: map[string]string{"a.go": strings.Repeat("package a\n", 5000), "b.go": ""},
			OracleNewContent: map[string]string{"a.go": "package a\n// new\n"}, OraclePatch: "--- a/a.go\n+++ b/a.go\n",
			RelevantFiles: []string{"b.go"}, Stats: schemas.ChangeStats{FilesChanged: 1, Hunks: 1}, Source: schemas.SourceGit},
		{SchemaVersion: schemas.Version, ID: "acme/w#10", OraclePatch: "x"},
	}
	var recs []stagedRecord
	for i := range in {
		r := encodeRecord(&in[i], compress)
		if r.PatchKey != mining.PatchKey(in[i].OraclePatch) || len(r.Data) == 0 || r.S2 != compress {
			t.Fatalf("record %d: key %s, compressed %v", i, r.PatchKey, r.S2)
		}
		if compress && i == 0 && len(r.Data) >= r.Size/10 {
			t.Errorf("a repetitive record compressed to %d of %d bytes", len(r.Data), r.Size)
		}
		recs = append(recs, r)
	}
	dir := t.TempDir()
	rows, err := writeStaging(context.Background(), dir, recs)
	if err != nil {
		t.Fatal(err)
	}
	ext := map[bool]string{false: ".bin", true: ".s2"}[compress]
	if len(rows) != 2 || rows[0].File != rows[1].File || rows[1].Off != rows[0].Len || rows[0].S2 != compress || filepath.Base(rows[0].File) != idsName("batch", ext, []string{"acme/w#10", "acme/w#2"}) {
		t.Fatalf("rows %+v", rows)
	}
	var rd stagingReader
	defer rd.close()
	for i := len(rows) - 1; i >= 0; i-- { // any order
		var got schemas.Instance
		if err := rd.read(rows[i], &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in[i]) {
			t.Errorf("record %d: got %+v", i, got)
		}
	}
	// A damaged record is an error naming the file, not a wrong row.
	os.WriteFile(rows[0].File, make([]byte, rows[1].Off+rows[1].Len), 0o644)
	var rd2 stagingReader
	defer rd2.close()
	var got schemas.Instance
	if err := rd2.read(rows[1], &got); err == nil || !strings.Contains(err.Error(), rows[1].File) {
		t.Errorf("damaged record: %v", err)
	}
}

func TestBlobCache(t *testing.T) {
	var nilCache *blobCache
	if b := nilCache.put("r", "a", []byte("x")); b.data != "x" || !b.text {
		t.Errorf("the nil cache's put: %+v", b)
	}
	if _, _, ok := nilCache.get("r", "a"); ok {
		t.Error("the nil cache holds entries")
	}
	var c blobCache
	c.put("r", "a", []byte("alpha")) // put takes the slice over
	c.put("r", "b", []byte("bin\x00ary"))
	c.put("r", "c", []byte("caf\xe9"))
	if s, text, ok := c.get("r", "a"); !ok || !text || s != "alpha" {
		t.Errorf("a: %q %v %v", s, text, ok)
	}
	for _, id := range []string{"b", "c"} { // binary, not UTF-8
		if s, text, ok := c.get("r", id); !ok || text || s == "" {
			t.Errorf("%s: %q text %v ok %v", id, s, text, ok)
		}
	}
	// Entries are per repository: a damaged clone still misses what
	// another repository has.
	if _, _, ok := c.get("other", "a"); ok {
		t.Error("entry shared across repositories")
	}
	// The cache stays within its bound however much goes through it.
	big := []byte(strings.Repeat("x", blobCacheBytes/16))
	for i := range 100 {
		c.put("r", fmt.Sprint("blob", i), big)
		if c.bytes > blobCacheBytes {
			t.Fatalf("after %d puts: %d bytes cached, bound %d", i+1, c.bytes, blobCacheBytes)
		}
	}
	if s, _, ok := c.get("r", "blob99"); !ok || s != string(big) {
		t.Error("the newest entry was evicted")
	}
	// Too large to cache at all.
	c.put("r", "huge", []byte(strings.Repeat("x", blobCacheBytes/4)))
	if _, _, ok := c.get("r", "huge"); ok {
		t.Error("cached a blob larger than blobCacheBytes/8")
	}
}

// TestBlobCacheImports checks the import targets memoized in the blob
// cache: what mining.ImportTargets says for the same path and module,
// asked again at another path or module, and counted in the bound.
func TestBlobCacheImports(t *testing.T) {
	var c blobCache
	src := "from . import views\nimport pkg.models\n"
	c.put("r", "py", []byte(src))
	want := mining.ImportTargets("pkg/app.py", src, "")
	before := c.bytes
	for range 2 {
		if got := c.importTargets("r", "py", "pkg/app.py", src, ""); !reflect.DeepEqual(got, want) {
			t.Fatalf("importTargets = %v, want %v", got, want)
		}
	}
	if c.bytes <= before {
		t.Errorf("the memo is not counted: %d bytes before, %d after", before, c.bytes)
	}
	// The same blob at another path imports relative to that path.
	if got, want := c.importTargets("r", "py", "other/app.py", src, ""), mining.ImportTargets("other/app.py", src, ""); !reflect.DeepEqual(got, want) {
		t.Errorf("at another path: %v, want %v", got, want)
	}
	goSrc := "package a\nimport \"example.com/m/b\"\n"
	c.put("r", "go", []byte(goSrc))
	c.importTargets("r", "go", "a/a.go", goSrc, "")
	if got := c.importTargets("r", "go", "a/a.go", goSrc, "example.com/m"); !reflect.DeepEqual(got, []string{"b/"}) {
		t.Errorf("with a module: %v", got)
	}
	// A blob the cache does not hold, and the nil cache, still answer.
	var nilCache *blobCache
	for _, cc := range []*blobCache{&c, nilCache} {
		if got := cc.importTargets("r", "absent", "pkg/app.py", src, ""); !reflect.DeepEqual(got, want) {
			t.Errorf("uncached: %v", got)
		}
	}
	// Memos stay within the bound.
	big := strings.Repeat("import m\n", blobCacheBytes/16/9)
	for i := range 40 {
		id := fmt.Sprint("big", i)
		c.put("r", id, []byte(big))
		c.importTargets("r", id, "x.py", big, "")
		if c.bytes > blobCacheBytes {
			t.Fatalf("after %d memos: %d bytes, bound %d", i+1, c.bytes, blobCacheBytes)
		}
	}
	total := 0
	for k, b := range c.m {
		total += b.size(k)
	}
	if total != c.bytes {
		t.Errorf("accounted %d bytes, entries hold %d", c.bytes, total)
	}
}

// TestStagingCarriesEveryField round-trips an instance whose every field
// is set: a field added to schemas.Instance but not to the staging coder
// fails here.
func TestStagingCarriesEveryField(t *testing.T) {
	var in schemas.Instance
	bincodetest.Fill(t, reflect.ValueOf(&in).Elem())
	for _, compress := range []bool{false, true} {
		r := encodeRecord(&in, compress)
		var got schemas.Instance
		if _, err := decodeRecord(r.Data, nil, compress, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("round trip (compressed %v) changed the instance:\n got %+v\nwant %+v", compress, got, in)
		}
	}
	// Nil and empty lists and maps stay apart.
	empty := schemas.Instance{LinkedIssues: []int{}, CodeContext: map[string]string{}, RelevantFiles: []string{}}
	var got schemas.Instance
	if _, err := decodeRecord(encodeRecord(&empty, true).Data, nil, true, &got); err != nil || !reflect.DeepEqual(got, empty) {
		t.Errorf("empty lists and maps: %+v, %v", got, err)
	}
}

// FuzzReadInstance: arbitrary bytes never panic the staging decoder, and
// what it accepts encodes to bytes that decode to the same instance.
func FuzzReadInstance(f *testing.F) {
	var in schemas.Instance
	bincodetest.Fill(f, reflect.ValueOf(&in).Elem())
	f.Add(appendInstance(nil, &in))
	f.Add(appendInstance(nil, &schemas.Instance{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v schemas.Instance
		if err := readInstance(b, &v); err != nil {
			return
		}
		var again schemas.Instance
		if err := readInstance(appendInstance(nil, &v), &again); err != nil || !reflect.DeepEqual(again, v) {
			t.Fatalf("re-encoding an accepted record: %v\n got %+v\nwant %+v", err, again, v)
		}
	})
}

// TestStagingRejectsDamage: every truncation of a record, a trailing byte
// and another version are errors, never a panic or a wrong instance.
func TestStagingRejectsDamage(t *testing.T) {
	var in schemas.Instance
	bincodetest.Fill(t, reflect.ValueOf(&in).Elem())
	b := appendInstance(nil, &in)
	for n := range len(b) {
		var v schemas.Instance
		if err := readInstance(b[:n], &v); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(b))
		}
	}
	var v schemas.Instance
	if err := readInstance(append(append([]byte{}, b...), 0), &v); err == nil {
		t.Error("a trailing byte: no error")
	}
	other := append([]byte{}, b...)
	other[0] = stagingVersion + 1
	if err := readInstance(other, &v); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("another version: %v", err)
	}
}

// TestFinalizeCutsLargeGroups: a group of more than 2·minFileRows rows is
// written as one file per writer slot (at most), contiguous id ranges, each
// sorted; every kept row is in exactly one file and emitted exactly once;
// dropped rows are in none; the staging files are removed.
func TestFinalizeCutsLargeGroups(t *testing.T) {
	dir := t.TempDir()
	staging := filepath.Join(dir, ".staging")
	const n = 3*minFileRows + 17
	var rows []stagedRow
	for lo := 0; lo < n; lo += 100 { // several staging files, as build writes them
		var recs []stagedRecord
		for i := lo; i < min(n, lo+100); i++ {
			inst := schemas.Instance{SchemaVersion: schemas.Version, ID: fmt.Sprintf("acme/w#%d", i+1), Repo: "acme/w", PRNumber: i + 1, OraclePatch: fmt.Sprint("patch ", i)}
			recs = append(recs, encodeRecord(&inst, i%2 == 0)) // both forms in one file
		}
		rs, err := writeStaging(context.Background(), staging, recs)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rs...)
	}
	rand.New(rand.NewSource(1)).Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	dropped := []string{"acme/w#5", "acme/w#600"}
	var emitted []string
	f := &finalizeFn{Dir: dir, Emit: true}
	next, nextDrop := 0, 0
	err := f.ProcessElement(context.Background(), "g",
		func(r *stagedRow) bool {
			if next == len(rows) {
				return false
			}
			*r = rows[next]
			next++
			return true
		},
		func(id *string) bool {
			if nextDrop == len(dropped) {
				return false
			}
			*id = dropped[nextDrop]
			nextDrop++
			return true
		},
		func(id string, wire []byte) { emitted = append(emitted, id) },
		func(int, countRow) {})
	if err != nil {
		t.Fatal(err)
	}
	written, err := filepath.Glob(filepath.Join(dir, "part-*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if want := min(cap(writers), n/minFileRows); len(written) != want {
		t.Errorf("%d files, want %d (writer slots %d)", len(written), want, cap(writers))
	}
	seen := map[string]int{}
	var ranges [][2]string // each file's first and last id
	for _, p := range written {
		got, err := parquetio.ReadFile[schemas.Instance](p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < minFileRows {
			t.Errorf("%s: %d rows, fewer than %d", p, len(got), minFileRows)
		}
		for i, inst := range got {
			seen[inst.ID]++
			if i > 0 && !mining.IDLess(got[i-1].ID, inst.ID) {
				t.Fatalf("%s: %s before %s", p, got[i-1].ID, inst.ID)
			}
		}
		ranges = append(ranges, [2]string{got[0].ID, got[len(got)-1].ID})
	}
	sort.Slice(ranges, func(i, j int) bool { return mining.IDLess(ranges[i][0], ranges[j][0]) })
	for i := 1; i < len(ranges); i++ {
		if !mining.IDLess(ranges[i-1][1], ranges[i][0]) {
			t.Errorf("files overlap: %v and %v", ranges[i-1], ranges[i])
		}
	}
	if len(seen) != n-len(dropped) {
		t.Errorf("%d distinct rows in the files, want %d", len(seen), n-len(dropped))
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s in %d files", id, c)
		}
	}
	for _, id := range dropped {
		if seen[id] > 0 {
			t.Errorf("dropped %s was written", id)
		}
	}
	sort.Strings(emitted)
	if distinct := len(slices.Compact(slices.Clone(emitted))); len(emitted) != len(seen) || distinct != len(emitted) {
		t.Errorf("%d emitted (%d distinct), want %d once each", len(emitted), distinct, len(seen))
	}
	if left, _ := os.ReadDir(staging); len(left) != 0 {
		t.Errorf("staging files left: %d", len(left))
	}
}

// TestCutRows checks that finalize's runs cover the rows in order, one
// run for few rows, and nearly equal bytes when sizes differ.
func TestCutRows(t *testing.T) {
	mk := func(sizes ...int64) []stagedRow {
		rows := make([]stagedRow, len(sizes))
		for i, s := range sizes {
			rows[i] = stagedRow{ID: fmt.Sprint(i), Size: s}
		}
		return rows
	}
	check := func(name string, rows []stagedRow, parts, wantRuns int, maxShare float64) {
		t.Helper()
		runs := cutRows(rows, parts)
		if len(runs) != wantRuns {
			t.Fatalf("%s: %d runs, want %d", name, len(runs), wantRuns)
		}
		var total, biggest int64
		i := 0
		for _, run := range runs {
			var b int64
			for _, r := range run {
				if r.ID != rows[i].ID {
					t.Fatalf("%s: row %d is %s, want %s", name, i, r.ID, rows[i].ID)
				}
				i++
				b += r.Size
			}
			total += b
			biggest = max(biggest, b)
		}
		if i != len(rows) {
			t.Fatalf("%s: runs hold %d of %d rows", name, i, len(rows))
		}
		if share := float64(biggest) / float64(total); share > maxShare {
			t.Errorf("%s: the largest run holds %.2f of the bytes, want at most %.2f", name, share, maxShare)
		}
	}
	check("few", mk(5, 6, 7), 4, 1, 1)
	sizes := make([]int64, 4*minFileRows)
	for i := range sizes {
		sizes[i] = int64(1 + i) // later rows larger, as later changes are
	}
	check("growing, 2 parts", mk(sizes...), 2, 2, 0.51)
	check("growing, 4 parts", mk(sizes...), 4, 4, 0.26)
	check("growing, 8 parts", mk(sizes...), 8, 4, 0.26)
	check("zero sizes", mk(make([]int64, 2*minFileRows)...), 2, 2, 1)
}

// A finished run leaves the marker Finished reads; a folder missing one of
// its part files, or a run that stopped after clearing the earlier output,
// is not finished.
func TestFinishedMarksACompleteOutput(t *testing.T) {
	r, _ := history(t)
	out := t.TempDir()
	ctx := context.Background()
	if ok, _, err := Finished(ctx, out); ok || err != nil {
		t.Fatalf("an empty folder: finished %v, %v", ok, err)
	}
	sum, err := Run(ctx, Config{Repos: []string{r.Dir}, Out: out, Runner: "prism", Commits: true})
	if err != nil {
		t.Fatal(err)
	}
	ok, n, err := Finished(ctx, out)
	if !ok || err != nil || n != sum.Instances || n == 0 {
		t.Fatalf("after a run of %d instances: finished %v with %d, %v", sum.Instances, ok, n, err)
	}
	// A run that clears the earlier output and is killed before it
	// finishes: the marker went first.
	if err := clearOutput(ctx, filepath.Join(out, "instances"), filepath.Join(out, "deadletter", "mine.parquet")); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := Finished(ctx, out); ok {
		t.Fatal("finished after the output was cleared")
	}
	if _, err := Run(ctx, Config{Repos: []string{r.Dir}, Out: out, Runner: "prism", Commits: true}); err != nil {
		t.Fatal(err)
	}
	os.Remove(sum.Files[0])
	if ok, _, _ := Finished(ctx, out); ok {
		t.Fatalf("finished with %s removed", sum.Files[0])
	}
}

package mine

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"swerl/internal/gitio"
	"swerl/internal/gitio/gittest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/mining"
)

// mergeStyles builds a repository with a PR of every merge style, off the
// first-parent line as well as on it: a maintenance branch 1.0.x with its
// own PRs merged forward into main, a squash merge backported to 1.0.x, one
// PR branch merged into both branches, a rebase merge, a merge commit whose
// subject ends in "(#N)", a one-parent commit "Merge pull request #N from
// …", a human PR with a bot co-author, and a branch 2.0.x that HEAD does not
// reach.
func mergeStyles(t *testing.T) *gittest.Repo {
	r := gittest.New(t)
	r.Git("remote", "add", "origin", "https://github.com/acme/styles.git")
	r.Commit("initial import", map[string]string{
		"app/core.py":  "def core():\n    return 1\n",
		"app/util.py":  "def util():\n    return 2\n",
		"app/extra.py": "def extra():\n    return 3\n",
	})
	edit := func(file, body string) map[string]string {
		return map[string]string{file: body + "\n"}
	}
	r.Git("branch", "1.0.x")
	// #29: one PR branch merged into both branches, 1.0.x first.
	r.Git("checkout", "-q", "-b", "both", "main")
	r.Commit("shared fix", edit("app/shared.py", "def shared():\n    return 29"))
	r.MergePRInto(29, "both", "1.0.x", "Shared fix")
	// #20: a merge commit into 1.0.x.
	r.Git("checkout", "-q", "-b", "maint-fix", "1.0.x")
	r.Commit("fix core on 1.0.x", edit("app/core.py", "def core():\n    return 20"))
	r.MergePRInto(20, "maint-fix", "1.0.x", "Fix core for 1.0")
	// #21: a squash merge into 1.0.x.
	r.Git("checkout", "-q", "1.0.x")
	r.Commit("Fix util on 1.0 (#21)", edit("app/util.py", "def util():\n    return 21"))
	// #22: a merge commit into main.
	r.PR(22, "feat22", "feature 22", edit("app/f22.py", "def f22():\n    return 22"), "Add f22")
	// #23: a squash merge into main, later backported to 1.0.x.
	r.Git("checkout", "-q", "main")
	squash23 := r.Commit("Make extra faster (#23)", edit("app/extra.py", "def extra():\n    return 23"))
	// #24: a rebase merge of two commits; the last names the PR.
	r.Git("checkout", "-q", "-b", "rebased", "main")
	r.Commit("rebase part one", edit("app/r1.py", "def r1():\n    return 241"))
	r.Commit("Add r2 on top of r1 (#24)", edit("app/r2.py", "from app.r1 import r1\n\ndef r2():\n    return r1()"))
	r.Git("checkout", "-q", "main")
	r.Commit("main moves on", edit("app/m.py", "def m():\n    return 0"))
	r.RebasePR("rebased", "main")
	// #25: a merge commit whose subject is the PR's title with "(#25)".
	r.Git("checkout", "-q", "-b", "feat25", "main")
	r.Commit("feature 25", edit("app/f25.py", "def f25():\n    return 25"))
	r.Git("checkout", "-q", "main")
	r.Git("merge", "-q", "--no-ff", "-m", "Add f25 (#25)\n\nA merge with an edited message.", "feat25")
	// #26: a one-parent commit with a merge subject.
	r.Commit("Merge pull request #26 from someone/linear\n\nLinear f26", edit("app/f26.py", "def f26():\n    return 26"))
	// #27: a human PR that pre-commit.ci pushed a fix-up to.
	r.Commit("Fix core on main (#27)\n\n* fix core\n\n* [pre-commit.ci] auto fixes from pre-commit.com hooks\n\nCo-authored-by: pre-commit-ci[bot] <66853113+pre-commit-ci[bot]@users.noreply.github.com>",
		edit("app/core.py", "def core():\n    return 27"))
	// #31: a squash merge whose title was wrapped onto a second line; git's
	// subject (%s) joins the first paragraph.
	r.Commit("Make util return the PR\nnumber it came from (#31)\n\nThe body.", edit("app/util.py", "def util():\n    return 31"))
	// #29 again, into main, later than into 1.0.x.
	r.MergePRInto(29, "both", "main", "Shared fix")
	// The backport of #23 to 1.0.x, then 1.0.x merged forward.
	r.Git("checkout", "-q", "1.0.x")
	r.Git("cherry-pick", "-x", squash23)
	r.Git("checkout", "-q", "main")
	r.Git("merge", "-q", "--no-ff", "-X", "ours", "-m", "Merge branch '1.0.x'", "1.0.x")
	// #30: only on 2.0.x, which HEAD does not reach.
	r.Git("checkout", "-q", "-b", "2.0.x", "main")
	r.Commit("Add f30 (#30)", edit("app/f30.py", "def f30():\n    return 30"))
	r.Git("checkout", "-q", "main")
	return r
}

// reachablePRs is the oracle: the distinct PR numbers in the subjects of
// every commit reachable from revs, merge commits "Merge pull request #N"
// and "(#N)" subjects, read with git itself.
func reachablePRs(t *testing.T, r *gittest.Repo, revs ...string) []int {
	t.Helper()
	mergeRE := regexp.MustCompile(`^Merge pull request #(\d+) from`)
	squashRE := regexp.MustCompile(`\(#(\d+)\)\s*$`)
	set := map[int]bool{}
	for _, s := range strings.Split(r.Git(append([]string{"log", "--format=%s"}, revs...)...), "\n") {
		m := mergeRE.FindStringSubmatch(s)
		if m == nil {
			m = squashRE.FindStringSubmatch(s)
		}
		if m != nil {
			n, _ := strconv.Atoi(m[1])
			set[n] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func TestScanFindsEveryReachablePR(t *testing.T) {
	r := mergeStyles(t)
	for _, tc := range []struct {
		refs []string
		revs []string
	}{
		{nil, []string{"HEAD"}},
		{[]string{"2.0.x"}, []string{"HEAD", "2.0.x"}},
		{[]string{"refs/heads/*"}, []string{"--branches"}},
	} {
		var found []int
		cands := map[int]Candidate{}
		rejected := map[string][]string{}
		err := scanRepo(context.Background(), r.Dir, nil, scanConfig{Refs: tc.refs}, func(c Candidate) {
			if _, dup := cands[c.Number]; dup {
				t.Errorf("refs %v: PR #%d reported twice", tc.refs, c.Number)
			}
			cands[c.Number] = c
			found = append(found, c.Number)
		}, func(rj Rejected) { rejected[rj.Reason] = append(rejected[rj.Reason], rj.ID) })
		if err != nil {
			t.Fatal(err)
		}
		sort.Ints(found)
		want := reachablePRs(t, r, tc.revs...)
		if fixture := []int{20, 21, 22, 23, 24, 25, 26, 27, 29}; !slices.Equal(want[:len(fixture)], fixture) {
			t.Fatalf("the fixture's reachable PRs are %v", want)
		}
		if !slices.Equal(found, want) {
			t.Errorf("refs %v: found PRs %v, reachable %v (rejected %v)", tc.refs, found, want, rejected)
		}
		// #29 (two merge commits) and #23 (a backport) are each kept once.
		twice := rejected[string(mining.MergedTwice)]
		sort.Strings(twice)
		if !slices.Equal(twice, []string{"acme/styles#23", "acme/styles#29"}) || len(rejected) != 1 {
			t.Errorf("refs %v: rejected %v", tc.refs, rejected)
		}
		// The earliest merges are kept: #29 into 1.0.x, #23 on main.
		if c := cands[29]; r.Git("log", "-1", "--format=%s", c.Merge+"^1") != "initial import" {
			t.Errorf("#29 kept at %s, not at its merge into 1.0.x", c.Merge)
		}
		if c := cands[23]; strings.Contains(r.Git("log", "-1", "--format=%B", c.Merge), "cherry picked") {
			t.Errorf("#23 kept at its backport %s", c.Merge)
		}
	}
}

// TestScanReadsTheLogOnceOrTwice: the scan gives the same candidates and
// rejections, in the same order, and counts every commit once, whether it
// keeps the first pass's commits or (past keptCommitBytes) reads the log
// again; with and without plain commits.
func TestScanReadsTheLogOnceOrTwice(t *testing.T) {
	r := mergeStyles(t)
	scan := func(commits bool) (events []string, read int) {
		cfg := scanConfig{Commits: commits, Refs: []string{"refs/heads/*"}, Read: func() { read++ }}
		err := scanRepo(context.Background(), r.Dir, nil, cfg, func(c Candidate) {
			events = append(events, fmt.Sprintf("candidate %s %s base %s", c.ID, c.Kind, c.Base))
		}, func(rj Rejected) { events = append(events, "rejected "+rj.ID+" "+rj.Reason) })
		if err != nil {
			t.Fatal(err)
		}
		return events, read
	}
	commits, _ := strconv.Atoi(strings.TrimSpace(r.Git("rev-list", "--count", "--branches")))
	for _, withCommits := range []bool{false, true} {
		once, readOnce := scan(withCommits)
		saved := keptCommitBytes
		keptCommitBytes = 1
		twice, readTwice := scan(withCommits)
		keptCommitBytes = saved
		if len(once) < 10 || !slices.Equal(once, twice) {
			t.Errorf("commits %v: kept from the first pass:\n%s\nread again:\n%s", withCommits, strings.Join(once, "\n"), strings.Join(twice, "\n"))
		}
		if readOnce != commits || readTwice != commits {
			t.Errorf("commits %v: %d and %d commits counted, %d reachable", withCommits, readOnce, readTwice, commits)
		}
	}
}

func TestMineEveryMergeStyle(t *testing.T) {
	r := mergeStyles(t)
	sum, err := Run(context.Background(), Config{Repos: []string{r.Dir}, Refs: []string{"2.0.x"}, Out: t.TempDir(), Runner: "prism", RelevantFiles: -1})
	if err != nil {
		t.Fatal(err)
	}
	insts := readInstances(t, sum.Files)
	by := map[int]schemas.Instance{}
	var got []int
	for _, inst := range insts {
		by[inst.PRNumber] = inst
		got = append(got, inst.PRNumber)
		checkApplies(t, r.Dir, inst)
	}
	sort.Ints(got)
	// Every PR is a code change, none is a bot's: all become instances.
	if want := reachablePRs(t, r, "HEAD", "2.0.x"); !slices.Equal(got, want) {
		t.Fatalf("instances for PRs %v, want %v\n%s", got, want, sum)
	}
	if sum.Rejected[string(mining.MergedTwice)] != 2 || sum.PRs != int64(len(got)) {
		t.Errorf("summary %+v", sum)
	}
	files := func(n int) []string { return schemas.SortedPaths(by[n].OracleNewContent) }
	// The rebase merge spans both of its commits, not the last alone.
	if f := files(24); !slices.Equal(f, []string{"app/r1.py", "app/r2.py"}) {
		t.Errorf("#24 changes %v", f)
	}
	// Merge commits, with either subject, are their branch's change.
	for n, want := range map[int]string{20: "app/core.py", 22: "app/f22.py", 25: "app/f25.py", 29: "app/shared.py", 26: "app/f26.py", 21: "app/util.py", 30: "app/f30.py"} {
		if f := files(n); !slices.Equal(f, []string{want}) {
			t.Errorf("#%d changes %v, want [%s]", n, f, want)
		}
	}
	if by[31].PRTitle != "Make util return the PR number it came from" || by[31].PRBody != "The body." {
		t.Errorf("#31 title %q body %q", by[31].PRTitle, by[31].PRBody)
	}
	if by[25].PRTitle != "Add f25" || by[26].PRTitle != "Linear f26" || by[27].PRTitle != "Fix core on main" {
		t.Errorf("titles %q %q %q", by[25].PRTitle, by[26].PRTitle, by[27].PRTitle)
	}
}

// TestMineRepositoryURLs mines a repository by file:// URL next to one that
// cannot be cloned: the good one gives the same instances as its local
// path, the bad one is a dead letter, the run succeeds and no clone is
// left behind.
func TestMineRepositoryURLs(t *testing.T) {
	r := mergeStyles(t)
	local, err := Run(context.Background(), Config{Repos: []string{r.Dir}, Out: t.TempDir(), Runner: "prism", RelevantFiles: -1})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	bad := "file://" + t.TempDir() + "/missing.git"
	var progress strings.Builder
	sum, err := Run(context.Background(), Config{Repos: []string{"file://" + r.Dir, bad}, Out: out, Runner: "prism", RelevantFiles: -1,
		Progress: &progress, ProgressEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A line for each repository as it finishes: the good one with what
	// the summary counts (instances before deduplication), the bad one a
	// dead letter.
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	slices.Sort(lines)
	good := fmt.Sprintf("mine: repo %s: %d PRs, %d instances, 0 dead letters, ", gitio.NameFromURL("file://"+r.Dir), sum.PRs, sum.Instances+sum.Rejected[string(mining.Duplicate)])
	gone := fmt.Sprintf("mine: repo %s: 0 PRs, 0 instances, 1 dead letters, ", gitio.NameFromURL(bad))
	want := []string{good, gone}
	slices.Sort(want)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], want[0]) || !strings.HasPrefix(lines[1], want[1]) || !strings.HasSuffix(lines[0], "s") {
		t.Errorf("progress lines:\n%s\nwant them to start\n%s", progress.String(), strings.Join(want, "\n"))
	}
	if sum.PRs == 0 {
		t.Error("no PRs found")
	}
	type change struct {
		n     int
		patch string
	}
	changes := func(files []string) []change {
		var cs []change
		for _, inst := range readInstances(t, files) {
			cs = append(cs, change{inst.PRNumber, inst.OraclePatch})
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].n < cs[j].n })
		return cs
	}
	if got, want := changes(sum.Files), changes(local.Files); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("by URL %d instances, by path %d, or they differ", len(got), len(want))
	}
	if sum.Repos != 2 || sum.Rejected[string(mining.GitError)] != 1 {
		t.Errorf("summary %+v", sum)
	}
	dead, err := parquetio.ReadFile[schemas.DeadLetter](sum.DeadLetters)
	if err != nil || len(dead) != 1 || dead[0].Key != bad || !strings.Contains(dead[0].Reason, "clone") {
		t.Errorf("dead letters %+v %v", dead, err)
	}
	if _, err := os.Stat(filepath.Join(out, cloneDir)); !os.IsNotExist(err) {
		t.Errorf("clones left behind: %v", err)
	}
}

// TestMinePartialCloneIsOneDeadLetter mines a blob:none partial clone:
// every change's blobs are missing and swerl does not fetch them lazily,
// so the repository is one dead letter saying so, not one git error a
// candidate, and the run goes on with the other repositories.
func TestMinePartialCloneIsOneDeadLetter(t *testing.T) {
	r := mergeStyles(t)
	r.Git("config", "uploadpack.allowFilter", "true")
	partial := filepath.Join(t.TempDir(), "partial.git")
	r.Git("clone", "-q", "--bare", "--filter=blob:none", "file://"+r.Dir, partial)
	other := gittest.New(t)
	other.Git("remote", "add", "origin", "https://github.com/acme/other.git")
	other.Commit("init", map[string]string{"a.go": "package a\n\nvar A = 1\n"})
	other.PR(1, "fix", "fix", map[string]string{"a.go": "package a\n\nvar A = 2\n"}, "Set A to 2")
	sum, err := Run(context.Background(), Config{Repos: []string{partial, other.Dir}, Out: t.TempDir(), Runner: "prism", RelevantFiles: -1})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := parquetio.ReadFile[schemas.DeadLetter](sum.DeadLetters)
	if err != nil || len(dead) != 1 || !strings.Contains(dead[0].Reason, "partial clone") {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
	if sum.Instances != 1 || sum.Repos != 2 || sum.Rejected[string(mining.GitError)] != 1 {
		t.Errorf("summary %+v", sum)
	}
}

// TestBuildInNoRepositoryIsAGitError: a candidate whose directory is not
// (or no longer) a repository is rejected as a git error that says so,
// once a candidate, whether the directory exists or not; the build is not
// stopped.
func TestBuildInNoRepositoryIsAGitError(t *testing.T) {
	f := &buildFn{}
	defer f.Teardown()
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "gone")} {
		for i := range 2 {
			c := Candidate{RepoDir: dir, Repo: "acme/gone", ID: fmt.Sprintf("acme/gone#%d", i+1), Number: i + 1,
				Base: strings.Repeat("a", 40), Head: strings.Repeat("b", 40), Merge: strings.Repeat("c", 40)}
			_, r := f.buildOne(c)
			if r == nil || r.Reason != string(mining.GitError) || r.ID != c.ID {
				t.Fatalf("%s in %s: rejection %+v", c.ID, dir, r)
			}
			if !strings.Contains(r.Detail, "not a git repository") && !strings.Contains(r.Detail, "no such file") {
				t.Errorf("%s in %s: %q does not say why", c.ID, dir, r.Detail)
			}
		}
	}
}

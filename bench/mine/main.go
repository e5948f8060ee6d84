// Command mine benchmarks `swerl mine` against its floor, `git log -p` over
// the same history, on generated repositories.
//
// For each size it writes a repository with git fast-import: a few hundred
// Go and Python files of realistic length, and history made of pull
// requests (a branch of one or two commits merged with a GitHub-style
// "Merge pull request #N from …" commit, main sometimes moving in between so
// merge bases are not first parents), squash merges "(#N)" and plain
// commits. It then runs `git log -p` (output discarded) and the swerl
// binary, alternating, -rounds times (the floor varies from run to run on
// a shared box), and reports the medians: wall times, their ratio,
// instances per second, CPU time (user + system, children included) and
// peak RSS of each.
//
//	go run ./bench/mine -sizes 5000,20000 -swerl ./swerl
//
// With -repos it benches existing repositories instead (their PRs counted
// as the distinct PR numbers of the subjects reachable from HEAD), and with
// -base it runs a second binary in turn on each, for before/after ratios:
//
//	go run ./bench/mine -repos /src/flask -swerl ./swerl -base ./swerl-main
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	sizes := flag.String("sizes", "5000,20000", "commit counts of the generated repositories")
	swerl := flag.String("swerl", "", "swerl binary (default: build ./cmd/swerl)")
	dir := flag.String("dir", "", "work directory (default: a temporary one, removed)")
	files := flag.Int("files", 300, "files in each repository")
	rounds := flag.Int("rounds", 3, "runs of git log -p and swerl mine, alternating, on each repository (medians are reported)")
	repos := flag.String("repos", "", "comma-separated local repositories to bench instead of generated ones (commits and PRs: reachable from HEAD)")
	base := flag.String("base", "", "a second swerl binary (e.g. the previous main) run in turn with -swerl on each repository, for a side-by-side ratio")
	flag.Parse()
	work := *dir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "swerl-bench-mine-"); err != nil {
			fail(err)
		}
		defer os.RemoveAll(work)
	}
	bin := *swerl
	if bin == "" {
		bin = filepath.Join(work, "swerl")
		run("", "go", "build", "-o", bin, "./cmd/swerl")
	}
	bins := []string{bin}
	if *base != "" {
		bins = append(bins, *base)
	}
	fmt.Printf("%-8s %-8s %-10s %-10s %-7s %-10s %-12s %-10s %-10s %-12s %-12s %s\n", "commits", "PRs", "git log -p", "swerl", "ratio", "instances", "instances/s", "CPU git", "CPU swerl", "RSS git", "RSS swerl", "binary")
	type target struct {
		repo     string
		commits  int
		prs      int
		outLabel string
	}
	var targets []target
	if *repos != "" {
		for i, r := range strings.Split(*repos, ",") {
			n, prs := reachable(r)
			targets = append(targets, target{r, n, prs, strconv.Itoa(i)})
		}
	} else {
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				fail(err)
			}
			repo := filepath.Join(work, fmt.Sprintf("repo-%d", n))
			targets = append(targets, target{repo, n, generate(repo, n, *files), strconv.Itoa(n)})
		}
	}
	for _, tg := range targets {
		out := filepath.Join(work, "out-"+tg.outLabel)
		// Rounds alternate the floor and each binary, so a change in the
		// box's load between them shows in all; medians are reported.
		var gits []usage
		mines := make([][]usage, len(bins))
		insts := make([]int, len(bins))
		for range max(1, *rounds) {
			gits = append(gits, measure(tg.repo, io.Discard, "git", "log", "-p"))
			for b, exe := range bins {
				var so strings.Builder
				mines[b] = append(mines[b], measure(tg.repo, &so, exe, "mine", "--repo", tg.repo, "--out", out, "--metrics-addr", "", "--exclude-swebench=false"))
				insts[b] = 0
				for _, l := range strings.Split(so.String(), "\n") {
					if i := strings.Index(l, " instances in "); i > 0 {
						f := strings.Fields(l[:i])
						insts[b], _ = strconv.Atoi(f[len(f)-1])
					}
				}
				if insts[b] == 0 {
					fmt.Fprintf(os.Stderr, "swerl mine output:\n%s\n", so.String())
				}
			}
		}
		g := median(gits)
		for b, exe := range bins {
			m, inst := median(mines[b]), insts[b]
			fmt.Printf("%-8d %-8d %-10s %-10s %-7.2f %-10d %-12.0f %-10s %-10s %-12s %-12s %s\n", tg.commits, tg.prs, g.wall.Round(time.Millisecond), m.wall.Round(time.Millisecond),
				m.wall.Seconds()/g.wall.Seconds(), inst, float64(inst)/m.wall.Seconds(), g.cpu.Round(10*time.Millisecond), m.cpu.Round(10*time.Millisecond), mib(g.rss), mib(m.rss), filepath.Base(exe))
		}
	}
}

// reachable counts the commits reachable from HEAD in repo and the distinct
// PR numbers their subjects name ("Merge pull request #N from …" and
// "… (#N)"), the PRs the miner should find.
func reachable(repo string) (commits, prs int) {
	cmd := exec.Command("git", "log", "--format=%s", "HEAD")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		fail(fmt.Errorf("%s: git log: %v", repo, err))
	}
	seen := map[string]bool{}
	for _, s := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		commits++
		if m := mergeRE.FindStringSubmatch(s); m != nil {
			seen[m[1]] = true
		} else if m := squashRE.FindStringSubmatch(s); m != nil {
			seen[m[1]] = true
		}
	}
	return commits, len(seen)
}

var (
	mergeRE  = regexp.MustCompile(`^Merge pull request #([0-9]+) from`)
	squashRE = regexp.MustCompile(`\(#([0-9]+)\)\s*$`)
)

// usage is what one run of a command took.
type usage struct {
	wall, cpu time.Duration // cpu: user + system, waited children included
	rss       int64         // peak, KiB
}

// median takes each field's median over the runs (the upper one of an even
// count).
func median(us []usage) usage {
	pick := func(key func(usage) int64) int64 {
		xs := make([]int64, len(us))
		for i, u := range us {
			xs[i] = key(u)
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		return xs[len(xs)/2]
	}
	return usage{
		wall: time.Duration(pick(func(u usage) int64 { return int64(u.wall) })),
		cpu:  time.Duration(pick(func(u usage) int64 { return int64(u.cpu) })),
		rss:  pick(func(u usage) int64 { return u.rss }),
	}
}

func mib(kb int64) string { return fmt.Sprintf("%.0f MiB", float64(kb)/1024) }

// measure runs a command in dir and returns what it took.
func measure(dir string, stdout io.Writer, name string, args ...string) usage {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = stdout
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		fail(fmt.Errorf("%s %v: %v\n%s", name, args, err, stderr.String()))
	}
	wall := time.Since(start)
	ps := cmd.ProcessState
	return usage{wall: wall, cpu: ps.UserTime() + ps.SystemTime(), rss: ps.SysUsage().(*syscall.Rusage).Maxrss}
}

func run(dir, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		fail(fmt.Errorf("%s %v: %v\n%s", name, args, err, out))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/mine:", err)
	os.Exit(1)
}

// generator writes a fast-import stream.
type generator struct {
	w     *bufio.Writer
	rng   *rand.Rand
	mark  int
	clock int64
	files map[string][]string // main's content
	paths []string
	main  int // mark of main's tip
}

func (g *generator) next() int { g.mark++; return g.mark }

func (g *generator) commit(ref, msg string, from int, merge int, changes map[string][]string) int {
	blobs := map[string]int{}
	for _, p := range sortedKeys(changes) {
		m := g.next()
		content := strings.Join(changes[p], "")
		fmt.Fprintf(g.w, "blob\nmark :%d\ndata %d\n%s\n", m, len(content), content)
		blobs[p] = m
	}
	m := g.next()
	g.clock += 60
	fmt.Fprintf(g.w, "commit %s\nmark :%d\nauthor Dev <dev@example.com> %d +0000\ncommitter Dev <dev@example.com> %d +0000\ndata %d\n%s\n", ref, m, g.clock, g.clock, len(msg), msg)
	if from > 0 {
		fmt.Fprintf(g.w, "from :%d\n", from)
	}
	if merge > 0 {
		fmt.Fprintf(g.w, "merge :%d\n", merge)
	}
	for _, p := range sortedKeys(blobs) {
		fmt.Fprintf(g.w, "M 100644 :%d %s\n", blobs[p], p)
	}
	g.w.WriteString("\n")
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (g *generator) line(p string) string {
	n := g.rng.Intn(100000)
	if strings.HasSuffix(p, ".py") {
		return fmt.Sprintf("    value_%d = compute(%d, %q)\n", n, n%97, "k"+strconv.Itoa(n%13))
	}
	return fmt.Sprintf("\tv%d := compute(%d, %q)\n", n, n%97, "k"+strconv.Itoa(n%13))
}

// edit returns a changed copy of a file: a few lines replaced, inserted or
// deleted.
func (g *generator) edit(p string, lines []string) []string {
	out := append([]string(nil), lines...)
	for k := 1 + g.rng.Intn(4); k > 0; k-- {
		i := 2 + g.rng.Intn(len(out)-3)
		switch g.rng.Intn(3) {
		case 0:
			out[i] = g.line(p)
		case 1:
			out = append(out[:i], append([]string{g.line(p), g.line(p)}, out[i:]...)...)
		default:
			if len(out) > 20 {
				out = append(out[:i], out[i+1:]...)
			}
		}
	}
	return out
}

// generate writes a repository of about n commits and returns its PR count.
func generate(repo string, n, nfiles int) int {
	os.RemoveAll(repo)
	run("", "git", "init", "-q", "-b", "main", repo)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = repo
	in, _ := cmd.StdinPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	g := &generator{w: bufio.NewWriterSize(in, 1<<20), rng: rand.New(rand.NewSource(int64(n))), clock: 1600000000, files: map[string][]string{}}
	initial := map[string][]string{}
	for i := 0; i < nfiles; i++ {
		ext := ".go"
		if i%3 == 0 {
			ext = ".py"
		}
		p := fmt.Sprintf("pkg%02d/file%03d%s", i%25, i, ext)
		lines := []string{"// generated\n", "package x\n"}
		for k := 0; k < 80+g.rng.Intn(300); k++ {
			lines = append(lines, g.line(p))
		}
		initial[p] = lines
		g.files[p] = lines
		g.paths = append(g.paths, p)
	}
	g.main = g.commit("refs/heads/main", "initial import\n", 0, 0, initial)
	commits, prs := 1, 0
	pick := func(k int) map[string][]string {
		ch := map[string][]string{}
		for len(ch) < k {
			p := g.paths[g.rng.Intn(len(g.paths))]
			ch[p] = g.edit(p, g.files[p])
		}
		return ch
	}
	for commits < n {
		prs++
		switch r := g.rng.Intn(10); {
		case r < 6: // a merged PR branch
			ref := fmt.Sprintf("refs/heads/pr-%d", prs)
			tip := g.main
			var touched map[string][]string
			for c := 0; c < 1+g.rng.Intn(2); c++ {
				ch := pick(1 + g.rng.Intn(3))
				tip = g.commit(ref, fmt.Sprintf("work on #%d step %d\n", prs, c), tip, 0, ch)
				commits++
				if touched == nil {
					touched = map[string][]string{}
				}
				for p, l := range ch {
					touched[p] = l
				}
			}
			if g.rng.Intn(3) == 0 { // main moves on a file the PR does not touch
				var ch map[string][]string
				for {
					ch = pick(1)
					clash := false
					for p := range ch {
						_, clash = touched[p]
					}
					if !clash {
						break
					}
				}
				g.main = g.commit("refs/heads/main", "direct fix on main\n", g.main, 0, ch)
				commits++
				for p, l := range ch {
					g.files[p] = l
				}
			}
			msg := fmt.Sprintf("Merge pull request #%d from dev/feature-%d\n\nImprove compute path %d\n\nFixes #%d\n", prs, prs, prs, prs+100000)
			g.main = g.commit("refs/heads/main", msg, g.main, tip, touched)
			commits++
			for p, l := range touched {
				g.files[p] = l
			}
		case r < 9: // a squash merge
			ch := pick(1 + g.rng.Intn(3))
			g.main = g.commit("refs/heads/main", fmt.Sprintf("Refine compute %d (#%d)\n\nCloses #%d\n", prs, prs, prs+100000), g.main, 0, ch)
			commits++
			for p, l := range ch {
				g.files[p] = l
			}
		default: // a plain commit
			prs--
			ch := pick(1)
			g.main = g.commit("refs/heads/main", "tweak\n", g.main, 0, ch)
			commits++
			for p, l := range ch {
				g.files[p] = l
			}
		}
	}
	g.w.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil {
		fail(err)
	}
	run(repo, "git", "reset", "-q", "--hard", "main")
	return prs
}

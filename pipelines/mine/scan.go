package mine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"swerl/internal/gitio"
	"swerl/schemas"
	"swerl/transforms/mining"
	"swerl/transforms/mining/ghevents"
)

// Candidate kinds.
const (
	kindMerge       = "merge"        // a merge commit "Merge pull request #N from …"
	kindMergeSquash = "merge-squash" // a merge commit whose subject ends in "(#N)"
	kindMergeLinear = "merge-linear" // a one-parent commit "Merge pull request #N from …"
	kindSquash      = "squash"       // a one-parent "title (#N)": a squash merge or the last commit of a rebase merge
	kindEvent       = "event"        // a merged PullRequestEvent's merge commit
	kindCommit      = "commit"       // any other first-parent commit (Config.Commits)
)

// SourceCommit is the Instance.Source of a plain commit (Config.Commits).
const SourceCommit = "commit"

// emptyTree is git's id of the empty tree: the base of a root commit.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// maxRebaseRun caps how many commits one rebase merge is taken to span.
const maxRebaseRun = 250

// Candidate is a PR or commit found in history, before its files are read.
type Candidate struct {
	RepoDir          string
	Repo             string
	Kind             string
	ID               string
	Number           int
	Source           string
	Base             string
	Head             string
	Merge            string
	Title            string
	Body             string
	User             string
	CreatedAt        string
	ProblemStatement string
	LinkedIssues     []int
}

// Rejected is a candidate (or input record) that did not become an instance.
type Rejected struct {
	Repo   string
	ID     string
	Reason string
	Detail string
}

// scanConfig is what the scan stage needs from Config.
type scanConfig struct {
	Commits bool
	Exclude *mining.Exclude
	// Refs are mined besides HEAD: revisions or for-each-ref patterns
	// (gitio.Repo.ResolveRefs).
	Refs []string
	// CloneDir is where repositories given by URL are cloned.
	CloneDir string
	// Read, when set, is called for every commit read.
	Read func()
}

// prMerge is the commit that merged a PR number, and when.
type prMerge struct {
	hash string
	time int64 // committer time; the author date's text when there is no graph
	date string
}

// earlier orders merges by committer time, then author date, then hash, so
// the choice does not depend on the order git lists them in.
func (m prMerge) earlier(o prMerge) bool {
	if m.time != o.time {
		return m.time < o.time
	}
	if m.date != o.date {
		return m.date < o.date
	}
	return m.hash < o.hash
}

// scanRepo walks every commit reachable from HEAD and cfg.Refs, whichever
// branch it was made on, and reports every PR (and, with Commits, every
// other non-merge commit of the refs' first-parent lines) as a Candidate,
// or as Rejected when it can be decided without reading files. A PR number
// merged by several commits (into several branches, or backported) is
// reported once, at its earliest merge; the others are rejected as
// mining.MergedTwice.
func scanRepo(ctx context.Context, dir string, recs []ghevents.Record, cfg scanConfig, out func(Candidate), rej func(Rejected)) error {
	var repo *gitio.Repo
	var err error
	if gitio.IsURL(dir) {
		// A clone in the output directory, which the build workers share
		// as they share the staging files; Run removes it at the end.
		repo, err = gitio.Clone(ctx, dir, filepath.Join(cfg.CloneDir, cloneName(dir)))
	} else {
		repo, err = gitio.Open(ctx, dir)
	}
	if err != nil {
		rej(Rejected{Repo: dir, ID: dir, Reason: string(mining.GitError), Detail: err.Error()})
		return nil
	}
	gitFault := func(err error) {
		rej(Rejected{Repo: repo.Name, ID: repo.Name, Reason: string(mining.GitError), Detail: err.Error()})
	}
	if remote := partialClone(ctx, repo.Dir); remote != "" {
		// Every build would fail on a missing blob: say why once, for the
		// repository, instead of once a candidate.
		gitFault(fmt.Errorf("%s: a partial clone (promisor remote %q): mining reads the blobs of every change, which swerl does not fetch lazily (GIT_NO_LAZY_FETCH); clone it without --filter", repo.Name, remote))
		return nil
	}
	ix := ghevents.NewIndex(recs)
	merged := ix.MergedByCommit()
	tips, missing, err := repo.ResolveRefs(ctx, append([]string{"HEAD"}, cfg.Refs...))
	if err != nil {
		gitFault(err)
		return nil
	}
	for _, m := range missing {
		gitFault(fmt.Errorf("%s: ref %q names no commit", repo.Name, m))
	}
	if len(tips) == 0 {
		return nil
	}
	// The commit graph and the first pass over the log are two git
	// processes: read them at once (each was a third of the scan).
	var graph *gitio.Graph
	var gerr error
	graphRead := make(chan struct{})
	go func() {
		defer close(graphRead)
		graph, gerr = gitio.ReadGraph(ctx, repo, tips...)
	}()
	// The commits the loop below can make candidates of (PR merges, and
	// with Commits every one-parent commit) are kept from the first pass
	// up to keptCommitBytes; past that the log is read again.
	wanted := func(c *gitio.Commit, n int) bool { return n > 0 || cfg.Commits && len(c.Parents) == 1 }
	first, prCommits, kept, err := earliestMerges(ctx, repo, tips, func() *gitio.Graph { <-graphRead; return graph }, merged, wanted, cfg.Read)
	<-graphRead
	if gerr != nil {
		// A damaged history still yields what can be read; say what failed.
		gitFault(gerr)
	}
	if err != nil {
		gitFault(err)
		return nil
	}
	onLine := func(string) bool { return false }
	if cfg.Commits && graph != nil {
		onLine = graph.FirstParentLine(tips...)
	}
	next := func() (*gitio.Commit, bool) {
		if len(kept) == 0 {
			return nil, false
		}
		c := kept[0]
		kept[0], kept = nil, kept[1:]
		return c, true
	}
	var lr *gitio.LogReader
	if kept == nil {
		if lr, err = gitio.LogAll(ctx, repo, tips...); err != nil {
			gitFault(err)
			return nil
		}
		next = lr.Next
	}
	for {
		c, ok := next()
		if !ok {
			break
		}
		kind, n := recognise(c, merged)
		if n > 0 {
			if keep := first[n]; keep.hash != c.Hash {
				id := fmt.Sprintf("%s#%d", repo.Name, n)
				rej(Rejected{Repo: repo.Name, ID: id, Reason: string(mining.MergedTwice), Detail: fmt.Sprintf("%s: merged again by %s; keeping the earlier merge %s", id, c.Hash, keep.hash)})
				continue
			}
		} else if cfg.Commits && len(c.Parents) == 1 && onLine(c.Hash) {
			kind = kindCommit
		} else {
			continue
		}
		cand, ok := classify(repo, c, kind, n, graph, ix, merged, prCommits, rej)
		if !ok {
			continue
		}
		if cfg.Exclude.Match(repo.Name, cand.ID) {
			rej(Rejected{Repo: repo.Name, ID: cand.ID, Reason: string(mining.Excluded), Detail: cand.ID + ": excluded"})
			continue
		}
		out(cand)
	}
	if lr != nil {
		if err := lr.Close(); err != nil {
			gitFault(err)
		}
	}
	return ctx.Err()
}

// partialClone returns the promisor remote of a partial clone (git clone
// --filter=…) in dir, or "" for a complete repository.
// Git marks one by extensions.partialClone (older versions) or
// remote.<name>.promisor (newer ones).
func partialClone(ctx context.Context, dir string) string {
	cmd := exec.CommandContext(ctx, "git", "config", "--get-regexp", `^(extensions\.partialclone|remote\..*\.promisor)$`)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "" // exit status 1: neither is set
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		key, val, _ := strings.Cut(l, " ")
		if key == "extensions.partialclone" {
			return val
		}
		if val == "true" {
			return strings.TrimSuffix(strings.TrimPrefix(key, "remote."), ".promisor")
		}
	}
	return ""
}

// cloneName is the directory a repository URL is cloned to: the name it
// gives and a hash of the URL, so two URLs never share a clone.
func cloneName(url string) string {
	h := sha256.Sum256([]byte(url))
	name := strings.ReplaceAll(gitio.NameFromURL(url), "/", "_")
	return name + "-" + hex.EncodeToString(h[:6])
}

// keptCommitBytes bounds the commits earliestMerges keeps for the scan's
// second pass (hashes, names, dates and messages), so memory stays flat
// however long the history. pallets/flask's 1,522 PR commits take about
// 0.7 MB; a history whose wanted commits exceed it is read a second time.
// A variable so a test can make every history exceed it.
var keptCommitBytes = 16 << 20

// earliestMerges reads the history once without building anything and
// returns, for every PR number, its earliest merge, and the set of commits
// that carry a PR (which end a rebase merge's run, see rebaseBase). It
// also returns, in log order, the commits for which wanted (given the PR
// number recognise found, 0 for none) is true, unless they take more than
// keptCommitBytes: then kept is nil and the caller reads the log again.
// Reading it once saves a git process and its parse, a third of the scan,
// which every build waits for. read, when set, is called for every commit.
func earliestMerges(ctx context.Context, repo *gitio.Repo, tips []string, graph func() *gitio.Graph, merged map[string]ghevents.Record, wanted func(*gitio.Commit, int) bool, read func()) (first map[int]prMerge, prCommits map[string]bool, kept []*gitio.Commit, err error) {
	lr, err := gitio.LogAll(ctx, repo, tips...)
	if err != nil {
		return nil, nil, nil, err
	}
	kept = []*gitio.Commit{}
	keptBytes := 0
	// Every merge of each number, timed once the graph is read (graph
	// waits for it): a number is rarely merged more than twice.
	all := map[int][]prMerge{}
	prCommits = map[string]bool{}
	for {
		c, ok := lr.Next()
		if !ok {
			break
		}
		if read != nil {
			read()
		}
		_, n := recognise(c, merged)
		if kept != nil && wanted(c, n) {
			keptBytes += commitBytes(c)
			kept = append(kept, c)
			if keptBytes > keptCommitBytes {
				kept = nil
			}
		}
		if n <= 0 {
			continue
		}
		prCommits[c.Hash] = true
		all[n] = append(all[n], prMerge{hash: c.Hash, date: c.Date})
	}
	if err := lr.Close(); err != nil {
		return nil, nil, nil, err
	}
	g := graph()
	first = make(map[int]prMerge, len(all))
	for n, ms := range all {
		for i, m := range ms {
			if g != nil {
				m.time, _ = g.Time(m.hash)
			}
			if i == 0 || m.earlier(first[n]) {
				first[n] = m
			}
		}
	}
	return first, prCommits, kept, nil
}

// commitBytes is about what a parsed commit holds.
func commitBytes(c *gitio.Commit) int {
	n := 200 + len(c.Hash) + len(c.Author) + len(c.Email) + len(c.Date) + len(c.Message)
	for _, p := range c.Parents {
		n += 16 + len(p)
	}
	return n
}

// recognise says whether commit c merged a PR, how, and which: a merged
// PullRequestEvent names its merge commit; otherwise the subject does.
// "Merge pull request #N from …" is GitHub's merge commit (or, with one
// parent, that message on a linear commit); "title (#N)" is a squash merge
// or the last commit of a rebase merge, or, on a merge commit, a merge
// whose message was edited to the PR's title. It returns "", 0 for any
// other commit.
func recognise(c *gitio.Commit, merged map[string]ghevents.Record) (kind string, n int) {
	if ev, ok := merged[c.Hash]; ok {
		return kindEvent, ev.Number
	}
	subject, _ := mining.SplitMessage(c.Message)
	if n, _, ok := mining.MergeSubject(subject); ok {
		if len(c.Parents) > 1 {
			return kindMerge, n
		}
		return kindMergeLinear, n
	}
	if n, _, _, ok := squashMessage(c.Message); ok {
		switch len(c.Parents) {
		case 0, 1:
			return kindSquash, n
		case 2:
			return kindMergeSquash, n
		}
	}
	return "", 0
}

// classify turns commit c, recognised as kind (PR number n, or 0 for a
// plain commit), into a Candidate: where its change starts and ends, and
// its title, body and problem statement.
func classify(repo *gitio.Repo, c *gitio.Commit, kind string, n int, graph *gitio.Graph, ix *ghevents.Index, merged map[string]ghevents.Record, prCommits map[string]bool, rej func(Rejected)) (Candidate, bool) {
	subject, body := mining.SplitMessage(c.Message)
	cand := Candidate{RepoDir: repo.Dir, Repo: repo.Name, Kind: kind, Number: n, Merge: c.Hash, CreatedAt: c.Date, User: c.Author, Source: schemas.SourceGit}
	parent := emptyTree
	if len(c.Parents) > 0 {
		parent = c.Parents[0]
	}
	mergeBase := func(a, b string) string {
		if graph == nil {
			return ""
		}
		mb, _ := graph.MergeBase(a, b)
		return mb
	}
	switch kind {
	case kindEvent:
		ev := merged[c.Hash]
		cand.Source = schemas.SourceGHArchive
		cand.Title, cand.Body, cand.User = ev.Title, ev.Body, ev.User
		switch {
		case ev.BaseSHA != "" && ev.HeadSHA != "" && graph != nil && graph.Has(ev.BaseSHA) && graph.Has(ev.HeadSHA):
			cand.Base = mergeBase(ev.BaseSHA, ev.HeadSHA)
			cand.Head = ev.HeadSHA
		case len(c.Parents) > 1:
			cand.Base = mergeBase(c.Parents[0], c.Parents[1])
			cand.Head = c.Parents[1]
		default:
			cand.Base, cand.Head = rebaseBase(graph, c, prCommits), c.Hash
		}
	case kindMerge, kindMergeSquash:
		if kind == kindMerge {
			cand.Title, cand.Body = mining.SplitMessage(body)
		} else {
			_, cand.Title, cand.Body, _ = squashMessage(c.Message)
		}
		cand.Head = c.Parents[1]
		cand.Base = mergeBase(c.Parents[0], c.Parents[1])
	case kindMergeLinear:
		cand.Title, cand.Body = mining.SplitMessage(body)
		cand.Base, cand.Head = parent, c.Hash
	case kindSquash:
		_, cand.Title, cand.Body, _ = squashMessage(c.Message)
		cand.Base, cand.Head = rebaseBase(graph, c, prCommits), c.Hash
	case kindCommit:
		cand.Source, cand.Title, cand.Body = SourceCommit, subject, body
		cand.Base, cand.Head = parent, c.Hash
		cand.ID = repo.Name + "@" + c.Hash[:12]
		cand.ProblemStatement = strings.TrimSpace(c.Message)
		cand.LinkedIssues = mining.LinkedIssues(c.Message, repo.Name, 0)
	default:
		return Candidate{}, false
	}
	if cand.Number > 0 {
		cand.ID = fmt.Sprintf("%s#%d", repo.Name, cand.Number)
		if pr, ok := ix.PRs[cand.Number]; ok && cand.Kind != kindEvent {
			// Events carry the real title, body and author of a PR found in git.
			cand.Title, cand.Body, cand.User = pr.Title, pr.Body, pr.User
		}
		cand.LinkedIssues = mining.LinkedIssues(cand.Title+"\n"+cand.Body, repo.Name, cand.Number)
		cand.ProblemStatement = ix.ProblemStatement(cand.LinkedIssues)
	}
	if cand.Base == "" {
		rej(Rejected{Repo: repo.Name, ID: cand.ID, Reason: string(mining.NoMergeBase), Detail: fmt.Sprintf("%s: no merge base of %v in the readable history", cand.ID, c.Parents)})
		return Candidate{}, false
	}
	cand.Title = strings.ToValidUTF8(cand.Title, "\uFFFD")
	cand.Body = strings.ToValidUTF8(cand.Body, "\uFFFD")
	cand.ProblemStatement = strings.ToValidUTF8(cand.ProblemStatement, "\uFFFD")
	return cand, true
}

// squashMessage parses the message of a "title (#N)" commit: N, the title
// without the reference and the body. The subject is the first line or,
// failing that, git's subject (%s): the first paragraph, lines joined by
// spaces, for a title wrapped onto a second line that ends in "(#N)" only
// there (pytest's #5171); the body is then what follows the paragraph.
func squashMessage(msg string) (n int, title, body string, ok bool) {
	subject, body := mining.SplitMessage(msg)
	if n, title, ok := mining.SquashSubject(subject); ok {
		return n, title, body, true
	}
	para, rest, _ := strings.Cut(strings.TrimLeft(msg, "\n"), "\n\n")
	if n, title, ok := mining.SquashSubject(strings.Join(strings.Fields(para), " ")); ok {
		return n, title, strings.TrimSpace(rest), true
	}
	return 0, "", "", false
}

// rebaseBase returns the base of a one-parent PR commit c: its parent or,
// when c ends a run of one-parent commits that one rebase wrote (the same
// committer in the same second, none of them carrying a PR itself), the
// parent of the run's first commit. GitHub's "Rebase and merge" replays a
// PR's commits so, and the PR's change is all of them; a squash merge's
// parent was committed at another time or carries its own PR.
func rebaseBase(graph *gitio.Graph, c *gitio.Commit, prCommits map[string]bool) string {
	if len(c.Parents) == 0 {
		return emptyTree
	}
	base := c.Parents[0]
	if graph == nil {
		return base
	}
	for range maxRebaseRun {
		ps := graph.Parents(base)
		if len(ps) != 1 || prCommits[base] || !graph.SameCommitter(base, c.Hash) {
			break
		}
		base = ps[0]
	}
	return base
}

// buildConfig is what the build stage needs from Config.
type buildConfig struct {
	Limits   mining.Limits
	Relevant mining.RelevantConfig
	// Blobs caches blobs by object id; nil for none.
	Blobs *blobCache
}

// build reads a candidate's files and turns it into an instance.
func build(cat *gitio.CatFile, cand Candidate, cfg buildConfig) (schemas.Instance, *mining.Rejection) {
	fail := func(err error, what string) (schemas.Instance, *mining.Rejection) {
		r := mining.GitError
		if errors.Is(err, gitio.ErrMissing) {
			r = mining.MissingObject
		}
		return schemas.Instance{}, &mining.Rejection{Reason: r, Detail: fmt.Sprintf("%s: %s: %v", cand.ID, what, err)}
	}
	changes, err := cat.DiffTrees(cand.Base, cand.Head)
	if err != nil {
		return fail(err, "diff "+short(cand.Base)+".."+short(cand.Head))
	}
	if len(changes) > cfg.Limits.Files() {
		return schemas.Instance{}, &mining.Rejection{Reason: mining.TooLarge, Detail: fmt.Sprintf("%s: %d files changed (max %d)", cand.ID, len(changes), cfg.Limits.Files())}
	}
	var files []mining.FileChange
	var revs []string
	var want []*string
	size := 0
	// The blob whose imports count for each changed file: its content at
	// the base, or its new content for a new file (see relevantFiles).
	modIDs := map[string]string{}
	for _, ch := range changes {
		if gitio.IsGitlink(ch.OldMode) || gitio.IsGitlink(ch.NewMode) {
			continue // a submodule pointer has no content here
		}
		files = append(files, mining.FileChange{Path: ch.Path})
		f := &files[len(files)-1]
		if ch.NewHash != gitio.ZeroHash && ch.NewMode != gitio.ModeAbsent {
			f.HasNew = true
			modIDs[ch.Path] = ch.NewHash
		}
		if ch.OldHash != gitio.ZeroHash && ch.OldMode != gitio.ModeAbsent {
			f.HasOld = true
			revs = append(revs, ch.OldHash)
			modIDs[ch.Path] = ch.OldHash
		}
		if f.HasNew {
			revs = append(revs, ch.NewHash)
		}
	}
	for i := range files {
		if files[i].HasOld {
			want = append(want, &files[i].Old)
		}
		if files[i].HasNew {
			want = append(want, &files[i].New)
		}
	}
	got, errs := cfg.Blobs.read(cat, revs)
	for i := range revs {
		if errs[i] != nil {
			return fail(errs[i], "read "+pathOf(files, want[i]))
		}
		*want[i] = got[i].data
		if size += len(*want[i]); size > cfg.Limits.Bytes() {
			return schemas.Instance{}, &mining.Rejection{Reason: mining.TooLarge, Detail: fmt.Sprintf("%s: more than %d bytes changed", cand.ID, cfg.Limits.Bytes())}
		}
	}
	pr := mining.PR{ID: cand.ID, Repo: cand.Repo, Number: cand.Number, Source: cand.Source, Title: cand.Title, Body: cand.Body,
		User: cand.User, BaseCommit: cand.Base, MergeCommit: cand.Merge, HeadCommit: cand.Head, CreatedAt: cand.CreatedAt,
		ProblemStatement: cand.ProblemStatement, LinkedIssues: cand.LinkedIssues}
	inst, rej := mining.Build(pr, files, nil, cfg.Limits)
	if rej != nil {
		return inst, rej
	}
	if cfg.Relevant.Files() > 0 {
		rel, err := relevantFiles(cat, &inst, modIDs, cfg.Relevant, cfg.Blobs)
		if err != nil {
			return fail(err, "relevant files")
		}
		for _, p := range schemas.SortedPaths(rel) {
			inst.CodeContext[p] = rel[p]
			inst.RelevantFiles = append(inst.RelevantFiles, p)
		}
	}
	return inst, nil
}

// pathOf names the file whose content p points to.
func pathOf(files []mining.FileChange, p *string) string {
	for i := range files {
		if p == &files[i].Old {
			return files[i].Path + " at base"
		}
		if p == &files[i].New {
			return files[i].Path + " after"
		}
	}
	return "?"
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// relevantFiles reads the candidate files at the base that
// mining.CandidatePaths picks and returns the ones mining.RankWith keeps.
//
// Files of the listed directories are read by object id through blobs, so
// the files that many changes share are read from git once; modIDs names
// the blob of each modified file's content at the base (its new content
// for a new file), so that the imports of every file, modified or
// candidate, are parsed once a blob and path. A path or directory absent
// at the base is no candidate; any other git error fails the instance.
func relevantFiles(cat *gitio.CatFile, inst *schemas.Instance, modIDs map[string]string, cfg mining.RelevantConfig, blobs *blobCache) (map[string]string, error) {
	base := inst.BaseCommit
	modified := map[string]string{}
	for p := range inst.OracleNewContent {
		if c, ok := inst.CodeContext[p]; ok {
			modified[p] = c
		} else {
			modified[p] = inst.OracleNewContent[p] // a new file's imports count too
		}
	}
	paths := schemas.SortedPaths(modified)
	goMod, err := goModule(cat, base, paths)
	if err != nil {
		return nil, err
	}
	src := mining.CandidateSources{Modified: paths, Imports: make([][]string, len(paths)),
		Files: map[string][]string{}, Issue: inst.ProblemStatement, Budget: cfg.Candidates()}
	modTargets := make(map[string][]string, len(paths))
	for i, p := range paths {
		if id, ok := modIDs[p]; ok {
			src.Imports[i] = blobs.importTargets(cat.Dir(), id, p, modified[p], goMod)
		} else {
			src.Imports[i] = mining.ImportTargets(p, modified[p], goMod)
		}
		modTargets[p] = src.Imports[i]
	}
	ids := map[string]string{} // path → blob id, for the files listed
	for _, d := range mining.ListDirs(paths, src.Imports) {
		es, err := cat.ReadDir(base, d)
		if errors.Is(err, gitio.ErrMissing) {
			continue
		} else if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.IsFile() {
				p := path.Join(d, e.Name)
				src.Files[d] = append(src.Files[d], p)
				ids[p] = e.Hash
			}
		}
	}
	// Read the candidates in one pipelined batch.
	var revs, read []string
	for _, p := range mining.CandidatePaths(src) {
		id, ok := ids[p]
		if !ok {
			e, err := cat.Lookup(base, p)
			if errors.Is(err, gitio.ErrMissing) || err == nil && !e.IsFile() {
				continue
			} else if err != nil {
				return nil, err
			}
			id = e.Hash
		}
		revs = append(revs, id)
		read = append(read, p)
	}
	cands := map[string]string{}
	candIDs := map[string]string{}
	got, errs := blobs.read(cat, revs)
	for i, p := range read {
		if errs[i] != nil && !errors.Is(errs[i], gitio.ErrMissing) {
			return nil, errs[i]
		}
		if b := got[i]; errs[i] == nil && b.text && len(b.data) <= cfg.FileBytes() {
			cands[p] = b.data
			candIDs[p] = revs[i]
		}
	}
	imports := func(p, content string) []string {
		if t, ok := modTargets[p]; ok {
			return t
		}
		if id, ok := candIDs[p]; ok {
			return blobs.importTargets(cat.Dir(), id, p, content, goMod)
		}
		return mining.ImportTargets(p, content, goMod)
	}
	out := map[string]string{}
	for _, p := range mining.RankWith(modified, cands, inst.ProblemStatement, cfg, imports) {
		out[p] = cands[p]
	}
	return out, nil
}

// goModule returns the module path of the base's go.mod when a modified
// file is Go code ("" when none is, or there is no go.mod), so that Go
// imports resolve to the repository's directories.
func goModule(cat *gitio.CatFile, base string, modified []string) (string, error) {
	for _, p := range modified {
		if mining.Language(p) != "Go" {
			continue
		}
		e, err := cat.Lookup(base, "go.mod")
		if errors.Is(err, gitio.ErrMissing) || err == nil && !e.IsFile() {
			return "", nil
		} else if err != nil {
			return "", err
		}
		o, err := cat.Get(e.Hash)
		if errors.Is(err, gitio.ErrMissing) {
			return "", nil
		} else if err != nil {
			return "", err
		}
		return mining.GoModulePath(string(o.Data)), nil
	}
	return "", nil
}

// blobCache holds blobs by repository and object id: the modified files of
// one pull request are the old content of the next one that touches them,
// and the files around them are relevant-file candidates of many. On the
// 5,000-commit bench a third of the blobs read were read before. Objects
// are immutable, so an entry is never stale; at most blobCacheBytes
// (content, keys and overhead) are held, evicting arbitrary entries. Safe
// for concurrent use; the nil cache holds nothing.
type blobCache struct {
	mu    sync.Mutex
	m     map[blobKey]cachedBlob
	bytes int
}

type blobKey struct{ repo, id string }

type cachedBlob struct {
	data string
	text bool // UTF-8 and not binary (mining.IsBinary)
	// imports memoizes the blob's import targets at one path (see
	// importTargets); nil until asked.
	imports *importMemo
}

// importMemo is mining.ImportTargets(path, blob, goModule).
type importMemo struct {
	path, goModule string
	targets        []string
}

// size is what an entry holds: key, content, memo and the map entry.
func (b cachedBlob) size(k blobKey) int {
	n := len(k.id) + len(b.data) + 80 // 80: map entry
	if m := b.imports; m != nil {
		n += 64 + len(m.path) + len(m.goModule)
		for _, t := range m.targets {
			n += 16 + len(t)
		}
	}
	return n
}

const blobCacheBytes = 16 << 20

// blobs is the process's cache: a runner may run many build bundles, each
// with its own buildFn, at once.
var blobs blobCache

func (c *blobCache) get(repo, id string) (data string, text, ok bool) {
	if c == nil {
		return "", false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[blobKey{repo, id}]
	return b.data, b.text, ok
}

// read returns the blobs ids of cat's repository from the cache, reading
// the others with one pipelined request and caching them; errs[i] is set
// when ids[i] cannot be read or is not a blob.
func (c *blobCache) read(cat *gitio.CatFile, ids []string) ([]cachedBlob, []error) {
	out, errs := make([]cachedBlob, len(ids)), make([]error, len(ids))
	var need []string
	var at []int
	for i, id := range ids {
		if data, text, ok := c.get(cat.Dir(), id); ok {
			out[i] = cachedBlob{data: data, text: text}
			continue
		}
		need = append(need, id)
		at = append(at, i)
	}
	objs, gerrs := cat.GetMany(need)
	for k, i := range at {
		switch {
		case gerrs[k] != nil:
			errs[i] = gerrs[k]
		case objs[k].Type != "blob":
			errs[i] = fmt.Errorf("%s is a %s", ids[i], objs[k].Type)
		default:
			out[i] = c.put(cat.Dir(), ids[i], objs[k].Data)
		}
	}
	return out, errs
}

// put caches data as blob id of repo and returns the entry. It takes
// data over: the entry's string is data's bytes, not a copy (each object
// cat-file reads is a fresh slice that nothing else holds; a copy was a
// sixth of the bytes the mining run allocated), so the caller must not
// change or reuse data afterwards.
func (c *blobCache) put(repo, id string, data []byte) cachedBlob {
	b := cachedBlob{data: unsafe.String(unsafe.SliceData(data), len(data)), text: !mining.IsBinary(data) && utf8.Valid(data)}
	if c == nil || len(data) > blobCacheBytes/8 {
		return b
	}
	k := blobKey{repo, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[blobKey]cachedBlob{}
	}
	if _, ok := c.m[k]; ok {
		return b
	}
	c.store(k, b, 0)
	return b
}

// store sets entry k to b (replacing an entry of size old), evicting
// arbitrary other entries to stay within blobCacheBytes; c.mu is held.
func (c *blobCache) store(k blobKey, b cachedBlob, old int) {
	c.bytes -= old
	delete(c.m, k)
	for ok, ob := range c.m {
		if c.bytes+b.size(k) <= blobCacheBytes {
			break
		}
		delete(c.m, ok)
		c.bytes -= ob.size(ok)
	}
	c.m[k] = b
	c.bytes += b.size(k)
}

// importTargets returns mining.ImportTargets(p, content, goModule) for
// blob id of repo (whose content is content), memoized in the blob's
// cache entry: relevant-file ranking parses the imports of up to 64
// candidate files a change, mostly the same files at the same versions as
// the changes before it.
func (c *blobCache) importTargets(repo, id, p, content, goModule string) []string {
	if c != nil {
		c.mu.Lock()
		b, ok := c.m[blobKey{repo, id}]
		c.mu.Unlock()
		if ok {
			if m := b.imports; m != nil && m.path == p && m.goModule == goModule {
				return m.targets
			}
		}
	}
	targets := mining.ImportTargets(p, content, goModule)
	if c == nil {
		return targets
	}
	k := blobKey{repo, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.m[k]; ok && b.data == content {
		old := b.size(k)
		b.imports = &importMemo{path: p, goModule: goModule, targets: targets}
		c.store(k, b, old)
	}
	return targets
}

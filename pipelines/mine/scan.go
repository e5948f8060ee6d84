package mine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"swerl/internal/gitio"
	"swerl/schemas"
	"swerl/transforms/mining"
	"swerl/transforms/mining/ghevents"
)

// Candidate kinds.
const (
	kindMerge  = "merge"  // "Merge pull request #N from …"
	kindSquash = "squash" // "title (#N)"
	kindEvent  = "event"  // a merged PullRequestEvent's merge commit
	kindCommit = "commit" // any other first-parent commit (Config.Commits)
)

// SourceCommit is the Instance.Source of a plain commit (Config.Commits).
const SourceCommit = "commit"

// emptyTree is git's id of the empty tree: the base of a root commit.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

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
}

// scanRepo walks the first-parent history of one repository and reports
// every PR (and, with Commits, every other non-merge commit) as a
// Candidate, or as Rejected when it can be decided without reading files.
func scanRepo(ctx context.Context, dir string, recs []ghevents.Record, cfg scanConfig, out func(Candidate), rej func(Rejected)) error {
	repo, err := gitio.Open(ctx, dir)
	if err != nil {
		rej(Rejected{Repo: dir, ID: dir, Reason: string(mining.GitError), Detail: err.Error()})
		return nil
	}
	ix := ghevents.NewIndex(recs)
	graph, gerr := gitio.ReadGraph(ctx, repo, "")
	if gerr != nil {
		// A damaged history still yields what can be read; say what failed.
		rej(Rejected{Repo: repo.Name, ID: repo.Name, Reason: string(mining.GitError), Detail: gerr.Error()})
	}
	merged := ix.MergedByCommit()
	lr, err := gitio.Log(ctx, repo, "", false)
	if err != nil {
		rej(Rejected{Repo: repo.Name, ID: repo.Name, Reason: string(mining.GitError), Detail: err.Error()})
		return nil
	}
	seen := map[int]bool{}
	for {
		c, ok := lr.Next()
		if !ok {
			break
		}
		cCommits.Add(ctx, 1)
		cand, ok := classify(repo, c, graph, ix, merged, cfg.Commits, rej)
		if !ok {
			continue
		}
		if cand.Number > 0 {
			if seen[cand.Number] {
				rej(Rejected{Repo: repo.Name, ID: cand.ID, Reason: string(mining.Duplicate), Detail: cand.ID + ": PR number seen on a newer commit; keeping that one (" + c.Hash + ")"})
				continue
			}
			seen[cand.Number] = true
		}
		if cfg.Exclude.Match(repo.Name, cand.ID) {
			rej(Rejected{Repo: repo.Name, ID: cand.ID, Reason: string(mining.Excluded), Detail: cand.ID + ": excluded"})
			continue
		}
		out(cand)
	}
	if err := lr.Close(); err != nil {
		rej(Rejected{Repo: repo.Name, ID: repo.Name, Reason: string(mining.GitError), Detail: err.Error()})
	}
	return ctx.Err()
}

// classify decides what commit c of the first-parent history is.
func classify(repo *gitio.Repo, c *gitio.Commit, graph *gitio.Graph, ix *ghevents.Index, merged map[string]ghevents.Record, commits bool, rej func(Rejected)) (Candidate, bool) {
	subject, body := mining.SplitMessage(c.Message)
	cand := Candidate{RepoDir: repo.Dir, Repo: repo.Name, Merge: c.Hash, CreatedAt: c.Date, User: c.Author, Source: schemas.SourceGit}
	parent := emptyTree
	if len(c.Parents) > 0 {
		parent = c.Parents[0]
	}
	mergeBase := func(a, b string) (string, bool) {
		if graph == nil {
			return "", false
		}
		return graph.MergeBase(a, b)
	}
	if ev, ok := merged[c.Hash]; ok {
		cand.Kind, cand.Number, cand.Source = kindEvent, ev.Number, schemas.SourceGHArchive
		cand.Title, cand.Body, cand.User = ev.Title, ev.Body, ev.User
		switch {
		case ev.BaseSHA != "" && ev.HeadSHA != "" && graph != nil && graph.Has(ev.BaseSHA) && graph.Has(ev.HeadSHA):
			cand.Base, _ = mergeBase(ev.BaseSHA, ev.HeadSHA)
			cand.Head = ev.HeadSHA
		case len(c.Parents) > 1:
			cand.Base, _ = mergeBase(c.Parents[0], c.Parents[1])
			cand.Head = c.Parents[1]
		default:
			cand.Base, cand.Head = parent, c.Hash
		}
	} else if n, _, ok := mining.MergeSubject(subject); ok && len(c.Parents) > 1 {
		cand.Kind, cand.Number = kindMerge, n
		cand.Title, cand.Body = mining.SplitMessage(body)
		cand.Head = c.Parents[1]
		cand.Base, _ = mergeBase(c.Parents[0], c.Parents[1])
	} else if n, title, ok := mining.SquashSubject(subject); ok && len(c.Parents) <= 1 {
		cand.Kind, cand.Number, cand.Title, cand.Body = kindSquash, n, title, body
		cand.Base, cand.Head = parent, c.Hash
	} else if commits && len(c.Parents) == 1 {
		cand.Kind, cand.Source, cand.Title, cand.Body = kindCommit, SourceCommit, subject, body
		cand.Base, cand.Head = parent, c.Hash
		cand.ID = repo.Name + "@" + c.Hash[:12]
		cand.ProblemStatement = strings.TrimSpace(c.Message)
		cand.LinkedIssues = mining.LinkedIssues(c.Message, repo.Name, 0)
	} else {
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
	for _, ch := range changes {
		if ch.OldMode == "160000" || ch.NewMode == "160000" {
			continue // a submodule pointer has no content here
		}
		files = append(files, mining.FileChange{Path: ch.Path})
		f := &files[len(files)-1]
		if ch.OldHash != gitio.ZeroHash && ch.OldMode != "000000" {
			f.HasOld = true
			revs = append(revs, ch.OldHash)
		}
		if ch.NewHash != gitio.ZeroHash && ch.NewMode != "000000" {
			f.HasNew = true
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
		rel := relevantFiles(cat, &inst, cfg.Relevant, cfg.Blobs)
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

// relevantFiles reads candidate files at the base (imports of the modified
// files, files named in the problem statement, same-directory siblings, in
// that order, up to cfg.Candidates() reads) and returns the ones Rank picks.
//
// Files of the listed directories are read by object id through blobs, so
// the files that many changes share are read from git once.
func relevantFiles(cat *gitio.CatFile, inst *schemas.Instance, cfg mining.RelevantConfig, blobs *blobCache) map[string]string {
	base := inst.BaseCommit
	modified := map[string]string{}
	for p := range inst.OracleNewContent {
		if c, ok := inst.CodeContext[p]; ok {
			modified[p] = c
		} else {
			modified[p] = inst.OracleNewContent[p] // a new file's imports count too
		}
	}
	// Collect the paths to read, best evidence first, then read them in one
	// pipelined batch.
	var probes []string
	tried := map[string]bool{}
	budget := cfg.Candidates()
	probe := func(p string) {
		if len(probes) >= budget || tried[p] || !mining.IsCode(p) {
			return
		}
		tried[p] = true
		if _, ok := modified[p]; !ok {
			probes = append(probes, p)
		}
	}
	trees := map[string][]string{}
	ids := map[string]string{} // path → blob id, for the files in trees
	listDirs := func(dirs []string) {
		for _, d := range dirs {
			if _, ok := trees[d]; ok {
				continue
			}
			trees[d] = nil
			es, err := cat.ReadDir(base, d)
			if err != nil {
				continue
			}
			for _, e := range es {
				if !e.IsTree() && e.Mode != "160000" && e.Mode != "120000" {
					p := path.Join(d, e.Name)
					trees[d] = append(trees[d], p)
					ids[p] = e.Hash
				}
			}
		}
	}
	goMod := ""
	paths := schemas.SortedPaths(modified)
	for _, p := range paths {
		if mining.Language(p) == "Go" {
			if e, err := cat.Lookup(base, "go.mod"); err == nil && !e.IsTree() {
				if o, err := cat.Get(e.Hash); err == nil {
					goMod = mining.GoModulePath(string(o.Data))
				}
			}
			break
		}
	}
	var importDirs []string
	dirSet := map[string]bool{}
	targets := make([][]string, len(paths))
	for i, p := range paths {
		dirSet[path.Dir(p)] = true
		targets[i] = mining.ImportTargets(p, modified[p], goMod)
		for _, t := range targets[i] {
			if dir, ok := strings.CutSuffix(t, "/"); ok {
				importDirs = append(importDirs, dir)
			}
		}
	}
	dirs := sortedSet(dirSet)
	listDirs(append(importDirs, dirs...))
	for i := range paths {
		for _, t := range targets[i] {
			if dir, ok := strings.CutSuffix(t, "/"); ok {
				for _, f := range trees[dir] {
					if !strings.HasSuffix(f, "_test.go") {
						probe(f)
					}
				}
				continue
			}
			probe(t)
		}
	}
	for _, n := range mining.NamedPaths(inst.ProblemStatement) {
		probe(n)
		if !strings.Contains(n, "/") {
			for _, d := range dirs {
				probe(path.Join(d, n))
			}
		}
	}
	for _, d := range dirs {
		for _, f := range trees[d] {
			probe(f)
		}
	}
	var revs, read []string
	for _, p := range probes {
		id, ok := ids[p]
		if !ok {
			e, err := cat.Lookup(base, p)
			if err != nil || e.IsTree() || e.Mode == "160000" || e.Mode == "120000" {
				continue
			}
			id = e.Hash
		}
		revs = append(revs, id)
		read = append(read, p)
	}
	cands := map[string]string{}
	got, errs := blobs.read(cat, revs)
	for i, p := range read {
		if b := got[i]; errs[i] == nil && b.text && len(b.data) <= cfg.FileBytes() {
			cands[p] = b.data
		}
	}
	out := map[string]string{}
	for _, p := range mining.Rank(modified, cands, inst.ProblemStatement, goMod, cfg) {
		out[p] = cands[p]
	}
	return out
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
			out[i] = cachedBlob{data, text}
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

// put caches a copy of data as blob id of repo and returns the entry.
func (c *blobCache) put(repo, id string, data []byte) cachedBlob {
	b := cachedBlob{string(data), !mining.IsBinary(data) && utf8.Valid(data)}
	if c == nil || len(data) > blobCacheBytes/8 {
		return b
	}
	k := blobKey{repo, id}
	size := func(k blobKey, b cachedBlob) int { return len(k.id) + len(b.data) + 80 } // 80: map entry
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[blobKey]cachedBlob{}
	}
	if _, ok := c.m[k]; ok {
		return b
	}
	for old, ob := range c.m {
		if c.bytes+size(k, b) <= blobCacheBytes {
			break
		}
		delete(c.m, old)
		c.bytes -= size(old, ob)
	}
	c.m[k] = b
	c.bytes += size(k, b)
	return b
}

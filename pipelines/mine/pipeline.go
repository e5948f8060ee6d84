package mine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/internal/gitio"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/parquetio"
	"swerl/transforms/mining"
	"swerl/transforms/mining/ghevents"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Candidate)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Rejected)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*RepoTask)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*stagedRow)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*countRow)(nil)).Elem())
	register.Function1x2(keyRepo)
	register.DoFn4x1[context.Context, string, func(string, []byte), func(Rejected), error](&readEventsFn{})
	register.DoFn7x1[context.Context, string, func(*string) bool, func(*[]byte) bool, func(Candidate), func(Rejected), func(int, countRow), error](&scanFn{})
	register.DoFn6x1[context.Context, Candidate, func(string, string), func(string, stagedRow), func(Rejected), func(int, countRow), error](&buildFn{})
	register.DoFn4x0[string, func(*string) bool, func(string, string), func(Rejected)](&dedupFn{})
	register.DoFn6x1[context.Context, string, func(*stagedRow) bool, func(*string) bool, func(string, []byte), func(int, countRow), error](&finalizeFn{})
	register.Emitter2[string, stagedRow]()
	register.Iter1[stagedRow]()
	register.Emitter2[string, string]()
	register.DoFn3x0[context.Context, Rejected, func(int, countRow)](&countFn{})
	register.DoFn3x1[context.Context, int, func(*countRow) bool, error](&writeCountsFn{})
	register.Emitter2[int, countRow]()
	register.Iter1[countRow]()
	register.Function2x0(deadKey)
	register.DoFn4x1[context.Context, int, func(*Rejected) bool, func(string), error](&writeDeadFn{})
	register.Emitter1[Candidate]()
	register.Emitter1[Rejected]()
	register.Emitter1[string]()
	register.Emitter2[string, []byte]()
	register.Emitter2[int, Rejected]()
	register.Iter1[string]()
	register.Iter1[[]byte]()
	register.Iter1[Rejected]()
}

// RepoTask is one repository to scan.
type RepoTask struct {
	Dir  string
	Name string
}

func keyRepo(t RepoTask) (string, string) { return strings.ToLower(t.Name), t.Dir }

// DefaultRowsPerFile is the most instances one file holds when Config and
// Params leave it unset, and swerl mine's --rows-per-file default.
const DefaultRowsPerFile = 5000

// Params configures the pipeline graph; Run fills it from Config.
type Params struct {
	Repos      []RepoTask
	EventFiles []string
	Out        string // DIR (a local path, gs:// or s3://): instances go to DIR/instances, dead letters to DIR/deadletter
	// CloneDir is where repositories given by URL are cloned: a local
	// directory (default DIR/.clones when DIR is local).
	CloneDir string
	Commits  bool
	Refs     []string // mined besides HEAD (Config.Refs)
	Limits   mining.Limits
	Relevant mining.RelevantConfig
	Exclude  *mining.Exclude
	// RowsPerFile caps the rows of one instance file; default
	// DefaultRowsPerFile. Memory does not depend on it: instances are
	// staged and written one at a time.
	RowsPerFile int
	// Workers builds instances in this many goroutines a worker; default
	// 4 a core.
	Workers int
	// Emit makes Build's result carry the kept instances; without it the
	// result is empty (the instances are only written to files).
	Emit bool
	// Progress is the run's key for per-repository progress in this
	// process (repoprogress.go); "" for none.
	Progress string
}

func (p Params) validate() error {
	if len(p.Repos) == 0 {
		return fmt.Errorf("no repositories")
	}
	if p.Out == "" {
		return fmt.Errorf("no output directory")
	}
	return nil
}

// Build adds the mining pipeline to s and returns the kept instances as
// KV<string, []byte> (id → JSON wire form of schemas.Instance), for a
// Kafka sink or other consumers. Parquet files are written by the
// pipeline itself. It panics on invalid Params (a programming error).
func Build(s beam.Scope, p Params) beam.PCollection {
	if err := p.validate(); err != nil {
		panic("mine.Build: " + err.Error())
	}
	if p.RowsPerFile <= 0 {
		p.RowsPerFile = DefaultRowsPerFile
	}
	s = s.Scope("mine")
	names := make([]string, len(p.Repos))
	for i, r := range p.Repos {
		names[i] = strings.ToLower(r.Name)
	}
	repoKV := beam.ParDo(s, keyRepo, beam.CreateList(s, p.Repos))
	events := p.EventFiles
	if events == nil {
		events = []string{}
	}
	evKV, evRej := beam.ParDo2(s, &readEventsFn{Repos: names}, beam.CreateList(s, events))
	if p.CloneDir == "" {
		p.CloneDir = filepath.Join(p.Out, cloneDir)
	}
	cands, scanRej, scanN := beam.ParDo3(s, &scanFn{Commits: p.Commits, Refs: p.Refs, Exclude: p.Exclude, CloneDir: p.CloneDir, Progress: p.Progress}, beam.CoGroupByKey(s, repoKV, evKV))
	instDir := files.Join(p.Out, "instances")
	refs, staged, buildRej, buildN := beam.ParDo4(s, &buildFn{Limits: p.Limits, Relevant: p.Relevant, Staging: files.Join(instDir, stagingDir), RowsPerFile: p.RowsPerFile, Workers: p.Workers, Progress: p.Progress}, beam.Reshuffle(s, cands))
	drops, dupRej := beam.ParDo2(s, &dedupFn{}, beam.GroupByKey(s, refs))
	// Prism busy-waits (a select on a closed channel) through every bundle
	// of a stage with no output to the runner, so finalize's output is its
	// counts, which writeCountsFn consumes.
	kept, finalN := beam.ParDo2(s, &finalizeFn{Dir: instDir, Emit: p.Emit}, beam.CoGroupByKey(s, staged, drops))
	rejected := beam.Flatten(s, evRej, scanRej, buildRej, dupRej)
	rejN := beam.ParDo(s, &countFn{}, rejected)
	beam.ParDo0(s, &writeCountsFn{Path: countsPath(p.Out)}, beam.GroupByKey(s, beam.Flatten(s, scanN, buildN, finalN, rejN)))
	dead := beam.ParDo(s, deadKey, rejected)
	beam.ParDo(s, &writeDeadFn{Dir: files.Join(p.Out, "deadletter")}, beam.GroupByKey(s, dead))
	return kept
}

// readEventsFn reads one event file and emits the records of the mined
// repositories, keyed by lower-case repository name; bad lines go to the
// rejected output.
type readEventsFn struct {
	Repos []string
}

func (f *readEventsFn) ProcessElement(ctx context.Context, path string, emit func(string, []byte), rej func(Rejected)) error {
	want := map[string]bool{}
	for _, r := range f.Repos {
		want[r] = true
	}
	local, done, err := files.Local(ctx, path, "")
	if err != nil {
		// A file that cannot be fetched is a fault of the store or the
		// job (credentials, network): the bundle fails and is retried.
		return err
	}
	defer done()
	err = ghevents.ReadFile(local, func(r ghevents.Record, bad *ghevents.LineError) error {
		if bad != nil {
			// Named by the file as given, not its local copy.
			rej(Rejected{Repo: path, ID: fmt.Sprintf("%s:%d", path, bad.Line), Reason: string(mining.BadRecord), Detail: strings.ReplaceAll(bad.Error(), local, path)})
			return nil
		}
		key := strings.ToLower(r.Repo)
		if !want[key] {
			return nil
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		emit(key, b)
		return nil
	})
	if err != nil {
		rej(Rejected{Repo: path, ID: path, Reason: string(mining.BadRecord), Detail: strings.ReplaceAll(err.Error(), local, path)})
	}
	return nil
}

// scanFn walks the history of each repository with its events.
type scanFn struct {
	Commits  bool
	Refs     []string
	Exclude  *mining.Exclude
	CloneDir string
	Progress string // the run's key for per-repository progress (repoprogress.go)

	counts tally
}

func (f *scanFn) ProcessElement(ctx context.Context, name string, dirs func(*string) bool, evs func(*[]byte) bool, emit func(Candidate), rej func(Rejected), _ func(int, countRow)) error {
	var recs []ghevents.Record
	var b []byte
	for evs(&b) {
		var r ghevents.Record
		if err := json.Unmarshal(b, &r); err == nil {
			recs = append(recs, r)
		}
	}
	tr := trackerFor(f.Progress)
	tr.scanStart(name)
	var dir string
	for dirs(&dir) {
		f.counts.add(ctx, cRepos, nRepos, 1)
		cfg := scanConfig{Commits: f.Commits, Refs: f.Refs, Exclude: f.Exclude, CloneDir: f.CloneDir,
			Read: func() { f.counts.add(ctx, cCommits, nCommits, 1) }}
		if err := scanRepo(ctx, dir, recs, cfg, func(c Candidate) {
			f.counts.add(ctx, cCandidates, nCandidates, 1)
			if c.Number > 0 {
				f.counts.add(ctx, cPRs, nPRs, 1)
			}
			tr.candidate(name, c.Number > 0)
			emit(c)
		}, func(r Rejected) {
			if deadReasons[r.Reason] {
				tr.deadLetter(name)
			}
			rej(r)
		}); err != nil {
			return err
		}
	}
	tr.scanEnd(name)
	return nil
}

// FinishBundle emits the bundle's counts.
func (f *scanFn) FinishBundle(_ func(Candidate), _ func(Rejected), counts func(int, countRow)) {
	f.counts.flush(counts)
}

// cloneDir (under the output directory) holds the clones of repositories
// given by URL until the end of the run.
const cloneDir = ".clones"

// stagingDir holds the build stage's files until finalizeFn has removed
// the duplicates from them.
const stagingDir = ".staging"

// buildFn reads each candidate's files. Candidates are built in batches by
// Workers goroutines, which share `git cat-file --batch` processes (one per
// two cores and repository): their requests queue on the pipe, so git's
// latency overlaps and git answers many per wake-up; the workers also
// encode the built instances as staging records (see staging.go), and each batch goes to one
// staging file in Staging. Only small references cross the shuffle:
// KV<patch key, id NUL group> for deduplication and KV<group, stagedRow>
// for each instance, where a group is the staging files of at most
// RowsPerFile instances that become one instance file. A worker holds one
// batch of instances at a time, however long the history.
type buildFn struct {
	Limits      mining.Limits
	Relevant    mining.RelevantConfig
	Staging     string
	RowsPerFile int
	Workers     int    // default 4 a core
	Progress    string // the run's key for per-repository progress (repoprogress.go)

	pending   []Candidate
	recs      []stagedRecord
	group     string // the open group: the name of its first staging file
	groupRows int
	mu        sync.Mutex
	cats      map[string][]*gitio.CatFile // by repository directory
	next      int
	counts    tally
}

const buildBatch = 64

func (f *buildFn) workers() int {
	if f.Workers > 0 {
		return f.Workers
	}
	return 4 * max(1, runtime.NumCPU())
}

// acquire returns a cat-file process for candidate c's repository: up to
// catFiles of them a repository, started on first use and then shared
// round-robin (a CatFile pipelines the requests of many goroutines). The
// scan opened the repository and named the candidate's from it, so it is
// not opened again (two git processes before the first build); were the
// directory no repository, its cat-file's first answer would say so.
func (f *buildFn) acquire(c Candidate) (*gitio.CatFile, error) {
	dir := c.RepoDir
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.cats[dir]
	if len(cs) >= catFiles() {
		f.next++
		return cs[f.next%len(cs)], nil
	}
	// The process outlives this bundle: it is a cache, never output.
	cat, err := gitio.NewCatFile(context.Background(), &gitio.Repo{Dir: dir, Name: c.Repo})
	if err != nil {
		return nil, err
	}
	cat.UseTrees(trees)
	if f.cats == nil {
		f.cats = map[string][]*gitio.CatFile{}
	}
	f.cats[dir] = append(cs, cat)
	return cat, nil
}

// catFiles is how many cat-file processes a build bundle runs for one
// repository: one per two cores. Fewer processes each find more requests
// queued (fewer sleeps and wake-ups) and share one delta-base cache
// (bench/mine/README.md, "Choices in the code").
func catFiles() int { return max(1, runtime.NumCPU()/2) }

// trees is the process's tree cache, shared by every build bundle's
// cat-file processes (entries are kept by repository). It is a process
// resource, not a run's, so it is a global and not in a beamrun.Registry:
// its bound is on this process's memory, whatever the number of runs, and
// runs that mine the same repository share its trees.
var trees = gitio.NewTreeCache(16 << 20)

func (f *buildFn) ProcessElement(ctx context.Context, c Candidate, ref func(string, string), row func(string, stagedRow), rej func(Rejected), _ func(int, countRow)) error {
	f.pending = append(f.pending, c)
	if len(f.pending) >= buildBatch {
		f.build(ctx, rej)
		return f.stage(ctx, ref, row)
	}
	return nil
}

func (f *buildFn) FinishBundle(ctx context.Context, ref func(string, string), row func(string, stagedRow), rej func(Rejected), counts func(int, countRow)) error {
	f.build(ctx, rej)
	err := f.stage(ctx, ref, row)
	f.counts.flush(counts)
	// Groups do not span bundles: a retried bundle starts its own.
	f.group, f.groupRows = "", 0
	return err
}

// build builds and encodes the pending candidates in parallel, keeping
// input order.
func (f *buildFn) build(ctx context.Context, rej func(Rejected)) {
	if len(f.pending) == 0 {
		return
	}
	type result struct {
		rec stagedRecord
		rej *Rejected
	}
	out := make([]result, len(f.pending))
	tr := trackerFor(f.Progress)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(f.workers(), len(f.pending)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				inst, r := f.buildOne(f.pending[i])
				f.counts.add(ctx, cBuilt, nBuilt, 1)
				tr.built(f.pending[i].Repo, r == nil, r != nil && deadReasons[r.Reason])
				if r != nil {
					out[i].rej = r
					continue
				}
				out[i].rec = encodeRecord(&inst, true) // S2 everywhere: see stagingVersion
			}
		}()
	}
	for i := range f.pending {
		next <- i
	}
	close(next)
	wg.Wait()
	f.pending = f.pending[:0]
	for _, r := range out {
		if r.rej != nil {
			rej(*r.rej)
		} else {
			f.recs = append(f.recs, r.rec)
		}
	}
}

func (f *buildFn) buildOne(c Candidate) (schemas.Instance, *Rejected) {
	cat, err := f.acquire(c)
	if err != nil {
		return schemas.Instance{}, &Rejected{Repo: c.Repo, ID: c.ID, Reason: string(mining.GitError), Detail: err.Error()}
	}
	inst, r := build(cat, c, buildConfig{Limits: f.Limits, Relevant: f.Relevant, Blobs: &blobs})
	if r != nil {
		return schemas.Instance{}, &Rejected{Repo: c.Repo, ID: c.ID, Reason: string(r.Reason), Detail: r.Detail}
	}
	return inst, nil
}

// stage writes the encoded records to staging files, none of them across
// two groups, and emits the references.
func (f *buildFn) stage(ctx context.Context, ref func(string, string), row func(string, stagedRow)) error {
	per := max(1, f.RowsPerFile)
	for len(f.recs) > 0 {
		if f.group == "" || f.groupRows >= per {
			f.group, f.groupRows = "", 0
		}
		n := min(len(f.recs), per-f.groupRows)
		rows, err := writeStaging(ctx, f.Staging, f.recs[:n])
		if err != nil {
			return err
		}
		if f.group == "" {
			f.group = files.Base(rows[0].File)
		}
		f.groupRows += n
		for i, r := range rows {
			ref(f.recs[i].PatchKey, r.ID+"\x00"+f.group)
			row(f.group, r)
			f.recs[i].release()
		}
		clear(f.recs[:n])
		f.recs = f.recs[n:]
	}
	f.recs = nil
	return nil
}

// Teardown stops the cat-file processes.
func (f *buildFn) Teardown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cs := range f.cats {
		for _, c := range cs {
			c.Close()
		}
	}
	f.cats = nil
}

// dedupFn keeps one instance per oracle patch, the smallest id (IDLess),
// and emits KV<group, id> for each one dropped.
type dedupFn struct{}

func (f *dedupFn) ProcessElement(key string, refs func(*string) bool, drop func(string, string), rej func(Rejected)) {
	var ids, groups []string
	var r string
	for refs(&r) {
		id, group, _ := strings.Cut(r, "\x00")
		ids = append(ids, id)
		groups = append(groups, group)
	}
	if len(ids) < 2 {
		return
	}
	keep := mining.PickFirst(ids)
	for i := range ids {
		if i != keep {
			repo, _, _ := strings.Cut(ids[i], "#")
			rej(Rejected{Repo: repo, ID: ids[i], Reason: string(mining.Duplicate), Detail: ids[i] + ": same oracle patch as " + ids[keep]})
			drop(groups[i], ids[i])
		}
	}
}

// finalizeFn writes one group's instances, without the dropped ones and
// sorted by id (IDLess), to DIR/part-<hash of the ids>.parquet files
// (atomically), reading one staging record at a time and ending a row
// group every rowGroupBytes of records, then removes the group's staging
// files. A large group is cut into contiguous id ranges of at least
// minFileRows, one file each, written in parallel (up to one a core):
// finalize runs after the last build, so a single writer left every other
// core idle. With Emit it outputs KV<id, instance JSON> for each kept
// instance.
type finalizeFn struct {
	Dir  string
	Emit bool

	counts tally
}

// rowGroupBytes bounds the (uncompressed) records in one row group of an
// instance file: the writer holds a row group's pages in memory.
const rowGroupBytes = 32 << 20

// minFileRows is the fewest rows finalize gives one file when it cuts a
// group for parallel writers.
const minFileRows = 256

// writers bounds the instance files written at once in this process (a
// runner may run many finalize bundles in parallel; each writer holds
// tens of MiB): GOMAXPROCS, since writing is CPU-bound. Like trees it
// bounds a process resource (cores and memory) across every run in the
// process, so it is a global and not per run.
var writers = make(chan struct{}, runtime.GOMAXPROCS(0))

// cutRows cuts sorted rows into at most parts contiguous runs of nearly
// equal bytes (the records' sizes: writing a file costs its bytes, and
// later changes of a repository carry larger files), one run when rows are
// fewer than 2*minFileRows. Cut by row count instead, one file could
// hold twice the bytes of another, and finalize would wait on it.
func cutRows(rows []stagedRow, parts int) [][]stagedRow {
	k := max(1, min(parts, len(rows)/minFileRows))
	var total int64
	for _, r := range rows {
		total += max(1, r.Size)
	}
	var out [][]stagedRow
	lo := 0
	var sum int64
	for i, r := range rows {
		sum += max(1, r.Size)
		// End run len(out) once it holds its share of the bytes.
		if len(out) < k-1 && sum*int64(k) >= total*int64(len(out)+1) {
			out = append(out, rows[lo:i+1])
			lo = i + 1
		}
	}
	if lo < len(rows) {
		out = append(out, rows[lo:])
	}
	return out
}

// emitted is one kept instance's wire form, passed from a file writer to
// the bundle's goroutine (only it may emit).
type emitted struct {
	id   string
	wire []byte
}

func (f *finalizeFn) ProcessElement(ctx context.Context, group string, staged func(*stagedRow) bool, drops func(*string) bool, emit func(string, []byte), _ func(int, countRow)) error {
	dropped := map[string]bool{}
	var id string
	for drops(&id) {
		dropped[id] = true
	}
	var rows []stagedRow
	staging := map[string]bool{}
	var r stagedRow
	for staged(&r) {
		staging[r.File] = true
		if !dropped[r.ID] {
			rows = append(rows, r)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return mining.IDLess(rows[i].ID, rows[j].ID) })
	runs := cutRows(rows, cap(writers))
	outs := make([]string, len(runs))
	for i, run := range runs {
		ids := make([]string, len(run))
		for j := range run {
			ids[j] = run[j].ID
		}
		outs[i] = files.Join(f.Dir, idsName("part", ".parquet", ids))
	}
	for file := range staging {
		ok, err := files.Exists(ctx, file)
		if err != nil {
			return err
		}
		if !ok {
			done := true
			for _, out := range outs {
				if ok, err := files.Exists(ctx, out); err != nil || !ok {
					done = false
				}
			}
			if done {
				// A retry after the group was finalized: the failed
				// attempt's counts were dropped with its outputs.
				f.counts.add(ctx, cKept, nKept, int64(len(rows)))
				return nil
			}
			return fmt.Errorf("mine: staging file %s is gone and the instance files were not all written", file)
		}
	}
	var ch chan emitted
	if f.Emit {
		ch = make(chan emitted, 64)
	}
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			writers <- struct{}{}
			defer func() { <-writers }()
			errs[i] = writeInstances(ctx, outs[i], run, ch)
		}()
	}
	if ch != nil {
		go func() { wg.Wait(); close(ch) }()
		for e := range ch {
			emit(e.id, e.wire)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for file := range staging {
		if err := files.Remove(ctx, file); err != nil {
			return fmt.Errorf("mine: remove staging file: %w", err)
		}
	}
	f.counts.add(ctx, cKept, nKept, int64(len(rows)))
	return nil
}

// FinishBundle emits the bundle's counts.
func (f *finalizeFn) FinishBundle(_ func(string, []byte), counts func(int, countRow)) {
	f.counts.flush(counts)
}

// writeInstances streams the staged rows into the instance file out, and,
// when ch is not nil, sends each instance's wire form to ch. An object
// store's file is written locally first and uploaded whole.
func writeInstances(ctx context.Context, out string, rows []stagedRow, ch chan<- emitted) error {
	return files.Via(ctx, out, func(local string) error { return writeInstancesTo(ctx, local, rows, ch) })
}

func writeInstancesTo(ctx context.Context, out string, rows []stagedRow, ch chan<- emitted) error {
	rd := stagingReader{ctx: ctx}
	defer rd.close()
	w, err := parquetio.Create[schemas.Instance](out)
	if err != nil {
		return err
	}
	var inst schemas.Instance
	var pending int64
	for _, r := range rows {
		inst = schemas.Instance{}
		if err := rd.read(r, &inst); err != nil {
			w.Abort()
			return err
		}
		if pending > 0 && pending+r.Size > rowGroupBytes {
			if err := w.Flush(); err != nil {
				w.Abort()
				return err
			}
			pending = 0
		}
		pending += r.Size
		if err := w.Write(inst); err != nil {
			w.Abort()
			return err
		}
		if ch != nil {
			b, err := schemas.Encode(&inst)
			if err != nil {
				w.Abort()
				return fmt.Errorf("mine: %s: %w", inst.ID, err)
			}
			ch <- emitted{inst.ID, b}
		}
	}
	return w.Close()
}

// countFn counts rejections by reason.
type countFn struct {
	counts tally
}

func (f *countFn) ProcessElement(ctx context.Context, r Rejected, _ func(int, countRow)) {
	f.counts.add(ctx, cRejected.With(r.Reason), nRejected+r.Reason, 1)
}

// FinishBundle emits the bundle's counts.
func (f *countFn) FinishBundle(counts func(int, countRow)) {
	f.counts.flush(counts)
}

// deadReasons are the rejections that are input or repository faults (dead
// letters), as opposed to filter decisions.
var deadReasons = map[string]bool{
	string(mining.MissingObject): true, string(mining.GitError): true,
	string(mining.BadRecord): true, string(mining.NoMergeBase): true,
}

// deadKey keys the dead letters for one writer.
func deadKey(r Rejected, emit func(int, Rejected)) {
	if deadReasons[r.Reason] {
		emit(0, r)
	}
}

// writeDeadFn writes the dead letters to DIR/mine.parquet.
type writeDeadFn struct {
	Dir string
}

func (f *writeDeadFn) ProcessElement(ctx context.Context, _ int, vals func(*Rejected) bool, emit func(string)) error {
	var rows []schemas.DeadLetter
	var r Rejected
	for vals(&r) {
		rows = append(rows, schemas.DeadLetter{SchemaVersion: schemas.Version, Stage: "mine", Source: r.Repo, Key: r.ID, Reason: r.Reason + ": " + r.Detail})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Key != rows[j].Key {
			return rows[i].Key < rows[j].Key
		}
		return rows[i].Reason < rows[j].Reason
	})
	path := files.Join(f.Dir, "mine.parquet")
	if err := files.Via(ctx, path, func(local string) error { return parquetio.WriteFile(local, rows) }); err != nil {
		return err
	}
	emit(path)
	return nil
}

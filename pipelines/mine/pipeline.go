package mine

import (
	"context"
	"crypto/sha256"
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
	"swerl/sinks/parquetio"
	"swerl/transforms/mining"
	"swerl/transforms/mining/ghevents"
)

// Beam metric namespace and names of the mining counts.
const (
	metricNS        = "swerl.mine"
	metricRepos     = "repos"
	metricCommits   = "commits"
	metricPRs       = "prs"
	metricCands     = "candidates"
	metricKept      = "instances"
	metricRejPrefix = "rejected_"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Candidate)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Rejected)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*RepoTask)(nil)).Elem())
	register.Function1x2(keyRepo)
	register.DoFn3x1[string, func(string, []byte), func(Rejected), error](&readEventsFn{})
	register.DoFn6x1[context.Context, string, func(*string) bool, func(*[]byte) bool, func(Candidate), func(Rejected), error](&scanFn{})
	register.DoFn4x0[context.Context, Candidate, func(string, []byte), func(Rejected)](&buildFn{})
	register.DoFn5x1[context.Context, string, func(*[]byte) bool, func(string, []byte), func(Rejected), error](&dedupWriteFn{})
	register.DoFn2x0[context.Context, Rejected](&countFn{})
	register.Function2x0(deadKey)
	register.DoFn3x1[int, func(*Rejected) bool, func(string), error](&writeDeadFn{})
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

// Params configures the pipeline graph; Run fills it from Config.
type Params struct {
	Repos      []RepoTask
	EventFiles []string
	Out        string // DIR: instances go to DIR/instances, dead letters to DIR/deadletter
	Commits    bool
	Limits     mining.Limits
	Relevant   mining.RelevantConfig
	Exclude    *mining.Exclude
	// RowsPerFile caps the rows of one instance file; default 5000.
	RowsPerFile int
	// Emit makes Build's result carry the kept instances; without it the
	// result is empty (the instances are only written to files).
	Emit bool
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
		p.RowsPerFile = 5000
	}
	s = s.Scope("mine")
	names := make([]string, len(p.Repos))
	for i, r := range p.Repos {
		names[i] = strings.ToLower(r.Name)
	}
	repoKV := beam.ParDo(s, keyRepo, beam.CreateList(s, p.Repos))
	files := p.EventFiles
	if files == nil {
		files = []string{}
	}
	evKV, evRej := beam.ParDo2(s, &readEventsFn{Repos: names}, beam.CreateList(s, files))
	cands, scanRej := beam.ParDo2(s, &scanFn{Commits: p.Commits, Exclude: p.Exclude}, beam.CoGroupByKey(s, repoKV, evKV))
	built, buildRej := beam.ParDo2(s, &buildFn{Limits: p.Limits, Relevant: p.Relevant}, beam.Reshuffle(s, cands))
	kept, dupRej := beam.ParDo2(s, &dedupWriteFn{Dir: filepath.Join(p.Out, "instances"), RowsPerFile: p.RowsPerFile, Emit: p.Emit}, beam.GroupByKey(s, built))
	rejected := beam.Flatten(s, evRej, scanRej, buildRej, dupRej)
	beam.ParDo0(s, &countFn{}, rejected)
	dead := beam.ParDo(s, deadKey, rejected)
	beam.ParDo(s, &writeDeadFn{Dir: filepath.Join(p.Out, "deadletter")}, beam.GroupByKey(s, dead))
	return kept
}

// readEventsFn reads one event file and emits the records of the mined
// repositories, keyed by lower-case repository name; bad lines go to the
// rejected output.
type readEventsFn struct {
	Repos []string
}

func (f *readEventsFn) ProcessElement(path string, emit func(string, []byte), rej func(Rejected)) error {
	want := map[string]bool{}
	for _, r := range f.Repos {
		want[r] = true
	}
	err := ghevents.ReadFile(path, func(r ghevents.Record, bad *ghevents.LineError) error {
		if bad != nil {
			rej(Rejected{Repo: path, ID: fmt.Sprintf("%s:%d", bad.File, bad.Line), Reason: string(mining.BadRecord), Detail: bad.Error()})
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
		rej(Rejected{Repo: path, ID: path, Reason: string(mining.BadRecord), Detail: err.Error()})
	}
	return nil
}

// scanFn walks the history of each repository with its events.
type scanFn struct {
	Commits bool
	Exclude *mining.Exclude
}

func (f *scanFn) ProcessElement(ctx context.Context, name string, dirs func(*string) bool, evs func(*[]byte) bool, emit func(Candidate), rej func(Rejected)) error {
	var recs []ghevents.Record
	var b []byte
	for evs(&b) {
		var r ghevents.Record
		if err := json.Unmarshal(b, &r); err == nil {
			recs = append(recs, r)
		}
	}
	var dir string
	for dirs(&dir) {
		live.repos.Add(1)
		promm().repos.Inc()
		beam.NewCounter(metricNS, metricRepos).Inc(ctx, 1)
		before := live.commits.Load()
		if err := scanRepo(ctx, dir, recs, scanConfig{Commits: f.Commits, Exclude: f.Exclude}, func(c Candidate) {
			beam.NewCounter(metricNS, metricCands).Inc(ctx, 1)
			if c.Number > 0 {
				beam.NewCounter(metricNS, metricPRs).Inc(ctx, 1)
				promm().prs.Inc()
			}
			emit(c)
		}, rej); err != nil {
			return err
		}
		n := live.commits.Load() - before
		beam.NewCounter(metricNS, metricCommits).Inc(ctx, n)
		promm().commits.Add(float64(n))
	}
	return nil
}

// buildFn reads each candidate's files and emits KV<patch key, compressed
// instance JSON>. Candidates are built in batches by Workers goroutines,
// each with its own `git cat-file --batch` per repository, so git's latency
// overlaps; results are emitted in input order from ProcessElement or
// FinishBundle.
type buildFn struct {
	Limits   mining.Limits
	Relevant mining.RelevantConfig
	Workers  int // default runtime.NumCPU(), at least 2

	pending []Candidate
	mu      sync.Mutex
	idle    map[string][]*gitio.CatFile // by repository directory
	all     []*gitio.CatFile
}

const buildBatch = 64

func (f *buildFn) workers() int {
	if f.Workers > 0 {
		return f.Workers
	}
	return max(2, runtime.NumCPU())
}

// acquire returns a cat-file process for dir, starting one if all are busy.
func (f *buildFn) acquire(dir string) (*gitio.CatFile, error) {
	f.mu.Lock()
	if cs := f.idle[dir]; len(cs) > 0 {
		c := cs[len(cs)-1]
		f.idle[dir] = cs[:len(cs)-1]
		f.mu.Unlock()
		return c, nil
	}
	f.mu.Unlock()
	repo, err := gitio.Open(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	// The process outlives this bundle: it is a cache, never output.
	c, err := gitio.NewCatFile(context.Background(), repo)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.all = append(f.all, c)
	f.mu.Unlock()
	return c, nil
}

func (f *buildFn) release(dir string, c *gitio.CatFile) {
	f.mu.Lock()
	if f.idle == nil {
		f.idle = map[string][]*gitio.CatFile{}
	}
	f.idle[dir] = append(f.idle[dir], c)
	f.mu.Unlock()
}

func (f *buildFn) ProcessElement(ctx context.Context, c Candidate, emit func(string, []byte), rej func(Rejected)) {
	f.pending = append(f.pending, c)
	if len(f.pending) >= buildBatch {
		f.flush(emit, rej)
	}
}

func (f *buildFn) FinishBundle(ctx context.Context, emit func(string, []byte), rej func(Rejected)) {
	f.flush(emit, rej)
}

type built struct {
	key string
	val []byte
	rej *Rejected
}

func (f *buildFn) flush(emit func(string, []byte), rej func(Rejected)) {
	if len(f.pending) == 0 {
		return
	}
	out := make([]built, len(f.pending))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(f.workers(), len(f.pending)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = f.buildOne(f.pending[i])
			}
		}()
	}
	for i := range f.pending {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, b := range out {
		if b.rej != nil {
			rej(*b.rej)
		} else {
			emit(b.key, b.val)
		}
	}
	f.pending = f.pending[:0]
}

func (f *buildFn) buildOne(c Candidate) built {
	cat, err := f.acquire(c.RepoDir)
	if err != nil {
		return built{rej: &Rejected{Repo: c.Repo, ID: c.ID, Reason: string(mining.GitError), Detail: err.Error()}}
	}
	defer f.release(c.RepoDir, cat)
	inst, r := build(cat, c, buildConfig{Limits: f.Limits, Relevant: f.Relevant})
	if r != nil {
		return built{rej: &Rejected{Repo: c.Repo, ID: c.ID, Reason: string(r.Reason), Detail: r.Detail}}
	}
	b, err := encodeInstance(&inst)
	if err != nil {
		return built{rej: &Rejected{Repo: c.Repo, ID: c.ID, Reason: string(mining.BadRecord), Detail: err.Error()}}
	}
	return built{key: mining.PatchKey(inst.OraclePatch), val: b}
}

// Teardown stops the cat-file processes.
func (f *buildFn) Teardown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.all {
		c.Close()
	}
	f.all, f.idle = nil, nil
}

// dedupWriteFn keeps one instance per oracle patch (the smallest id) and
// writes the kept instances to DIR/part-<hash>.parquet files of at most
// RowsPerFile rows, sorted by id, named by a hash of their ids: a retried
// bundle rewrites the same file (atomically: temporary name, rename). With
// Emit it also outputs KV<id, instance JSON>.
type dedupWriteFn struct {
	Dir         string
	RowsPerFile int
	Emit        bool

	rows []schemas.Instance
}

func (f *dedupWriteFn) StartBundle(ctx context.Context, emit func(string, []byte), rej func(Rejected)) {
	f.rows = f.rows[:0]
}

func (f *dedupWriteFn) ProcessElement(ctx context.Context, key string, vals func(*[]byte) bool, emit func(string, []byte), rej func(Rejected)) error {
	var all []schemas.Instance
	var raw [][]byte
	var ids []string
	var b []byte
	for vals(&b) {
		inst, js, err := decodeInstance(b)
		if err != nil {
			rej(Rejected{ID: key, Reason: string(mining.BadRecord), Detail: err.Error()})
			continue
		}
		all = append(all, inst)
		ids = append(ids, inst.ID)
		if f.Emit {
			raw = append(raw, js)
		}
	}
	if len(all) == 0 {
		return nil
	}
	keep := mining.PickFirst(ids)
	for i := range all {
		if i != keep {
			rej(Rejected{Repo: all[i].Repo, ID: ids[i], Reason: string(mining.Duplicate), Detail: ids[i] + ": same oracle patch as " + ids[keep]})
		}
	}
	if f.Emit {
		emit(ids[keep], raw[keep])
	}
	f.rows = append(f.rows, all[keep])
	if len(f.rows) >= f.RowsPerFile {
		return f.flush(ctx)
	}
	return nil
}

func (f *dedupWriteFn) FinishBundle(ctx context.Context, emit func(string, []byte), rej func(Rejected)) error {
	return f.flush(ctx)
}

func (f *dedupWriteFn) flush(ctx context.Context) error {
	if len(f.rows) == 0 {
		return nil
	}
	rows := f.rows
	sort.Slice(rows, func(i, j int) bool { return mining.IDLess(rows[i].ID, rows[j].ID) })
	h := sha256.New()
	for _, r := range rows {
		h.Write([]byte(r.ID))
		h.Write([]byte{0})
	}
	path := filepath.Join(f.Dir, fmt.Sprintf("part-%x.parquet", h.Sum(nil)[:8]))
	if err := parquetio.WriteFile(path, rows); err != nil {
		return err
	}
	beam.NewCounter(metricNS, metricKept).Inc(ctx, int64(len(rows)))
	live.kept.Add(int64(len(rows)))
	promm().instances.Add(float64(len(rows)))
	f.rows = nil
	return nil
}

// countFn counts rejections by reason.
type countFn struct{}

func (countFn) ProcessElement(ctx context.Context, r Rejected) {
	beam.NewCounter(metricNS, metricRejPrefix+r.Reason).Inc(ctx, 1)
	promm().rejected.WithLabelValues(r.Reason).Inc()
	liveRejected(r.Reason)
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

func (f *writeDeadFn) ProcessElement(_ int, vals func(*Rejected) bool, emit func(string)) error {
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
	path := filepath.Join(f.Dir, "mine.parquet")
	if err := parquetio.WriteFile(path, rows); err != nil {
		return err
	}
	emit(path)
	return nil
}

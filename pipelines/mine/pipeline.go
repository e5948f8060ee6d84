package mine

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"reflect"
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
	register.DoFn5x0[context.Context, string, func(*[]byte) bool, func(string, []byte), func(Rejected)](&dedupFn{})
	register.DoFn2x2[string, []byte, int, []byte](&shardFn{})
	register.DoFn4x1[context.Context, int, func(*[]byte) bool, func(string), error](&writeFn{})
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
	Shards     int // instance files; default 4
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
	if p.Shards <= 0 {
		p.Shards = 4
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
	kept, dupRej := beam.ParDo2(s, &dedupFn{}, beam.GroupByKey(s, built))
	shards := beam.ParDo(s, &shardFn{Shards: p.Shards}, kept)
	beam.ParDo(s, &writeFn{Dir: filepath.Join(p.Out, "instances"), Shards: p.Shards}, beam.GroupByKey(s, shards))
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

// buildFn reads each candidate's files through one cat-file process per
// repository and emits KV<patch key, instance JSON>.
type buildFn struct {
	Limits   mining.Limits
	Relevant mining.RelevantConfig

	mu   sync.Mutex
	cats map[string]*gitio.CatFile
}

func (f *buildFn) cat(ctx context.Context, dir string) (*gitio.CatFile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.cats[dir]; ok {
		return c, nil
	}
	repo, err := gitio.Open(context.Background(), dir)
	if err != nil {
		return nil, err
	}
	// The process outlives this bundle: it is a cache, never output.
	c, err := gitio.NewCatFile(context.Background(), repo)
	if err != nil {
		return nil, err
	}
	if f.cats == nil {
		f.cats = map[string]*gitio.CatFile{}
	}
	f.cats[dir] = c
	return c, nil
}

func (f *buildFn) ProcessElement(ctx context.Context, c Candidate, emit func(string, []byte), rej func(Rejected)) {
	cat, err := f.cat(ctx, c.RepoDir)
	if err != nil {
		rej(Rejected{Repo: c.Repo, ID: c.ID, Reason: string(mining.GitError), Detail: err.Error()})
		return
	}
	inst, r := build(cat, c, buildConfig{Limits: f.Limits, Relevant: f.Relevant})
	if r != nil {
		rej(Rejected{Repo: c.Repo, ID: c.ID, Reason: string(r.Reason), Detail: r.Detail})
		return
	}
	b, err := schemas.Encode(&inst)
	if err != nil {
		rej(Rejected{Repo: c.Repo, ID: c.ID, Reason: string(mining.BadRecord), Detail: err.Error()})
		return
	}
	emit(mining.PatchKey(inst.OraclePatch), b)
}

// Teardown stops the cat-file processes.
func (f *buildFn) Teardown() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.cats {
		c.Close()
	}
	f.cats = nil
}

// dedupFn keeps one instance per oracle patch: the smallest id. It emits
// KV<id, instance JSON>.
type dedupFn struct{}

func (f *dedupFn) ProcessElement(ctx context.Context, key string, vals func(*[]byte) bool, emit func(string, []byte), rej func(Rejected)) {
	var all [][]byte
	var ids []string
	var b []byte
	for vals(&b) {
		var inst schemas.Instance
		if err := schemas.Decode(b, &inst); err != nil {
			rej(Rejected{ID: key, Reason: string(mining.BadRecord), Detail: err.Error()})
			continue
		}
		all = append(all, append([]byte(nil), b...))
		ids = append(ids, inst.ID)
	}
	if len(all) == 0 {
		return
	}
	keep := mining.PickFirst(ids)
	for i := range all {
		if i != keep {
			rej(Rejected{ID: ids[i], Reason: string(mining.Duplicate), Detail: ids[i] + ": same oracle patch as " + ids[keep]})
		}
	}
	emit(ids[keep], all[keep])
}

// shardFn assigns an instance to an output file by a hash of its id.
type shardFn struct {
	Shards int
}

func (f *shardFn) ProcessElement(id string, b []byte) (int, []byte) {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(f.Shards)), b
}

// writeFn writes one shard's instances, sorted by id, to
// DIR/part-SSSSS-of-NNNNN.parquet (atomically: temporary name, rename).
type writeFn struct {
	Dir    string
	Shards int
}

func (f *writeFn) ProcessElement(ctx context.Context, shard int, vals func(*[]byte) bool, emit func(string)) error {
	var rows []schemas.Instance
	var b []byte
	for vals(&b) {
		var inst schemas.Instance
		if err := schemas.Decode(b, &inst); err != nil {
			return fmt.Errorf("mine: shard %d: %w", shard, err)
		}
		rows = append(rows, inst)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	path := filepath.Join(f.Dir, fmt.Sprintf("part-%05d-of-%05d.parquet", shard, f.Shards))
	if err := parquetio.WriteFile(path, rows); err != nil {
		return err
	}
	beam.NewCounter(metricNS, metricKept).Inc(ctx, int64(len(rows)))
	live.kept.Add(int64(len(rows)))
	promm().instances.Add(float64(len(rows)))
	emit(path)
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

package learner

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/learner/learnertest"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/parquetio"
)

// topicLog is a two-partition topic of samples as a consumer group sees it:
// a read starts at the committed offsets and gets each partition in order,
// the partitions interleaved at random.
type topicLog struct {
	parts [2][]schemas.Sample // partition p, offset i
}

// interleaved writes groups of G samples to the log the way the train
// pipeline's sink does under load (learnertest.Interleaved: members
// spread over the next groups, some produced twice), every group keeping
// to one partition (its key).
func interleaved(rng *rand.Rand, groups, G int) (*topicLog, []string) {
	rows, ids := learnertest.Interleaved(rng, groups, G, 2*G, 7)
	log := &topicLog{}
	part := map[string]int{}
	for _, s := range rows {
		p, ok := part[s.GroupID]
		if !ok {
			p = len(part) % 2
			part[s.GroupID] = p
		}
		log.parts[p] = append(log.parts[p], s)
	}
	for p := range log.parts {
		for o := range log.parts[p] {
			log.parts[p][o].Source = fmt.Sprintf("swerl.samples@%d:%d", p, o)
		}
	}
	return log, ids
}

// read returns what a consumer starting at commit reads, in a random
// interleaving of the partitions.
func (t *topicLog) read(rng *rand.Rand, commit []schemas.TopicOffset) []schemas.Sample {
	var next [2]int
	for _, o := range commit {
		if o.Topic == "swerl.samples" {
			next[o.Partition] = int(o.Offset)
		}
	}
	var out []schemas.Sample
	for next[0] < len(t.parts[0]) || next[1] < len(t.parts[1]) {
		p := rng.IntN(2)
		if next[p] >= len(t.parts[p]) {
			p = 1 - p
		}
		out = append(out, t.parts[p][next[p]])
		next[p]++
	}
	return out
}

// trainedIDs checks the index (contiguous from v0) and returns the sample
// ids of every version's record, in version order.
func trainedIDs(t *testing.T, out string) []string {
	t.Helper()
	store, err := checkpoint.Open(checkpoint.Config{Dir: out, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := store.Versions()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, r := range rows {
		if r.Version != int64(i) {
			t.Fatalf("index row %d is v%d: not contiguous", i, r.Version)
		}
		if i == 0 {
			continue
		}
		rec, err := ReadRecord(out, r.Version)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Samples...)
	}
	return ids
}

// sameOnce fails unless got holds each id of want exactly once.
func sameOnce(t *testing.T, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
		if seen[id] == 2 {
			t.Errorf("sample %s trained twice", id)
		}
	}
	for _, id := range want {
		if seen[id] == 0 {
			t.Errorf("sample %s never trained", id)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d samples trained, want %d", len(got), len(want))
	}
}

// A learner stopped after any step and resumed from the committed offsets,
// again and again, trains every sample of an interleaved topic with copies
// exactly once: commits stop below groups still held or incomplete, and
// the samples of trained groups read again are skipped.
func TestStopsAndResumesTrainEachSampleOnce(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			log, want := interleaved(rng, 12, 3)
			model := initModel(t)
			out := t.TempDir()
			cfg := Config{Out: out, Model: model, BatchGroups: 3, MaxStaleness: -1}
			var commit []schemas.TopicOffset
			pinned := false
			for run := 0; ; run++ {
				if run > 0 {
					cfg.Resume, cfg.Model = true, ""
				}
				l := newLearner(t, cfg)
				if !slices.Equal(l.Offsets(), commit) {
					t.Fatalf("run %d resumes at %v, the last commit was %v", run, l.Offsets(), commit)
				}
				src := &commitRecorder{SliceSource: &SliceSource{Samples: log.read(rng, commit)}, store: l.store}
				st, err := l.Run(context.Background(), src, 1+rng.IntN(2))
				if err != nil {
					t.Fatal(err)
				}
				if src.err != nil {
					t.Fatal(src.err)
				}
				if len(src.commits) > 0 {
					c := src.commits[len(src.commits)-1]
					hw := l.offsets
					for _, o := range c {
						if o.Offset < hw[offKey(o)].Offset {
							pinned = true
						}
					}
					commit = c
				}
				if st.Steps == 0 {
					break
				}
				if run > 40 {
					t.Fatal("no end after 40 runs")
				}
			}
			if !pinned {
				t.Error("no commit stopped below the read position: the test does not hold groups")
			}
			sameOnce(t, trainedIDs(t, out), want)
		})
	}
}

// swerl learn --samples: a resumed offline learner goes on after the samples
// it trained on (the index row records the file position, held groups pin
// it), and trains each sample once.
func TestParquetSourceResumes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	log, want := interleaved(rng, 10, 2)
	dir := t.TempDir()
	// Two files, read in name order; the copies stay (a replayed topic).
	if err := parquetio.WriteFile(filepath.Join(dir, "a.parquet"), log.parts[0]); err != nil {
		t.Fatal(err)
	}
	if err := parquetio.WriteFile(filepath.Join(dir, "b.parquet"), log.parts[1]); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cfg := Config{Out: out, Model: initModel(t), BatchGroups: 2, MaxStaleness: -1}
	total := 0
	for run := 0; run < 20; run++ {
		if run > 0 {
			cfg.Resume, cfg.Model = true, ""
		}
		l := newLearner(t, cfg)
		src, err := ParquetSource(dir)
		if err != nil {
			t.Fatal(err)
		}
		st, err := l.Run(context.Background(), src, 1)
		if err != nil {
			t.Fatal(err)
		}
		if st.Steps == 0 {
			break
		}
		total += st.Steps
		offs := l.Offsets()
		if len(offs) != 1 || offs[0].Topic != "file:"+dir {
			t.Fatalf("offsets %v, want one position in file:%s", offs, dir)
		}
	}
	if total != 5 {
		t.Errorf("%d steps, want 5 (10 groups, 2 a step)", total)
	}
	sameOnce(t, trainedIDs(t, out), want)

	// A samples directory that lost files since is refused by name.
	if err := os.Remove(filepath.Join(dir, "b.parquet")); err != nil {
		t.Fatal(err)
	}
	cfg.Resume, cfg.Model = true, ""
	l := newLearner(t, cfg)
	src, err := ParquetSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Run(context.Background(), src, 0); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want one naming %s", err, dir)
	}
}

// SFT in 3 steps, stopped, resumed for 2 more equals 5 steps straight: the
// example cursor survives the restart.
func TestSFTResumesItsCursor(t *testing.T) {
	model := initModel(t)
	ex := []Example{{ID: "a", Prompt: "say hi", Answer: "hello"}, {ID: "b", Prompt: "say bye", Answer: "bye"}, {ID: "c", Prompt: "count", Answer: "one two"}}
	train := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 96, LR: 1e-2}
	a := newLearner(t, Config{Out: t.TempDir(), Model: model, Train: train})
	if _, err := a.SFT(context.Background(), ex, 2, 5); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	b := newLearner(t, Config{Out: out, Model: model, Train: train})
	if _, err := b.SFT(context.Background(), ex, 2, 3); err != nil {
		t.Fatal(err)
	}
	b2 := newLearner(t, Config{Out: out, Resume: true, Train: train})
	if _, err := b2.SFT(context.Background(), ex, 2, 2); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(out, 5)
	if err != nil || rec.SFTNext != 10 {
		t.Fatalf("record of v5 %+v, %v; want sft_next 10", rec, err)
	}
	wa, wb := weights(a.Model()), weights(b2.Model())
	for i := range wa {
		if d := math.Abs(float64(wa[i] - wb[i])); d > 1e-6 {
			t.Fatalf("parameter %d: straight %v, resumed %v", i, wa[i], wb[i])
		}
	}
}

func FuzzStepRecord(f *testing.F) {
	f.Add([]byte(`{"version":3,"step":3,"samples":["a/0"],"sft_next":2,"finished":[{"id":"a","version":3,"last":[{"topic":"t","partition":0,"offset":4}]}]}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"finished":[{"id":"x","version":2}]}`))
	f.Add([]byte(`{"version":1} {}`))
	f.Add([]byte(`{"version":-1,"bogus":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		for _, g := range r.Finished {
			if g.ID == "" || g.Version > r.Version {
				t.Fatalf("accepted %+v", g)
			}
		}
	})
}

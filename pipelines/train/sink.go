package train

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

func init() {
	register.DoFn1x1[schemas.Sample, error](&sampleSinkFn{})
	register.DoFn1x1[schemas.DeadLetter, error](&deadSinkFn{})
}

// written is the set of sample ids under one samples directory, loaded from
// the files there on first use and grown by every write of this process.
type written struct {
	mu  sync.Mutex
	ids map[string]bool
}

var (
	writtenMu sync.Mutex
	writtenBy = map[string]*written{}
	fileSeq   atomic.Int64
)

// writtenIn returns the id set of dir, reading the sample ids of its
// complete Parquet files the first time.
func writtenIn(dir string) (*written, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	writtenMu.Lock()
	defer writtenMu.Unlock()
	if w := writtenBy[abs]; w != nil {
		return w, nil
	}
	w := &written{ids: map[string]bool{}}
	files, err := parquetio.Files(abs)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		err := parquetio.Scan(f, func(rows []sampleID) error {
			for _, r := range rows {
				w.ids[r.ID] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("train: reading sample ids: %w", err)
		}
	}
	writtenBy[abs] = w
	return w, nil
}

// sampleID reads only the id column of a samples file.
type sampleID struct {
	ID string `parquet:"id"`
}

// partName names a new part file: unique within the process and across
// restarts, and ordered by time.
func partName(dir, prefix string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d-%06d.parquet", prefix, time.Now().UnixNano(), fileSeq.Add(1)))
}

// sampleSinkFn writes the samples of a bundle to Out/samples as one or more
// Parquet files (temporary name, then rename), skipping ids already written.
type sampleSinkFn struct {
	RunID       string
	Dir         string
	RowsPerFile int

	st      *stats
	seen    *written
	pending []schemas.Sample
}

func (f *sampleSinkFn) Setup() error {
	f.st = runStats(f.RunID)
	w, err := writtenIn(f.Dir)
	f.seen = w
	return err
}

func (f *sampleSinkFn) ProcessElement(s schemas.Sample) error {
	f.pending = append(f.pending, s)
	if len(f.pending) >= f.RowsPerFile {
		return f.flush()
	}
	return nil
}

func (f *sampleSinkFn) FinishBundle() error { return f.flush() }

func (f *sampleSinkFn) flush() error {
	if len(f.pending) == 0 {
		return nil
	}
	f.seen.mu.Lock()
	defer f.seen.mu.Unlock()
	rows := f.pending[:0:0]
	batch := map[string]bool{}
	for _, s := range f.pending {
		if f.seen.ids[s.ID] || batch[s.ID] {
			f.st.dups.Add(1)
			continue
		}
		batch[s.ID] = true
		rows = append(rows, s)
	}
	f.pending = f.pending[:0]
	if len(rows) == 0 {
		return nil
	}
	if err := parquetio.WriteFile(partName(f.Dir, "samples"), rows); err != nil {
		return err
	}
	for _, s := range rows {
		f.seen.ids[s.ID] = true
		f.st.rewardSumMicro.Add(micro(s.Reward))
	}
	f.st.samples.Add(int64(len(rows)))
	f.st.files.Add(1)
	mSamples.Add(float64(len(rows)))
	return nil
}

// deadSinkFn writes the dead-letters of a bundle to Out/deadletter.
type deadSinkFn struct {
	RunID   string
	Dir     string
	st      *stats
	pending []schemas.DeadLetter
}

func (f *deadSinkFn) Setup() { f.st = runStats(f.RunID) }

func (f *deadSinkFn) ProcessElement(d schemas.DeadLetter) error {
	f.pending = append(f.pending, d)
	return nil
}

func (f *deadSinkFn) FinishBundle() error {
	if len(f.pending) == 0 {
		return nil
	}
	if err := parquetio.WriteFile(partName(f.Dir, "deadletter"), f.pending); err != nil {
		return err
	}
	f.st.files.Add(1)
	f.pending = f.pending[:0]
	return nil
}

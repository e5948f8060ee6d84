package train

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
)

func init() {
	register.DoFn3x1[string, schemas.Sample, func(kafkaio.Message), error](&sampleSinkFn{})
	register.DoFn2x1[schemas.DeadLetter, func(kafkaio.Message), error](&deadSinkFn{})
	register.Emitter1[kafkaio.Message]()
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
// Once a file is complete it emits every sample of it (and every duplicate
// it skipped, which a crash may have kept from Kafka) as a Kafka message
// keyed by group id, with the input's position as Origin when AckInput.
type sampleSinkFn struct {
	RunID       string
	Dir         string
	RowsPerFile int
	AckInput    bool

	st      *stats
	seen    *written
	pending []schemas.Sample
	origins []string
	done    []kafkaio.Message
}

func (f *sampleSinkFn) Setup() error {
	f.st = runStats(f.RunID)
	w, err := writtenIn(f.Dir)
	f.seen = w
	return err
}

func (f *sampleSinkFn) ProcessElement(origin string, s schemas.Sample, emit func(kafkaio.Message)) error {
	f.pending = append(f.pending, s)
	f.origins = append(f.origins, origin)
	if len(f.pending) >= f.RowsPerFile {
		return f.flush()
	}
	return nil
}

// FinishBundle writes what is pending, then emits the messages of every
// sample made durable in this bundle.
func (f *sampleSinkFn) FinishBundle(emit func(kafkaio.Message)) error {
	if err := f.flush(); err != nil {
		return err
	}
	for _, m := range f.done {
		emit(m)
	}
	f.done = f.done[:0]
	return nil
}

func (f *sampleSinkFn) flush() error {
	if len(f.pending) == 0 {
		return nil
	}
	f.seen.mu.Lock()
	defer f.seen.mu.Unlock()
	rows := f.pending[:0:0]
	batch := map[string]bool{}
	for i, s := range f.pending {
		v, err := schemas.Encode(&s)
		if err != nil {
			return fmt.Errorf("train: sample %s: %w", s.ID, err)
		}
		m := kafkaio.Message{Key: []byte(s.GroupID), Value: v}
		if f.AckInput {
			m.Origin = f.origins[i]
		}
		f.done = append(f.done, m)
		if f.seen.ids[s.ID] || batch[s.ID] {
			f.st.dups.Add(1)
			continue
		}
		batch[s.ID] = true
		rows = append(rows, s)
	}
	f.pending, f.origins = f.pending[:0], f.origins[:0]
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

// deadSinkFn writes the dead-letters of a bundle to Out/deadletter, then
// emits each as a Kafka message keyed by the failed record's key; with
// AckInput its Origin is the failed record's position (for stages after
// which nothing else is derived from the record).
type deadSinkFn struct {
	RunID    string
	Dir      string
	AckInput bool
	st       *stats
	pending  []schemas.DeadLetter
}

func (f *deadSinkFn) Setup() { f.st = runStats(f.RunID) }

func (f *deadSinkFn) ProcessElement(d schemas.DeadLetter, _ func(kafkaio.Message)) error {
	f.pending = append(f.pending, d)
	return nil
}

func (f *deadSinkFn) FinishBundle(emit func(kafkaio.Message)) error {
	if len(f.pending) == 0 {
		return nil
	}
	if err := parquetio.WriteFile(partName(f.Dir, "deadletter"), f.pending); err != nil {
		return err
	}
	f.st.files.Add(1)
	for _, d := range f.pending {
		v, err := schemas.Encode(&d)
		if err != nil {
			return fmt.Errorf("train: dead-letter of %s: %w", d.Source, err)
		}
		m := kafkaio.Message{Key: []byte(d.Key), Value: v}
		if f.AckInput {
			m.Origin = d.Source
		}
		emit(m)
	}
	f.pending = f.pending[:0]
	return nil
}

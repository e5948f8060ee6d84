package train

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
)

func init() {
	register.DoFn4x1[context.Context, string, schemas.Sample, func(kafkaio.Message), error](&sampleSinkFn{})
	register.DoFn2x1[schemas.DeadLetter, func(kafkaio.Message), error](&deadSinkFn{})
	register.Emitter1[kafkaio.Message]()
}

// written is the set of sample ids under one samples directory, loaded from
// the files there on first use and grown by every write of this process.
// It holds 64-bit hashes of the ids (about 20 bytes a sample), so a long
// streaming run does not keep every id string in memory; two ids collide
// with probability about n²/2⁶⁵.
type written struct {
	mu  sync.Mutex
	ids map[uint64]struct{}
}

func idHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

func (w *written) has(id string) bool { _, ok := w.ids[idHash(id)]; return ok }
func (w *written) add(id string)      { w.ids[idHash(id)] = struct{}{} }

var (
	writtenMu sync.Mutex
	writtenBy = map[string]*written{}
	fileSeq   atomic.Int64
)

// writtenIn returns the id set of dir (a local path, gs:// or s3://),
// reading the sample ids of its complete Parquet files the first time.
func writtenIn(ctx context.Context, dir string) (*written, error) {
	key := dir
	if !files.IsRemote(dir) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		key = abs
	}
	writtenMu.Lock()
	defer writtenMu.Unlock()
	if w := writtenBy[key]; w != nil {
		return w, nil
	}
	w := &written{ids: map[uint64]struct{}{}}
	parts, err := partFiles(ctx, key)
	if err != nil {
		return nil, err
	}
	for _, f := range parts {
		err := scanParquet(ctx, f, func(rows []sampleID) error {
			for _, r := range rows {
				w.add(r.ID)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("train: reading sample ids: %w", err)
		}
	}
	writtenBy[key] = w
	return w, nil
}

// partFiles lists the complete *.parquet files in dir, in name order. A
// local dir may hold temporary files of interrupted writes, which are
// skipped; an object store holds only committed objects (a part is
// uploaded whole, files.Via).
func partFiles(ctx context.Context, dir string) ([]string, error) {
	if !files.IsRemote(dir) {
		return parquetio.Files(dir)
	}
	return files.List(ctx, files.Join(dir, "*.parquet"))
}

// scanParquet reads the rows of one Parquet file, local or remote; a
// remote one is downloaded to a temporary file first (Parquet is read
// from its footer, which needs random access).
func scanParquet[T any](ctx context.Context, path string, fn func(rows []T) error) error {
	local, done, err := files.Local(ctx, path, "")
	if err != nil {
		return err
	}
	defer done()
	return parquetio.Scan(local, fn)
}

// writeParquet writes rows as the one Parquet file path, local (atomically)
// or remote (uploaded whole once written).
func writeParquet[T any](ctx context.Context, path string, rows []T) error {
	return files.Via(ctx, path, func(local string) error { return parquetio.WriteFile(local, rows) })
}

// sampleID reads only the id column of a samples file.
type sampleID struct {
	ID string `parquet:"id"`
}

// partName names a new part file: unique within the process and across
// restarts, and ordered by time.
func partName(dir, prefix string) string {
	return files.Join(dir, fmt.Sprintf("%s-%d-%06d.parquet", prefix, time.Now().UnixNano(), fileSeq.Add(1)))
}

// sampleSinkFn writes the samples of a bundle to Out/samples as one or more
// Parquet files (each complete or absent, files.Via), skipping ids already
// written.
// Once a file is complete it emits every sample of it (and every duplicate
// it skipped, which a crash may have kept from Kafka) as a Kafka message
// keyed by group id, with the input's position as Origin when AckInput.
//
// A full file is encoded and written on a background goroutine (one at a
// time, so at most two files' rows are held) while the bundle goes on;
// FinishBundle writes the rest, waits, and only then emits the messages.
type sampleSinkFn struct {
	RunID       string
	Dir         string
	RowsPerFile int
	AckInput    bool

	seen    *written
	pending []schemas.Sample
	origins []string
	writing chan flushed // the background write in flight, if any
}

// flushed is the outcome of writing one file: the Kafka messages of its
// samples, or the error that stopped it.
type flushed struct {
	msgs []kafkaio.Message
	err  error
}

func (f *sampleSinkFn) Setup(ctx context.Context) error {
	w, err := writtenIn(ctx, f.Dir)
	f.seen = w
	return err
}

func (f *sampleSinkFn) ProcessElement(ctx context.Context, origin string, s schemas.Sample, emit func(kafkaio.Message)) error {
	if f.pending == nil {
		// A file's worth at once, not a dozen doublings of ~340-byte rows.
		f.pending = make([]schemas.Sample, 0, min(f.RowsPerFile, 10000))
		f.origins = make([]string, 0, cap(f.pending))
	}
	f.pending = append(f.pending, s)
	f.origins = append(f.origins, origin)
	if len(f.pending) < f.RowsPerFile {
		return nil
	}
	var done []kafkaio.Message
	if f.writing != nil {
		r := <-f.writing
		if r.err != nil {
			return r.err
		}
		done = r.msgs
	}
	rows, origins := f.pending, f.origins
	f.pending, f.origins = nil, nil
	f.writing = make(chan flushed, 1)
	go func(out chan<- flushed) {
		msgs, err := f.write(ctx, rows, origins)
		out <- flushed{append(done, msgs...), err}
	}(f.writing)
	return nil
}

// FinishBundle writes what is pending, then emits the messages of every
// sample made durable in this bundle.
func (f *sampleSinkFn) FinishBundle(ctx context.Context, emit func(kafkaio.Message)) error {
	var done []kafkaio.Message
	if f.writing != nil {
		r := <-f.writing
		f.writing = nil
		if r.err != nil {
			return r.err
		}
		done = r.msgs
	}
	msgs, err := f.write(ctx, f.pending, f.origins)
	f.pending, f.origins = f.pending[:0], f.origins[:0]
	if err != nil {
		return err
	}
	for _, m := range append(done, msgs...) {
		emit(m)
	}
	return nil
}

// write stores rows in one new file (less the ids already written) and
// returns the Kafka messages of all of them, counting in the bundle of ctx.
func (f *sampleSinkFn) write(ctx context.Context, pending []schemas.Sample, origins []string) ([]kafkaio.Message, error) {
	if len(pending) == 0 {
		return nil, nil
	}
	f.seen.mu.Lock()
	defer f.seen.mu.Unlock()
	msgs := make([]kafkaio.Message, 0, len(pending))
	rows := pending[:0] // pending is ours: the rows to write are kept in place
	batch := make(map[string]bool, len(pending))
	var enc schemas.SampleEncoder // a group's samples come together and share their prompt
	for i := range pending {
		s := &pending[i]
		v, err := enc.Append(nil, s)
		if err != nil {
			return nil, fmt.Errorf("train: sample %s: %w", s.ID, err)
		}
		m := kafkaio.Message{Key: []byte(s.GroupID), Value: v}
		if f.AckInput {
			m.Origin = origins[i]
		}
		msgs = append(msgs, m)
		if f.seen.has(s.ID) || batch[s.ID] {
			cDuplicates.Add(ctx, 1)
			continue
		}
		batch[s.ID] = true
		rows = append(rows, *s) // an earlier slot (or s's own): s is read no more
	}
	if len(rows) == 0 {
		return msgs, nil
	}
	if err := writeParquet(ctx, partName(f.Dir, "samples"), rows); err != nil {
		return nil, err
	}
	var rewards int64
	for i := range rows {
		f.seen.add(rows[i].ID)
		rewards += micro(rows[i].Reward)
	}
	cRewardMicro.Add(ctx, rewards)
	cSamples.Add(ctx, int64(len(rows)))
	cFiles.Add(ctx, 1)
	return msgs, nil
}

// deadSinkFn writes the dead-letters of a bundle to Out/deadletter, then
// emits each as a Kafka message keyed by the failed record's key; with
// AckInput its Origin is the failed record's position (for stages after
// which nothing else is derived from the record).
type deadSinkFn struct {
	RunID    string
	Dir      string
	AckInput bool
	pending  []schemas.DeadLetter
}

func (f *deadSinkFn) ProcessElement(d schemas.DeadLetter, _ func(kafkaio.Message)) error {
	f.pending = append(f.pending, d)
	return nil
}

func (f *deadSinkFn) FinishBundle(ctx context.Context, emit func(kafkaio.Message)) error {
	if len(f.pending) == 0 {
		return nil
	}
	if err := writeParquet(ctx, partName(f.Dir, "deadletter"), f.pending); err != nil {
		return err
	}
	cFiles.Add(ctx, 1)
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

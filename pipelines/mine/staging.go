package mine

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/klauspost/compress/s2"

	"swerl/internal/bincode"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/transforms/mining"
)

// Staging: the build stage writes each built instance once, as a
// self-contained record (binary; S2-compressed in an object store), to a
// scratch file; only a
// stagedRow (where the record is) and the dedup reference cross the
// shuffle. The finalize step reads back one record at a time, in id order,
// and streams it into the instance file, so no stage holds more than a
// batch of instances whatever the length of the history.

// stagedRow locates one built instance in a staging file.
type stagedRow struct {
	ID   string
	File string
	Off  int64
	Len  int64 // record bytes in the file
	Size int64 // record bytes before compression
	S2   bool  // the record is S2-compressed
}

// stagedRecord is a built instance, encoded for a staging file.
type stagedRecord struct {
	ID, PatchKey string
	Data         []byte // binary instance, or S2 of it; in a pooled buffer: see release
	Size         int    // bytes of the binary instance
	S2           bool   // Data is compressed
}

// recordBufs pools the buffers of staging records: the binary form of an
// instance is garbage once compressed, and the compressed form once
// written, and at a few tens of KiB an instance they were a fifth of what
// mining allocated (and so of its garbage collection).
var recordBufs sync.Pool // *[]byte

func getBuf(n int) *[]byte {
	if p, ok := recordBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, n)
	return &b
}

// release returns r's buffer to the pool; r.Data must not be used after.
func (r *stagedRecord) release() {
	if r.Data != nil {
		b := r.Data[:0]
		recordBufs.Put(&b)
		r.Data = nil
	}
}

// Staging records are written and read once by the same program, so speed
// matters more than size or a self-describing format: each is the
// instance in package bincode's primitives (a version byte first),
// compressed with S2 (snappy's faster successor), on local scratch as in
// an object store. Compressed, staging needs about the disk of the final
// Parquet, so a disk that holds the output holds the run; S2 is the
// codec that costs mining no measurable time (the figures, and the
// formats and codecs tried before: bench/mine/README.md, "Choices in the
// code").
const stagingVersion = 1

// encodeRecord encodes inst for a staging file, compressed when compress
// is set.
func encodeRecord(inst *schemas.Instance, compress bool) stagedRecord {
	raw := getBuf(1 + inst.BincodeSize())
	b := appendInstance((*raw)[:0], inst)
	rec := stagedRecord{ID: inst.ID, PatchKey: mining.PatchKey(inst.OraclePatch), Data: b, Size: len(b)}
	if compress {
		dst := getBuf(s2.MaxEncodedLen(len(b)))
		rec.Data, rec.S2 = s2.Encode((*dst)[:cap(*dst)], b), true
		*raw = b[:0]
		recordBufs.Put(raw)
	}
	return rec
}

// appendInstance writes the staging version and every field of v (the
// coder is generated from schemas.Instance; TestStagingCarriesEveryField
// checks it carries every field).
func appendInstance(b []byte, v *schemas.Instance) []byte {
	return v.AppendBincode(append(b, stagingVersion))
}

// readInstance reads what appendInstance wrote.
func readInstance(b []byte, v *schemas.Instance) error {
	d := bincode.NewDecoder(b)
	d.Version(stagingVersion)
	v.ReadBincode(d)
	return d.End()
}

// decodeRecord reads back the instance of one staging record (S2 when
// compressed); buf is scratch space, returned for reuse.
func decodeRecord(data, buf []byte, compressed bool, inst *schemas.Instance) ([]byte, error) {
	if !compressed {
		return buf, readInstance(data, inst)
	}
	n, err := s2.DecodedLen(data)
	if err != nil {
		return buf, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	if buf, err = s2.Decode(buf[:cap(buf)], data); err != nil {
		return buf, err
	}
	return buf, readInstance(buf, inst)
}

// idsName sorts ids (IDLess) and names them by a hash: prefix-<hash>ext.
func idsName(prefix, ext string, ids []string) string {
	sort.Slice(ids, func(i, j int) bool { return mining.IDLess(ids[i], ids[j]) })
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s-%x%s", prefix, h.Sum(nil)[:8], ext)
}

// writeStaging writes recs to one staging file in dir, named by a hash of
// their ids (a retried bundle rewrites the same file), and returns where
// each record is, in the order of recs. Staging files are scratch: they
// are renamed into place complete but not synced; Run clears them. In an
// object store (dir gs:// or s3://, where the finalize workers of a
// distributed runner can read them) a staging file is written locally and
// uploaded whole.
func writeStaging(ctx context.Context, dir string, recs []stagedRecord) ([]stagedRow, error) {
	ids := make([]string, len(recs))
	for i := range recs {
		ids[i] = recs[i].ID
	}
	ext := ".bin"
	if len(recs) > 0 && recs[0].S2 {
		ext = ".s2"
	}
	path := files.Join(dir, idsName("batch", ext, ids))
	local := dir
	if files.IsRemote(dir) {
		local = ""
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mine: staging: %w", err)
	}
	f, err := os.CreateTemp(local, ".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("mine: staging: %w", err)
	}
	rows := make([]stagedRow, len(recs))
	var off int64
	for i, r := range recs {
		rows[i] = stagedRow{ID: r.ID, File: path, Off: off, Len: int64(len(r.Data)), Size: int64(r.Size), S2: r.S2}
		off += int64(len(r.Data))
		if _, err = f.Write(r.Data); err != nil {
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if files.IsRemote(path) {
			err = files.Upload(ctx, f.Name(), path)
			os.Remove(f.Name())
		} else {
			err = os.Rename(f.Name(), path)
		}
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("mine: staging: %w", err)
	}
	return rows, nil
}

// stagingReader reads records from staging files, keeping each file open;
// a staging file in an object store is downloaded to a local temporary
// file first (close removes it), so records are read at their offsets.
type stagingReader struct {
	ctx   context.Context
	files map[string]*os.File
	done  []func()
	raw   []byte
	buf   []byte
}

// read decodes the record at r into inst.
func (s *stagingReader) read(r stagedRow, inst *schemas.Instance) error {
	f, ok := s.files[r.File]
	if !ok {
		ctx := s.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		local, done, err := files.Local(ctx, r.File, "")
		if err != nil {
			return err
		}
		s.done = append(s.done, done)
		if f, err = os.Open(local); err != nil {
			return err
		}
		if s.files == nil {
			s.files = map[string]*os.File{}
		}
		s.files[r.File] = f
	}
	if int64(cap(s.raw)) < r.Len {
		s.raw = make([]byte, r.Len)
	}
	s.raw = s.raw[:r.Len]
	if _, err := f.ReadAt(s.raw, r.Off); err != nil {
		return fmt.Errorf("mine: staging %s: %w", r.File, err)
	}
	var err error
	if s.buf, err = decodeRecord(s.raw, s.buf, r.S2, inst); err != nil {
		return fmt.Errorf("mine: staging %s at %d (%s): %w", r.File, r.Off, r.ID, err)
	}
	return nil
}

func (s *stagingReader) close() {
	for _, f := range s.files {
		f.Close()
	}
	for _, done := range s.done {
		done()
	}
	s.files, s.done = nil, nil
}

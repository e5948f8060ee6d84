package parquetio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"swerl/internal/atomicfile"
)

// tempFile creates a hidden temporary file beside path.
func tempFile(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("parquetio: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("parquetio: %w", err)
	}
	// CreateTemp makes the file 0600; Parquet outputs (the checkpoint index
	// among them) are read by other users' processes too.
	if err := f.Chmod(atomicfile.FileMode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("parquetio: %w", err)
	}
	return f, nil
}

// IsTemp reports whether name is a temporary file of this package (a write
// that did not complete).
func IsTemp(name string) bool {
	b := filepath.Base(name)
	return strings.HasPrefix(b, ".") && strings.Contains(b, ".tmp-")
}

func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{parquet.Compression(fileCodec)}
}

// fileCodec is WriteFile's page compression, shared by all writers so its
// pooled encoders (16 MiB of history each) are reused rather than made anew
// for every file.
var fileCodec = &zstd.Codec{Level: zstd.SpeedDefault}

// streamPageBytes is the page size of a FileWriter: rows arrive one at a
// time, so pages end at this size. Instance rows repeat one another's
// files (code context, oracle contents), and a page is compressed on its
// own, so larger pages find more of the repeats: pallets/flask's 707
// instances take 37.7 MB in 512 KiB pages, 22.0 MB in 1 MiB, 14.1 MB in
// 2 MiB, 10.1 MB in 4 MiB, and zstd's CPU falls with the bytes it writes
// (writing them all: 0.38-0.40 s at 1 MiB, 0.30-0.31 s at 2 MiB). But
// each column buffers up to a page, and the mining run's memory limit
// follows the live heap, so 2 MiB pages took its peak RSS from 396-410 to
// 430-461 MiB at 20000 generated commits for no gain in wall time there:
// pages stay at 1 MiB.
const streamPageBytes = 1 << 20

func streamOptions() []parquet.WriterOption {
	return []parquet.WriterOption{parquet.Compression(streamCodec), parquet.PageBufferSize(streamPageBytes)}
}

// streamCodec is zstd at its fastest level with a 2 MiB window, enough for
// a FileWriter's pages: parquet-go's codec keeps the default 8 MiB window,
// 16 MiB of history per encoder, which dominated the heap of a writer.
// The fastest level costs less CPU than the default for files of about
// the same size, since pages of source code are mostly long repeats that
// both levels find (bench/mine/README.md, "Choices in the code").
var streamCodec = &zstdCodec{}

type zstdCodec struct {
	once sync.Once
	enc  *kzstd.Encoder
	dec  zstd.Codec
}

func (c *zstdCodec) String() string { return "ZSTD" }

func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	c.once.Do(func() {
		var err error
		c.enc, err = kzstd.NewWriter(nil, kzstd.WithEncoderLevel(kzstd.SpeedFastest), kzstd.WithZeroFrames(true),
			kzstd.WithEncoderCRC(false), kzstd.WithWindowSize(2<<20))
		if err != nil {
			panic(err)
		}
	})
	return c.enc.EncodeAll(src, dst[:0]), nil
}

func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) { return c.dec.Decode(dst, src) }

// WriteFile writes rows to path atomically: temporary name, fsync, rename.
// An existing file at path is replaced.
func WriteFile[T any](path string, rows []T) error {
	f, err := tempFile(path)
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("parquetio: write %s: %w", path, err)
	}
	w := parquet.NewGenericWriter[T](f, writerOptions()...)
	if len(rows) > 0 {
		if _, err := w.Write(rows); err != nil {
			return fail(err)
		}
	}
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("parquetio: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("parquetio: write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// FileWriter writes one Parquet file row by row, atomically like WriteFile:
// the rows go to a temporary file beside the final path, which Close syncs
// and renames. Flush ends the current row group, so a writer that flushes
// every so often holds one row group's compressed pages in memory, not the
// file's. A FileWriter is not safe for concurrent use.
type FileWriter[T any] struct {
	path string
	f    *os.File
	w    *parquet.GenericWriter[T]
	rows int64
}

// Create starts a FileWriter for path.
func Create[T any](path string) (*FileWriter[T], error) {
	f, err := tempFile(path)
	if err != nil {
		return nil, err
	}
	return &FileWriter[T]{path: path, f: f, w: parquet.NewGenericWriter[T](f, streamOptions()...)}, nil
}

// Write adds rows to the current row group.
func (w *FileWriter[T]) Write(rows ...T) error {
	if _, err := w.w.Write(rows); err != nil {
		return w.fail(err)
	}
	w.rows += int64(len(rows))
	return nil
}

// Flush ends the current row group (a no-op when it is empty).
func (w *FileWriter[T]) Flush() error {
	if err := w.w.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

// Rows is the number of rows written so far.
func (w *FileWriter[T]) Rows() int64 { return w.rows }

// Close writes the footer and moves the file to its path; after an error
// nothing is left at the temporary name.
func (w *FileWriter[T]) Close() error {
	if w.f == nil {
		return fmt.Errorf("parquetio: write %s: writer closed", w.path)
	}
	if err := w.w.Close(); err != nil {
		return w.fail(err)
	}
	if err := w.f.Sync(); err != nil {
		return w.fail(err)
	}
	tmp := w.f.Name()
	err := w.f.Close()
	w.f = nil
	if err == nil {
		err = os.Rename(tmp, w.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("parquetio: write %s: %w", w.path, err)
	}
	return syncDir(filepath.Dir(w.path))
}

// Abort discards the file; it is a no-op after Close or an error.
func (w *FileWriter[T]) Abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

func (w *FileWriter[T]) fail(err error) error {
	w.Abort()
	return fmt.Errorf("parquetio: write %s: %w", w.path, err)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil // best effort: not every platform opens directories
	}
	defer d.Close()
	d.Sync()
	return nil
}

// ReadFile reads every row of the Parquet file at path as T. Columns of the
// file that T lacks are ignored; columns T has that the file lacks are zero.
func ReadFile[T any](path string) ([]T, error) {
	var out []T
	err := Scan(path, func(rows []T) error {
		out = append(out, rows...)
		return nil
	})
	return out, err
}

// Scan reads the file at path in batches and calls fn with each batch. The
// slice passed to fn is reused between calls: copy rows to keep them.
//
// Any bytes are safe to read: a damaged or hostile file is an error
// wrapping ErrCorrupt that names it, never a panic or an unbounded
// allocation (see openFile), and so is a file whose columns do not fit T
// (see checkRowType). Errors returned by fn are returned as they are.
func Scan[T any](path string, fn func(rows []T) error) error {
	f, err := openFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanFile(f.path, f.pf, fn)
}

// scanFile reads the rows of an opened file.
func scanFile[T any](path string, pf *parquet.File, fn func(rows []T) error) error {
	if err := checkRowType[T](path, pf.Schema()); err != nil {
		return err
	}
	var r *parquet.GenericReader[T]
	if err := guard(path, "read", func() error {
		r = parquet.NewGenericReader[T](pf)
		return nil
	}); err != nil {
		return err
	}
	// A reader that panicked is abandoned, not closed: its state is
	// unknown, and closing it only returns buffers to pools.
	abandoned := false
	defer func() {
		if !abandoned {
			guard(path, "close", r.Close)
		}
	}()
	buf := make([]T, 256)
	for {
		clear(buf)
		var n int
		err := guard(path, "read", func() error {
			var err error
			n, err = r.Read(buf)
			return err
		})
		if errors.Is(err, ErrCorrupt) { // only a panic gives ErrCorrupt here
			abandoned = true
			return err
		}
		if n > 0 {
			if ferr := fn(buf[:n]); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return corrupt(path, "%v", err)
		}
	}
}

// Files lists the complete *.parquet files in dir in name order, skipping
// temporary files left by interrupted writes. A missing dir yields no files.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parquetio: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || IsTemp(e.Name()) || !strings.HasSuffix(e.Name(), ".parquet") {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	sort.Strings(out)
	return out, nil
}

// ReadDir reads every complete *.parquet file in dir, in name order.
func ReadDir[T any](dir string) ([]T, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, f := range files {
		rows, err := ReadFile[T](f)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// DirWriter writes rows to a sequence of files "<prefix>-<seq>.parquet" in
// one directory, each completed atomically. Rows are buffered in memory
// until RowsPerFile rows are pending or Flush is called.
type DirWriter[T any] struct {
	dir, prefix string
	rowsPerFile int
	seq         int
	pending     []T
	files       []string
}

// NewDirWriter returns a writer into dir. rowsPerFile ≤ 0 means 10000. The
// sequence number continues after the highest existing "<prefix>-N.parquet"
// in dir, so a restarted writer never overwrites earlier files.
func NewDirWriter[T any](dir, prefix string, rowsPerFile int) *DirWriter[T] {
	if rowsPerFile <= 0 {
		rowsPerFile = 10000
	}
	w := &DirWriter[T]{dir: dir, prefix: prefix, rowsPerFile: rowsPerFile}
	if files, err := Files(dir); err == nil {
		for _, f := range files {
			var n int
			base := filepath.Base(f)
			if _, err := fmt.Sscanf(base, prefix+"-%d.parquet", &n); err == nil && n >= w.seq {
				w.seq = n + 1
			}
		}
	}
	return w
}

// Write buffers rows, writing a file each time RowsPerFile rows are pending.
func (w *DirWriter[T]) Write(rows ...T) error {
	w.pending = append(w.pending, rows...)
	for len(w.pending) >= w.rowsPerFile {
		if err := w.writeFile(w.pending[:w.rowsPerFile]); err != nil {
			return err
		}
		w.pending = append(w.pending[:0], w.pending[w.rowsPerFile:]...)
	}
	return nil
}

// Flush writes any pending rows to a new complete file.
func (w *DirWriter[T]) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.writeFile(w.pending); err != nil {
		return err
	}
	w.pending = w.pending[:0]
	return nil
}

// Close flushes pending rows.
func (w *DirWriter[T]) Close() error { return w.Flush() }

// Files returns the files this writer completed, in order.
func (w *DirWriter[T]) Files() []string { return append([]string(nil), w.files...) }

func (w *DirWriter[T]) writeFile(rows []T) error {
	name := filepath.Join(w.dir, fmt.Sprintf("%s-%06d.parquet", w.prefix, w.seq))
	if err := WriteFile(name, rows); err != nil {
		return err
	}
	w.seq++
	w.files = append(w.files, name)
	return nil
}

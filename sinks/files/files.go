// Package files reads and writes swerl's files wherever they are: local
// paths, gs:// (Google Cloud Storage) and s3:// (Amazon S3 and
// S3-compatible stores), through Beam's filesystem API
// (github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem), so that a
// pipeline's outputs and inputs can live in object storage that every
// worker of a distributed runner reaches.
//
// A local path is written atomically (a temporary file renamed into
// place); an object is committed when its writer is closed, which object
// stores make atomic. Credentials and endpoints are those of the stores'
// own clients: Application Default Credentials and STORAGE_EMULATOR_HOST
// for gs://, the AWS SDK's environment and files (AWS_REGION,
// AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, …) for s3://.
//
// Object stores have no directories: List, RemoveFiles and the helpers
// here treat "dir/name" keys as files in dir, one level deep.
package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // gs://
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/s3"  // s3://

	"swerl/internal/atomicfile"
)

// IsRemote reports whether p names an object ("scheme://…") rather than a
// local path. file:// is not used by swerl; any other scheme is remote.
func IsRemote(p string) bool {
	i := strings.Index(p, "://")
	return i > 0 && !strings.ContainsAny(p[:i], "/\\")
}

// Join joins path elements: with "/" after a remote prefix, as
// filepath.Join for local paths.
func Join(base string, elem ...string) string {
	if !IsRemote(base) {
		return filepath.Join(append([]string{base}, elem...)...)
	}
	i := strings.Index(base, "://") + 3
	return base[:i] + path.Join(append([]string{base[i:]}, elem...)...)
}

// Base is the last element of p.
func Base(p string) string {
	if IsRemote(p) {
		return path.Base(p[strings.Index(p, "://")+3:])
	}
	return filepath.Base(p)
}

// systems caches one filesystem client a scheme: making one (an AWS
// config, a GCS client) is not cheap, and clients are safe for
// concurrent use.
var systems sync.Map // scheme → filesystem.Interface

func system(ctx context.Context, p string) (filesystem.Interface, error) {
	scheme := p[:strings.Index(p, "://")]
	if v, ok := systems.Load(scheme); ok {
		return v.(filesystem.Interface), nil
	}
	// Beam's constructors take the context for the life of the client and
	// panic on configuration errors; neither should end with the caller's.
	var fsys filesystem.Interface
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("files: %s: %v", p, r)
			}
		}()
		fsys, err = filesystem.New(context.WithoutCancel(ctx), p)
	}()
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	v, _ := systems.LoadOrStore(scheme, fsys)
	return v.(filesystem.Interface), nil
}

// Open opens p for reading.
func Open(ctx context.Context, p string) (io.ReadCloser, error) {
	if !IsRemote(p) {
		return os.Open(p)
	}
	fsys, err := system(ctx, p)
	if err != nil {
		return nil, err
	}
	r, err := fsys.OpenRead(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("files: open %s: %w", p, err)
	}
	return r, nil
}

// ReadFile reads the whole of p.
func ReadFile(ctx context.Context, p string) ([]byte, error) {
	if !IsRemote(p) {
		return os.ReadFile(p)
	}
	r, err := Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("files: read %s: %w", p, err)
	}
	return b, nil
}

// Writer is a file being written: Close commits it, Abort drops it.
type Writer interface {
	io.Writer
	Close() error
	Abort()
}

// Create opens p for writing, creating local parent directories. Nothing
// is visible at p until Close succeeds.
func Create(ctx context.Context, p string) (Writer, error) {
	if !IsRemote(p) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		f, err := os.CreateTemp(filepath.Dir(p), ".tmp-"+filepath.Base(p)+"-*")
		if err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		return &localWriter{f: f, path: p}, nil
	}
	fsys, err := system(ctx, p)
	if err != nil {
		return nil, err
	}
	// The object is written only when Close succeeds: a writer abandoned
	// half way (Abort) leaves no object.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := fsys.OpenWrite(wctx, p)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("files: create %s: %w", p, err)
	}
	return &remoteWriter{w: w, path: p, cancel: cancel}, nil
}

type localWriter struct {
	f    *os.File
	path string
	done bool
}

func (w *localWriter) Write(b []byte) (int, error) { return w.f.Write(b) }

func (w *localWriter) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(w.f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.path)
	}
	if err != nil {
		os.Remove(w.f.Name())
		return fmt.Errorf("files: write %s: %w", w.path, err)
	}
	return nil
}

func (w *localWriter) Abort() {
	if !w.done {
		w.done = true
		w.f.Close()
		os.Remove(w.f.Name())
	}
}

type remoteWriter struct {
	w      io.WriteCloser
	path   string
	cancel context.CancelFunc
	done   bool
}

func (w *remoteWriter) Write(b []byte) (int, error) { return w.w.Write(b) }

func (w *remoteWriter) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	defer w.cancel()
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("files: write %s: %w", w.path, err)
	}
	return nil
}

func (w *remoteWriter) Abort() {
	if !w.done {
		w.done = true
		w.cancel() // the upload fails with the context instead of committing
		w.w.Close()
	}
}

// WriteFile writes data to p atomically.
func WriteFile(ctx context.Context, p string, data []byte) error {
	if !IsRemote(p) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("files: %w", err)
		}
		return atomicfile.WriteFile(p, data)
	}
	w, err := Create(ctx, p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		w.Abort()
		return fmt.Errorf("files: write %s: %w", p, err)
	}
	return w.Close()
}

// Upload copies the local file src to dst (any path); a local dst is
// written atomically.
func Upload(ctx context.Context, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("files: %w", err)
	}
	defer f.Close()
	w, err := Create(ctx, dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		w.Abort()
		return fmt.Errorf("files: copy %s to %s: %w", src, dst, err)
	}
	return w.Close()
}

// Local returns a local path holding the content of p: p itself when it is
// local, else a copy downloaded to a temporary file in dir ("" for the
// system's), which done removes. done is never nil.
func Local(ctx context.Context, p, dir string) (local string, done func(), err error) {
	if !IsRemote(p) {
		return p, func() {}, nil
	}
	r, err := Open(ctx, p)
	if err != nil {
		return "", func() {}, err
	}
	defer r.Close()
	f, err := os.CreateTemp(dir, "swerl-fetch-*-"+Base(p))
	if err != nil {
		return "", func() {}, fmt.Errorf("files: %w", err)
	}
	done = func() { os.Remove(f.Name()) }
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		done()
		return "", func() {}, fmt.Errorf("files: download %s: %w", p, err)
	}
	return f.Name(), done, nil
}

// List returns the files matching glob (a pattern in its last element,
// as filepath.Match reads it), sorted.
func List(ctx context.Context, glob string) ([]string, error) {
	if !IsRemote(glob) {
		out, err := filepath.Glob(glob)
		if err != nil {
			return nil, fmt.Errorf("files: %w", err)
		}
		sort.Strings(out)
		return out, nil
	}
	fsys, err := system(ctx, glob)
	if err != nil {
		return nil, err
	}
	out, err := fsys.List(ctx, glob)
	if err != nil {
		return nil, fmt.Errorf("files: list %s: %w", glob, err)
	}
	sort.Strings(out)
	return out, nil
}

// Exists reports whether p is a file.
func Exists(ctx context.Context, p string) (bool, error) {
	if !IsRemote(p) {
		_, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	// Listing the exact key tells "absent" from a failure, which an error
	// from Size does not.
	got, err := List(ctx, p)
	if err != nil {
		return false, err
	}
	return len(got) > 0, nil
}

// Remove removes the file p; a file that is not there is no error.
func Remove(ctx context.Context, p string) error {
	if !IsRemote(p) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("files: %w", err)
		}
		return nil
	}
	fsys, err := system(ctx, p)
	if err != nil {
		return err
	}
	rm, ok := fsys.(filesystem.Remover)
	if !ok {
		return fmt.Errorf("files: %s: the store cannot remove objects", p)
	}
	if ok, err := Exists(ctx, p); err != nil || !ok {
		return err
	}
	if err := rm.Remove(ctx, p); err != nil {
		return fmt.Errorf("files: remove %s: %w", p, err)
	}
	return nil
}

// RemoveAll removes dir and everything under it: a local directory tree,
// or every object whose key starts with dir + "/".
func RemoveAll(ctx context.Context, dir string) error {
	if !IsRemote(dir) {
		return os.RemoveAll(dir)
	}
	for depth := 1; depth <= 4; depth++ {
		glob := strings.TrimSuffix(dir, "/") + strings.Repeat("/*", depth)
		got, err := List(ctx, glob)
		if err != nil {
			return err
		}
		for _, p := range got {
			if err := Remove(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// ResetClients drops the cached store clients, so that the next use
// reads the environment again (a test that starts an emulator).
func ResetClients() {
	systems.Range(func(k, v any) bool {
		v.(filesystem.Interface).Close()
		systems.Delete(k)
		return true
	})
}

// Via writes dst with a function that writes local paths (a Parquet
// writer, a library's file output): write gets dst itself when dst is
// local, else a temporary local file that is uploaded to dst and
// removed. write must leave nothing at its path on error.
func Via(ctx context.Context, dst string, write func(local string) error) error {
	if !IsRemote(dst) {
		return write(dst)
	}
	dir, err := os.MkdirTemp("", "swerl-upload-*")
	if err != nil {
		return fmt.Errorf("files: %w", err)
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, Base(dst))
	if err := write(local); err != nil {
		return err
	}
	return Upload(ctx, local, dst)
}

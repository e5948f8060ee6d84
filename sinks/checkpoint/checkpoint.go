package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"swerl/internal/atomicfile"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/parquetio"
)

// Layout names under the store directory.
const (
	// IndexFile is the Parquet index: one schemas.WeightVersion row a
	// published version, in version order.
	IndexFile = "index.parquet"
	// CheckpointsDir holds one directory a version, named by VersionDir.
	CheckpointsDir = "checkpoints"
)

// Modes of a published checkpoint: readable by every user, so that an
// inference engine running as another user can load it; written only by
// the learner.
const (
	DirMode  = 0o755
	FileMode = atomicfile.FileMode
)

// ErrNoCheckpoint is returned by LatestGood when no published version
// passes verification (or none was published).
var ErrNoCheckpoint = errors.New("checkpoint: no good checkpoint")

// VersionDir returns the directory name of a version: v000123.
func VersionDir(version int64) string { return fmt.Sprintf("v%06d", version) }

// Config configures a Store. The zero value is valid.
type Config struct {
	// Dir is the store root holding index.parquet and checkpoints/: a
	// local path, or gs:// or s3:// (sinks/files). Default "swerl-out".
	Dir string
	// Now returns the publication time. Default time.Now.
	Now func() time.Time
	// Log receives one warning for every checkpoint skipped as corrupt and
	// every leftover temporary directory removed. Default: slog.Default().
	Log *slog.Logger
	// ReadOnly opens the store for readers (a policy polling for new
	// versions): Open creates nothing and leaves temporary directories
	// alone, since they may be a publish in progress in another process.
	// Publish fails on a read-only store.
	ReadOnly bool
	// Keep, when positive, is how many of the newest versions keep their
	// files: after each publish the directories of older versions are
	// deleted, except the first version's (the run's starting point and
	// the KL reference). Their index rows stay, so the history of metrics
	// per version is whole; Verify fails for a deleted version and
	// LatestGood passes over it. Values below 2 keep 2, so a reader that is
	// still loading the previous newest version finds it. 0 keeps all.
	Keep int
	// Pin lists versions that Keep never deletes (a KL reference).
	Pin []int64
}

func (c Config) dir() string {
	if c.Dir == "" {
		return "swerl-out"
	}
	return c.Dir
}

func (c Config) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c Config) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Store is a versioned checkpoint store on a local (or mounted) file
// system or in an object store. Methods are safe for concurrent use within
// one process; at most one process may publish to a directory at a time.
type Store struct {
	cfg    Config
	root   string // absolute, or a gs:// or s3:// URL
	remote bool
	mu     sync.Mutex
}

// Open opens (creating if needed) the store at cfg.Dir. Temporary
// directories left by an interrupted Publish are removed, with a warning.
//
// In an object store there are no temporary directories: Publish writes
// the version's files in a local temporary directory and uploads them.
func Open(cfg Config) (*Store, error) {
	if files.IsRemote(cfg.dir()) {
		return &Store{cfg: cfg, root: strings.TrimSuffix(cfg.dir(), "/"), remote: true}, nil
	}
	root, err := filepath.Abs(cfg.dir())
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	s := &Store{cfg: cfg, root: root}
	if cfg.ReadOnly {
		return s, nil
	}
	if err := os.MkdirAll(filepath.Join(root, CheckpointsDir), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	ents, err := os.ReadDir(filepath.Join(root, CheckpointsDir))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			p := filepath.Join(root, CheckpointsDir, e.Name())
			s.cfg.log().Warn("checkpoint: removing the temporary directory of an interrupted publish", "path", p)
			if err := os.RemoveAll(p); err != nil {
				return nil, fmt.Errorf("checkpoint: %w", err)
			}
		}
	}
	return s, nil
}

// Dir returns the absolute store root (a URL for an object store).
func (s *Store) Dir() string { return s.root }

// Path returns the directory of a version (a URL prefix for an object
// store: Fetch copies it to a local directory).
func (s *Store) Path(version int64) string {
	return files.Join(s.root, CheckpointsDir, VersionDir(version))
}

// Versions returns the rows of index.parquet in version order; an absent
// index is an empty store.
func (s *Store) Versions() ([]schemas.WeightVersion, error) {
	ctx := context.Background()
	p := files.Join(s.root, IndexFile)
	if ok, err := files.Exists(ctx, p); err != nil {
		return nil, fmt.Errorf("checkpoint: read index: %w", err)
	} else if !ok {
		return nil, nil
	}
	local, done, err := files.Local(ctx, p, "")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read index: %w", err)
	}
	defer done()
	rows, err := parquetio.ReadFile[schemas.WeightVersion](local)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read index: %w", err)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Version < rows[j].Version })
	return rows, nil
}

// Newest returns the index's newest row without verifying its files; ok is
// false for an empty store. A poll compares it with what it serves before
// verifying anything (LatestGood hashes whole checkpoints).
func (s *Store) Newest() (row schemas.WeightVersion, ok bool, err error) {
	rows, err := s.Versions()
	if err != nil || len(rows) == 0 {
		return row, false, err
	}
	return rows[len(rows)-1], true, nil
}

// Publish writes one checkpoint. write fills an empty temporary directory
// (for a model: config.json, safetensors, tokenizer files); then every file
// is synced and hashed, the directory is renamed to checkpoints/vNNNNNN,
// and a row is appended to index.parquet by rewriting the small index to a
// temporary file and renaming it. A crash at any point leaves either the
// previous index (and at most an unindexed directory, replaced by the next
// publish of that version) or the new one.
//
// meta supplies Version, Step, the training metrics and Offsets. Version
// must be greater than every published version (any value ≥ 0 for the
// first). Publish sets SchemaVersion, Parent (the previous version, or -1),
// URI (file:// URL of the directory), Files and CreatedAt, and returns the
// row as written.
//
// In an object store the directory is written and hashed locally, its
// files are uploaded under checkpoints/vNNNNNN (after removing any
// unindexed leftovers there), and the index object is replaced whole; the
// URI is the directory's URL. An object is visible only once complete, so
// the same guarantee holds: the index names only fully uploaded versions.
func (s *Store) Publish(meta schemas.WeightVersion, write func(dir string) error) (schemas.WeightVersion, error) {
	if s.cfg.ReadOnly {
		return meta, fmt.Errorf("checkpoint: publish version %d: the store %s is open read-only", meta.Version, s.root)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.Versions()
	if err != nil {
		return meta, err
	}
	meta.Parent = -1
	if n := len(rows); n > 0 {
		last := rows[n-1].Version
		if meta.Version <= last {
			return meta, fmt.Errorf("checkpoint: publish version %d: not after the latest version %d", meta.Version, last)
		}
		meta.Parent = last
	}
	if meta.Version < 0 {
		return meta, fmt.Errorf("checkpoint: publish: negative version %d", meta.Version)
	}
	name := VersionDir(meta.Version)
	cpDir := filepath.Join(s.root, CheckpointsDir)
	tmpIn := cpDir
	if s.remote {
		tmpIn = "" // the system's temporary directory
	}
	tmp, err := os.MkdirTemp(tmpIn, ".tmp-"+name+"-")
	if err != nil {
		return meta, fmt.Errorf("checkpoint: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op after the rename (hashDir sets its mode: MkdirTemp's is 0700)
	if err := write(tmp); err != nil {
		return meta, fmt.Errorf("checkpoint: write %s: %w", name, err)
	}
	hashes, err := hashDir(tmp, true)
	if err != nil {
		return meta, fmt.Errorf("checkpoint: %s: %w", name, err)
	}
	if len(hashes) == 0 {
		return meta, fmt.Errorf("checkpoint: write %s: no files written", name)
	}
	final := s.Path(meta.Version)
	if s.remote {
		if err := s.upload(tmp, final, hashes); err != nil {
			return meta, fmt.Errorf("checkpoint: publish %s: %w", name, err)
		}
		meta.URI = final
	} else {
		// A directory without an index row is the leftover of a publish
		// that crashed before the index was renamed: it was never
		// announced.
		if err := os.RemoveAll(final); err != nil {
			return meta, fmt.Errorf("checkpoint: %w", err)
		}
		if err := os.Rename(tmp, final); err != nil {
			return meta, fmt.Errorf("checkpoint: %w", err)
		}
		if err := atomicfile.SyncDir(cpDir); err != nil {
			return meta, err
		}
		meta.URI = "file://" + filepath.ToSlash(final)
	}
	meta.SchemaVersion = schemas.Version
	meta.Files = hashes
	meta.CreatedAt = s.cfg.now().UTC().Format(time.RFC3339)
	rows = append(rows, meta)
	err = files.Via(context.Background(), files.Join(s.root, IndexFile), func(local string) error { return parquetio.WriteFile(local, rows) })
	if err != nil {
		return meta, fmt.Errorf("checkpoint: append to index: %w", err)
	}
	return meta, s.prune(rows)
}

// prune deletes the directories of the versions that Config.Keep no longer
// keeps (rows in version order, the newest last).
func (s *Store) prune(rows []schemas.WeightVersion) error {
	if s.cfg.Keep <= 0 {
		return nil
	}
	keep := max(s.cfg.Keep, 2)
	for i := 1; i < len(rows)-keep; i++ {
		if slices.Contains(s.cfg.Pin, rows[i].Version) {
			continue
		}
		if err := files.RemoveAll(context.Background(), s.Path(rows[i].Version)); err != nil {
			return fmt.Errorf("checkpoint: prune version %d: %w", rows[i].Version, err)
		}
	}
	return nil
}

// hashDir returns the sha256 and size of every regular file under dir,
// sorted by relative path. With sync (at publish) it also sets each file's
// mode to FileMode and each directory's to DirMode, whatever the writer
// and umask chose, and fsyncs them, so that the hashes describe durable
// bytes.
func hashDir(dir string, sync bool) ([]schemas.FileHash, error) {
	var out []schemas.FileHash
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if sync {
				if err := os.Chmod(p, DirMode); err != nil {
					return err
				}
				return atomicfile.SyncDir(p)
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		if sync {
			if err := os.Chmod(p, FileMode); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(dir, p)
		h, n, err := hashFile(p, sync)
		if err != nil {
			return err
		}
		out = append(out, schemas.FileHash{Path: filepath.ToSlash(rel), SHA256: h, Bytes: n})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

func hashFile(p string, sync bool) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if sync {
		if err := f.Sync(); err != nil {
			return "", 0, err
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// upload copies the files of the local directory dir (hashed, relative
// paths) under the object prefix final, first removing whatever an
// interrupted publish of the same version left there.
func (s *Store) upload(dir, final string, hashes []schemas.FileHash) error {
	ctx := context.Background()
	if err := files.RemoveAll(ctx, final); err != nil {
		return err
	}
	for _, f := range hashes {
		if err := files.Upload(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), files.Join(final, f.Path)); err != nil {
			return err
		}
	}
	return nil
}

// maxDepth is how deep under a version's prefix hashRemote looks for
// objects (an object store lists one "directory" level at a time); model
// directories are flat.
const maxDepth = 4

// hashRemote is hashDir of an object prefix: the sha256 and size of every
// object under dir (up to maxDepth levels), read as a stream.
func hashRemote(dir string, _ bool) ([]schemas.FileHash, error) {
	ctx := context.Background()
	var out []schemas.FileHash
	for depth := 1; depth <= maxDepth; depth++ {
		got, err := files.List(ctx, dir+strings.Repeat("/*", depth))
		if err != nil {
			return nil, err
		}
		for _, p := range got {
			r, err := files.Open(ctx, p)
			if err != nil {
				return nil, err
			}
			h := sha256.New()
			n, err := io.Copy(h, r)
			r.Close()
			if err != nil {
				return nil, fmt.Errorf("hash %s: %w", p, err)
			}
			out = append(out, schemas.FileHash{Path: strings.TrimPrefix(p, dir+"/"), SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Fetch returns a local directory holding the files of version: its own
// directory in a local store; for an object store, a copy downloaded into
// a new directory under dir ("" for the system's temporary directory),
// which done removes. The copy is checked against the index row's hashes.
// done is never nil.
func (s *Store) Fetch(version int64, dir string) (local string, done func(), err error) {
	if !s.remote {
		return s.Path(version), func() {}, nil
	}
	v, err := s.Get(version)
	if err != nil {
		return "", func() {}, err
	}
	name := VersionDir(version)
	local, err = os.MkdirTemp(dir, "swerl-"+name+"-")
	if err != nil {
		return "", func() {}, fmt.Errorf("checkpoint: %w", err)
	}
	done = func() { os.RemoveAll(local) }
	if err := copyFiles(context.Background(), v.Files, s.Path(version), local); err != nil {
		done()
		return "", func() {}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	got, err := hashDir(local, false)
	if err == nil && !slices.Equal(got, v.Files) {
		err = fmt.Errorf("the downloaded files do not match the index row")
	}
	if err != nil {
		done()
		return "", func() {}, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	return local, done, nil
}

// CopyFrom publishes version of src into s, with the index row's step,
// metrics and offsets: a mirror of a learner's local store in a bucket
// (or back). The files copied are those of src's index row, verified
// first, so a damaged source is not mirrored.
// As with Publish, version must be newer than every version of s.
func (s *Store) CopyFrom(src *Store, version int64) (schemas.WeightVersion, error) {
	row, err := src.Get(version)
	if err != nil {
		return row, err
	}
	if !src.remote { // Fetch checks the copy it downloads from a bucket
		if err := src.Verify(row); err != nil {
			return row, err
		}
	}
	from, done, err := src.Fetch(version, "")
	if err != nil {
		return row, err
	}
	defer done()
	meta := row
	meta.URI, meta.Files, meta.CreatedAt = "", nil, ""
	return s.Publish(meta, func(dir string) error {
		return copyFiles(context.Background(), row.Files, from, dir)
	})
}

// copyFiles copies the files of an index row from the folder or object
// prefix from into the local folder to. The paths come from the index,
// which is outside bytes: one that leaves the folder is an error.
func copyFiles(ctx context.Context, hashes []schemas.FileHash, from, to string) error {
	for _, f := range hashes {
		rel := filepath.FromSlash(f.Path)
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("index path %q leaves the checkpoint", f.Path)
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := download(ctx, files.Join(from, f.Path), dst); err != nil {
			return fmt.Errorf("copy %s: %w", f.Path, err)
		}
	}
	return nil
}

// download streams src (an object or a local file) to the new local file
// dst.
func download(ctx context.Context, src, dst string) error {
	r, err := files.Open(ctx, src)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Verify checks that the directory of v holds exactly the files of its
// index row with their sizes and hashes. The error names the version and
// the first bad file.
func (s *Store) Verify(v schemas.WeightVersion) error {
	dir := s.Path(v.Version)
	name := VersionDir(v.Version)
	if len(v.Files) == 0 {
		return fmt.Errorf("checkpoint %s: index row lists no files", name)
	}
	hashTree := hashDir
	if s.remote {
		hashTree = hashRemote
	}
	got, err := hashTree(dir, false)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", name, err)
	}
	have := map[string]schemas.FileHash{}
	for _, f := range got {
		have[f.Path] = f
	}
	for _, want := range v.Files {
		g, ok := have[want.Path]
		switch {
		case !ok:
			return fmt.Errorf("checkpoint %s: %s is missing", name, want.Path)
		case g.Bytes != want.Bytes:
			return fmt.Errorf("checkpoint %s: %s has %d bytes, the index says %d (half-written?)", name, want.Path, g.Bytes, want.Bytes)
		case g.SHA256 != want.SHA256:
			return fmt.Errorf("checkpoint %s: %s sha256 %s does not match the index (%s): corrupt", name, want.Path, g.SHA256, want.SHA256)
		}
		delete(have, want.Path)
	}
	for p := range have {
		return fmt.Errorf("checkpoint %s: unexpected file %s", name, p)
	}
	return nil
}

// LatestGood returns the newest indexed version whose files verify, for
// --resume. Every newer version that fails verification is skipped with a
// warning naming the reason. It returns ErrNoCheckpoint when none is good.
func (s *Store) LatestGood() (schemas.WeightVersion, error) {
	rows, err := s.Versions()
	if err != nil {
		return schemas.WeightVersion{}, err
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if err := s.Verify(rows[i]); err != nil {
			s.cfg.log().Warn("checkpoint: skipping a corrupt checkpoint", "version", rows[i].Version, "reason", err.Error())
			continue
		}
		return rows[i], nil
	}
	return schemas.WeightVersion{}, fmt.Errorf("%w in %s (%d indexed)", ErrNoCheckpoint, s.root, len(rows))
}

// Get returns the index row of version.
func (s *Store) Get(version int64) (schemas.WeightVersion, error) {
	rows, err := s.Versions()
	if err != nil {
		return schemas.WeightVersion{}, err
	}
	for _, r := range rows {
		if r.Version == version {
			return r, nil
		}
	}
	return schemas.WeightVersion{}, fmt.Errorf("checkpoint: version %s is not in %s", strconv.FormatInt(version, 10), files.Join(s.root, IndexFile))
}

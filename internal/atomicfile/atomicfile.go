// Package atomicfile writes files so that readers see either the old
// content or the complete new content, never a partial file: data goes to a
// hidden temporary file in the same directory, which is synced, closed and
// renamed over the target, and the directory is synced.
//
// A committed file has mode 0644 (FileMode), not the 0600 of os.CreateTemp:
// checkpoints and outputs are read by other users (an inference engine, a
// report server) as often as by the writer.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FileMode is the mode of every file this package creates.
const FileMode = 0o644

// File is a file being written atomically. Write to it, then call Commit to
// publish it under its final name or Abort to discard it. It is not safe
// for concurrent use.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts writing path. The parent directory must exist.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("atomicfile: create %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; the final file is meant to be shared.
	if err := f.Chmod(FileMode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("atomicfile: create %s: %w", path, err)
	}
	return &File{File: f, path: path}, nil
}

// Commit syncs and closes the temporary file and renames it to the final
// path, replacing any file there.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("atomicfile: %s already committed or aborted", f.path)
	}
	f.done = true
	tmp := f.Name()
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: sync %s: %w", f.path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: close %s: %w", f.path, err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: rename %s: %w", f.path, err)
	}
	return SyncDir(filepath.Dir(f.path))
}

// Abort discards the temporary file. It is a no-op after Commit, so it can
// be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	return f.Commit()
}

// SyncDir fsyncs a directory so that renames in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: sync %s: %w", dir, err)
	}
	return nil
}

// IsTemp reports whether name is a temporary file left by an interrupted
// write of this package.
func IsTemp(name string) bool {
	b := filepath.Base(name)
	return strings.HasPrefix(b, ".") && strings.Contains(b, ".tmp-")
}

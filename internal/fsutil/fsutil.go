// Package fsutil writes files so that a crash leaves either the old file
// or the whole new one, never a torn one, on every platform meshd builds
// for. It imports nothing from the project, so any package may use it.
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TempPrefix starts the name of every temporary file [WriteAtomic] and
// [CreateAtomic] make: "<TempPrefix><base>.<random>" in the directory of
// the file they write. A crash can leave one behind; readers skip names
// that start with ".", and a package that owns its directory may remove
// them at start.
const TempPrefix = ".tmp-"

// WriteAtomic replaces path with data, with mode perm: a reader sees the
// old file or the complete new one, and the new one survives a crash once
// WriteAtomic returns. It writes a temporary file in the same directory,
// fsyncs it, renames it over path and fsyncs the directory.
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

// CreateAtomic is [WriteAtomic] that never replaces a file: it publishes
// the temporary file with a hard link, which fails if path exists, even
// when two processes race. That error wraps [fs.ErrExist].
func CreateAtomic(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm fs.FileMode, replace bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// CreateTemp makes the file 0600; set the final mode before any data
	// is in it, so a secret is never readable by others even briefly.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp, path)
	} else {
		err = os.Link(tmp, path)
		if err == nil {
			os.Remove(tmp)
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write %s: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes the creations, renames, links and removals in dir
// durable. On Windows, where a directory cannot be fsynced and NTFS
// journals its metadata, it does nothing.
func SyncDir(dir string) error {
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

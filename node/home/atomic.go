package home

import (
	"io/fs"

	"github.com/meshd/meshd/internal/fsutil"
)

// WriteFileAtomic writes data to path with mode perm so that a reader sees
// either the old file or the complete new one, and the new one survives a
// crash once WriteFileAtomic returns (see [fsutil.WriteAtomic]).
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return fsutil.WriteAtomic(path, data, perm)
}

// createAtomic is WriteFileAtomic that never replaces an existing file,
// even when two processes race; it returns an error wrapping fs.ErrExist
// in that case (see [fsutil.CreateAtomic]).
func createAtomic(path string, data []byte, perm fs.FileMode) error {
	return fsutil.CreateAtomic(path, data, perm)
}

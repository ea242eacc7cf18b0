//go:build !windows

package mailbox

import (
	"io/fs"
	"syscall"
)

// groupOf returns the group that owns the file fi describes.
func groupOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Gid), true
}

// linkCount returns the number of names (hard links) of the file fi
// describes.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

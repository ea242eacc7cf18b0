//go:build !windows

package mailbox

import (
	"io/fs"
	"syscall"
)

// linkCount returns the number of names (hard links) of the file fi
// describes.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

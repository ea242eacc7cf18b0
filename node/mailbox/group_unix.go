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

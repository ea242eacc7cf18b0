//go:build !windows

package main

import (
	"os"
	"syscall"
)

// fileUID returns the uid that owns fi's file.
func fileUID(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

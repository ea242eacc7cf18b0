package testtmp

import (
	"os"

	"golang.org/x/sys/unix"
)

// memDir returns /dev/shm when it is a writable tmpfs with MinFree bytes
// available that may hold programs (the tests build meshd and meshctl
// into a temporary directory and run them), else "".
func memDir() string {
	const d = "/dev/shm"
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Flags&unix.ST_NOEXEC != 0 {
		return ""
	}
	if uint64(st.Bavail)*uint64(st.Bsize) < MinFree || unix.Access(d, unix.W_OK) != nil {
		return ""
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return ""
	}
	return d
}

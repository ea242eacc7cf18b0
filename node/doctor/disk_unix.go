//go:build linux || darwin || freebsd

package doctor

import "syscall"

// DiskSpace returns the bytes free for an unprivileged user and the size
// of the file system holding path.
func DiskSpace(path string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}

package blobs

import (
	"os"

	"golang.org/x/sys/unix"
)

// readBackBuf tells whether readBack needs a buffer of its caller's.
const readBackBuf = false

// readBack returns n bytes of f from off, which is a multiple of the
// page size, to hash: mapped from the page cache, where a file just
// written still is, so that they are not copied on the way (on a busy
// machine a copy of each byte of a blob costs about as much CPU as a
// hash of it). done unmaps them; buf is unused. What is mapped is one
// hasher's block at a time, so the pages count in the process's
// resident memory only while they are hashed.
func readBack(f *os.File, off int64, n int, _ []byte) (b []byte, done func(), err error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var merr error
	if err := rc.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), off, n, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	}); err != nil {
		return nil, nil, err
	}
	if merr != nil {
		return readBackCopy(f, off, n, make([]byte, n))
	}
	return b, func() { _ = unix.Munmap(b) }, nil
}

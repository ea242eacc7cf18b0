//go:build !windows

package home

import (
	"os"
	"syscall"
)

// errWouldBlock is the error lockFile returns when another open file
// holds the lock.
var errWouldBlock error = syscall.EWOULDBLOCK

// lockFile takes an exclusive flock on f without waiting. The lock
// belongs to the open file description.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

// unlockFile drops f's lock: on the open file description, so also while
// a forked child still shares it.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

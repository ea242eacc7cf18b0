//go:build !windows

package history

import (
	"errors"
	"os"
	"syscall"
)

// lockShared takes a shared lock on f without waiting, as bbolt's own
// lock is flock on the same file. Closing f drops it.
func lockShared(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
}

// lockBusy reports whether lockShared failed only because another
// process holds the lock (or a signal interrupted it): worth a retry.
func lockBusy(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR)
}

// unlockShared drops f's lock: on the open file description, so also
// while a forked child still shares it.
func unlockShared(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

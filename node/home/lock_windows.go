package home

import (
	"os"

	"golang.org/x/sys/windows"
)

// errWouldBlock is the error lockFile returns when another open handle
// holds the lock.
var errWouldBlock error = windows.ERROR_LOCK_VIOLATION

// lockFile takes an exclusive lock on one byte of f far past its end
// without waiting: Windows locks are mandatory, and a lock on the pid
// would keep the next meshd from reading who holds it. Like flock, it
// belongs to the open handle and is dropped when the handle is closed or
// the process dies.
func lockFile(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: 0x7fffffff}
	return windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
}

// unlockFile drops the lock lockFile took.
func unlockFile(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: 0x7fffffff}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
}

package history

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockShared takes a shared lock on f without waiting, on the byte bbolt
// locks on Windows (the last possible offset). Closing f drops it.
func lockShared(f *os.File) error {
	ol := &windows.Overlapped{Offset: ^uint32(0), OffsetHigh: ^uint32(0)}
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
}

// lockBusy reports whether lockShared failed only because another
// process holds the lock: worth a retry.
func lockBusy(err error) bool {
	return errors.Is(err, windows.ERROR_LOCK_VIOLATION)
}

// unlockShared drops the lock lockShared took.
func unlockShared(f *os.File) error {
	ol := &windows.Overlapped{Offset: ^uint32(0), OffsetHigh: ^uint32(0)}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
}

package blobs

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing n bytes of f from off
// to disk, without waiting: a later fsync then has little left to do,
// and the data does not pile up in the page cache to be written all at
// once, in an fsync that other files' fsyncs (the history store's) would
// queue behind.
func startWriteback(f *os.File, off int64, n int) {
	_ = unix.SyncFileRange(int(f.Fd()), off, int64(n), unix.SYNC_FILE_RANGE_WRITE)
}

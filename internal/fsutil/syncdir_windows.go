package fsutil

// syncDir does nothing: Windows cannot open a directory for fsync, and
// NTFS commits its metadata through its own journal.
func syncDir(string) error { return nil }

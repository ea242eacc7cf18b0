package main

import "os"

// fileUID reports no owner on Windows, where files have no uid: the
// control socket's errors then name no user.
func fileUID(os.FileInfo) (int, bool) { return 0, false }

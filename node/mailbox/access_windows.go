package mailbox

import (
	"io/fs"
	"log/slog"
	"os"
)

// apply does nothing on Windows: files there are as private as their
// folder's ACL, and there are no groups to give them to.
func (a Access) apply(string, fs.FileMode) error { return nil }

// repairTree does nothing on Windows (see apply).
func (a Access) repairTree(string, *slog.Logger) (int, error) { return 0, nil }

// applyFd does nothing on Windows (see apply).
func (a Access) applyFd(*os.File, string, fs.FileMode) error { return nil }

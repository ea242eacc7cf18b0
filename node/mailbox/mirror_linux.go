package mailbox

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// nativeSys are Linux's forms: renameat2(RENAME_NOREPLACE), one call
// where the portable form takes a link and an unlink, and syncfs(2), one
// journal commit where the portable form fsyncs each file.
var nativeSys = sysOps{rename: renameNoReplace, syncfs: syncfs}

// renameNoReplace renames old to new unless new exists, in one call.
// Where the file system does not support the flag it takes the portable
// path.
func renameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return linkRename(old, new)
	}
	return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
}

// syncfs commits the file system that holds dir.
func syncfs(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}

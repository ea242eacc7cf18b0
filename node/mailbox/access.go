package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Access says who may read the mailbox: its owner alone (the zero value),
// or also the members of one group, for an agent that runs as another
// user. The mailbox holds every DM and private-channel message the node
// receives, so no one else gets in.
type Access struct {
	// GroupID, when GroupSet, is the group that may read the mailbox:
	// folders become 0750 with the setgid bit, so that what is made in
	// them takes that group, and files 0640. The outbox becomes 0770 so
	// that the group may drop files in it, sticky so that members rename
	// only their own files, and meshd keeps its working state outside it. The process must belong to the
	// group (chown to a group it is not in fails).
	GroupID  int
	GroupSet bool
}

// OwnerOnly is the access of a mailbox that only its owner reads.
var OwnerOnly = Access{}

// GroupAccess returns the access that lets the group gid read the
// mailbox.
func GroupAccess(gid int) Access { return Access{GroupID: gid, GroupSet: true} }

// Shared reports whether a group may read the mailbox.
func (a Access) Shared() bool { return a.GroupSet }

// String describes a for logs and errors.
func (a Access) String() string {
	if !a.GroupSet {
		return "owner only"
	}
	return fmt.Sprintf("owner and group %d", a.GroupID)
}

// fileMode is the mode of the files the mailbox writes.
func (a Access) fileMode() fs.FileMode {
	if a.GroupSet {
		return 0o640
	}
	return 0o600
}

// DirMode is the mode of the mailbox's folders.
func (a Access) DirMode() fs.FileMode {
	if a.GroupSet {
		return 0o750 | fs.ModeSetgid
	}
	return 0o700
}

// outboxMode is the mode of the outbox, where the group also writes. It
// is sticky, so that a member may rename or remove only the files it
// owns: not meshd's README, and not another member's file.
func (a Access) outboxMode() fs.FileMode {
	if a.GroupSet {
		return 0o770 | fs.ModeSetgid | fs.ModeSticky
	}
	return 0o700
}

// mkdir creates dir with the folder mode and group, and reports whether
// it made it; an existing directory is left as it is.
func (a Access) mkdir(dir string) (bool, error) {
	return a.mkdirMode(dir, a.DirMode())
}

func (a Access) mkdirMode(dir string, mode fs.FileMode) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return false, nil
		}
		return false, err
	}
	if err != nil {
		return false, err
	}
	return true, a.apply(dir, mode)
}

// mkdirAll creates dir and its missing parents, then gives dir (new or
// not) the folder mode and group: the mailbox root is the mirror's own,
// so a mode an older version or a hand left there is repaired.
func (a Access) mkdirAll(dir string) error {
	return a.mkdirAllMode(dir, a.DirMode())
}

func (a Access) mkdirAllMode(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The mailbox root may be a link to another disk; apply follows no
	// link, so it is given the folder the link names.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	return a.apply(real, mode)
}

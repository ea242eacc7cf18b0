package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// Access says who may read the mailbox: its owner alone (the zero value),
// or also the members of one group, for an agent that runs as another
// user. The mailbox holds every DM and private-channel message the node
// receives, so no one else gets in.
type Access struct {
	// GroupID, when GroupSet, is the group that may read the mailbox:
	// folders become 0750 with the setgid bit, so that what is made in
	// them takes that group, and files 0640. The outbox becomes 0770 so
	// that the group may drop files in it. The process must belong to the
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

// outboxMode is the mode of the outbox, where the group also writes.
func (a Access) outboxMode() fs.FileMode {
	if a.GroupSet {
		return 0o770 | fs.ModeSetgid
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
	return a.apply(dir, mode)
}

// apply sets the group (when shared) and the mode of path. Windows has
// neither: files there are as private as their folder's ACL.
func (a Access) apply(path string, mode fs.FileMode) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if a.GroupSet {
		// Group first: a chown clears the setgid bit.
		if err := os.Chown(path, -1, a.GroupID); err != nil {
			return fmt.Errorf("give %s to group %d: %w", path, a.GroupID, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return err
	}
	return nil
}

// repairTree gives the folders under root (the mailbox root itself
// excepted) the mode and group of a, and the files in each folder it
// changes the file mode and group: a mailbox written before a change of
// mailbox_group, or by an older version (0755 and 0644), then reads as
// the setting says. A folder already right is left alone with its files,
// so a start costs one stat per folder. It returns how many folders it
// changed.
func (a Access) repairTree(root string) (int, error) {
	if runtime.GOOS == "windows" {
		return 0, nil
	}
	n := 0
	var errs []error
	var walk func(dir string)
	walk = func(dir string) {
		es, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, e := range es {
			if !e.IsDir() {
				continue
			}
			sub := dir + string(os.PathSeparator) + e.Name()
			want := a.DirMode()
			if dir == root && e.Name() == OutboxDir {
				want = a.outboxMode()
			}
			ok, err := a.hasMode(sub, want)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok {
				n++
				if err := a.apply(sub, want); err != nil {
					errs = append(errs, err)
				}
				a.repairFiles(sub, &errs)
			}
			walk(sub)
		}
	}
	walk(root)
	return n, errors.Join(errs...)
}

// hasMode reports whether path has mode want (and, when shared, the
// group).
func (a Access) hasMode(path string, want fs.FileMode) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, err
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeSetgid) != want {
		return false, nil
	}
	if a.GroupSet {
		if gid, ok := groupOf(fi); ok && gid != a.GroupID {
			return false, nil
		}
	}
	return true, nil
}

// repairFiles gives the regular files in dir the file mode and group.
func (a Access) repairFiles(dir string, errs *[]error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		*errs = append(*errs, err)
		return
	}
	for _, e := range es {
		if !e.Type().IsRegular() {
			continue
		}
		if err := a.apply(dir+string(os.PathSeparator)+e.Name(), a.fileMode()); err != nil {
			*errs = append(*errs, err)
		}
	}
}

//go:build !windows

package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The repair walks the mailbox by file descriptor, never by path: each
// entry is opened relative to its parent's descriptor with O_NOFOLLOW,
// checked with fstat, and changed with fchown and fchmod on the opened
// descriptor. A group member who swaps an entry for a symbolic link (even
// in a loop, with renameat2's RENAME_EXCHANGE) then gets ELOOP, never a
// chown or a chmod of what the link names; one who swaps in a folder of
// its own gets it left alone, because the repair changes nothing that
// meshd's user does not own.
const (
	openDir  = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	openFile = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
)

// maxRepairDepth bounds the walk. The mailbox is three levels deep
// (root, day, inbox); anything deeper was not made by meshd.
const maxRepairDepth = 6

// apply sets the group (when shared) and the mode of path, a directory or
// a regular file of meshd's user, through a descriptor opened without
// following a link.
func (a Access) apply(path string, mode fs.FileMode) error {
	f, err := openNoFollow(unix.AT_FDCWD, path, openDir&^unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := fstat(f)
	if err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by meshd's user (uid %d): left as it is", path, st.Uid, os.Geteuid())
	}
	return a.applyFd(f, path, mode)
}

// applyFd sets the group (when shared) and the mode of the open file f.
func (a Access) applyFd(f *os.File, path string, mode fs.FileMode) error {
	if a.GroupSet {
		// Group first: a chown clears the setgid bit.
		if err := f.Chown(-1, a.GroupID); err != nil {
			return fmt.Errorf("give %s to group %d: %w", path, a.GroupID, err)
		}
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// openNoFollow opens name relative to dirfd without following a link, and
// wraps the descriptor in an *os.File named after the path it was reached
// by (for messages only).
func openNoFollow(dirfd int, name string, flags int) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// fstat returns the stat of the open file f.
func fstat(f *os.File) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return &st, nil
}

// repairer holds the state of one repairTree walk.
type repairer struct {
	a       Access
	uid     int
	log     *slog.Logger
	changed int
	errs    []error
	skipped []string // entries left alone, for the log
}

// repairTree gives the folders under root (the mailbox root itself
// excepted) the mode and group of a, and the files in each folder it
// changes the file mode and group: a mailbox written before a change of
// mailbox_group, or by an older version (0755 and 0644), then reads as
// the setting says. A folder already right is left alone with its files,
// so a start costs one stat per folder. It returns how many folders it
// changed.
//
// It never follows a symbolic link, never descends into the outbox (where
// the group writes: its entries are the agents', and meshd's own working
// state lives outside it), and never changes or enters an entry that
// meshd's user does not own: those are logged and left, and the start
// goes on.
func (a Access) repairTree(root string, log *slog.Logger) (int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The root may be a link to another disk (see home.Secure); its
	// parent, the home, is meshd's user's alone, so resolving it by path
	// is safe. Below it, nothing is followed.
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return 0, err
	}
	top, err := openNoFollow(unix.AT_FDCWD, real, openDir)
	if err != nil {
		return 0, err
	}
	defer top.Close()
	es, err := top.ReadDir(-1)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", root, err)
	}
	r := &repairer{a: a, uid: os.Geteuid(), log: log}
	r.walk(top, root, es, 0)
	const most = 10
	for i, p := range r.skipped {
		if i == most {
			log.Warn("mailbox: more entries not owned by meshd's user were left alone", "count", len(r.skipped)-most)
			break
		}
		log.Warn("mailbox: an entry not owned by meshd's user was left alone; remove it if it is not yours", "path", p)
	}
	return r.changed, errors.Join(r.errs...)
}

// walk repairs the folders among es, the entries of dir (open as d), and
// descends into them.
func (r *repairer) walk(d *os.File, dir string, es []fs.DirEntry, depth int) {
	if depth >= maxRepairDepth {
		return
	}
	for _, e := range es {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		sub, err := openNoFollow(int(d.Fd()), e.Name(), openDir)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) {
			continue // replaced since the listing: not a folder of ours now
		}
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("open %s: %w", path, err))
			continue
		}
		r.folder(sub, path, depth+1, depth == 0 && e.Name() == OutboxDir)
		sub.Close()
	}
}

// folder repairs one folder, open as f, and descends into it unless it is
// the outbox.
func (r *repairer) folder(f *os.File, path string, depth int, outbox bool) {
	st, err := fstat(f)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	if int(st.Uid) != r.uid {
		r.skipped = append(r.skipped, path)
		return
	}
	want := r.a.DirMode()
	if outbox {
		want = r.a.outboxMode()
	}
	ok := r.a.statHasMode(st, want)
	if ok && outbox {
		return
	}
	es, err := f.ReadDir(-1)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("read %s: %w", path, err))
		return
	}
	if !ok {
		r.changed++
		if err := r.a.applyFd(f, path, want); err != nil {
			r.errs = append(r.errs, err)
		}
		r.files(f, path, es, outbox)
	}
	if !outbox {
		r.walk(f, path, es, depth)
	}
}

// files gives the regular files of meshd's user among es, the entries of
// the folder open as d, the file mode and group (the attachment mode to
// a read-only one). In the outbox, files of other users are the agents'
// own and are left without a word.
func (r *repairer) files(d *os.File, dir string, es []fs.DirEntry, outbox bool) {
	for _, e := range es {
		if !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := openNoFollow(int(d.Fd()), e.Name(), openFile)
		if err != nil {
			continue // gone or replaced since the listing
		}
		st, err := fstat(f)
		switch {
		case err != nil:
			r.errs = append(r.errs, err)
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
		case int(st.Uid) != r.uid:
			if !outbox {
				r.skipped = append(r.skipped, path)
			}
		default:
			// A read-only file (an attachment, a hard link to the node's
			// blob) stays read-only.
			want := r.a.fileMode()
			if st.Mode&unix.S_IWUSR == 0 {
				want = r.a.attachmentMode()
			}
			if !r.a.statHasMode(st, want) {
				if err := r.a.applyFd(f, path, want); err != nil {
					r.errs = append(r.errs, err)
				}
			}
		}
		f.Close()
	}
}

// statHasMode reports whether st has mode want (and, when shared, the
// group).
func (a Access) statHasMode(st *unix.Stat_t, want fs.FileMode) bool {
	if unixMode(want) != uint32(st.Mode)&0o7777 {
		return false
	}
	return !a.GroupSet || int(st.Gid) == a.GroupID
}

// unixMode converts the permission, setgid and sticky bits of m to the
// bits of st_mode.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}

//go:build !windows

package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

func (h Home) secure(s Sharing) ([]string, error) {
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("home %s: %w", h.Dir, err)
	}
	homeMode, mboxMode := uint32(0o700), uint32(0o700)
	if s.GroupSet {
		homeMode, mboxMode = 0o710, 0o750|syscall.S_ISGID
	}
	var repaired []string
	for _, d := range []struct {
		path string
		mode uint32
	}{{h.Dir, homeMode}, {h.MailboxDir(), mboxMode}} {
		fixed, err := secureDir(d.path, d.mode, s)
		if errors.Is(err, fs.ErrNotExist) && d.path != h.Dir {
			continue // the node makes the mailbox with the right mode
		}
		if err != nil {
			return repaired, err
		}
		if fixed != "" {
			repaired = append(repaired, fixed)
		}
	}
	return repaired, nil
}

// secureDir checks the directory at path and repairs its mode (and group)
// to want; it returns what it repaired, or "".
func secureDir(path string, want uint32, s Sharing) (string, error) {
	var st syscall.Stat_t
	// Stat, not Lstat: a home or mailbox may be a link to another disk,
	// and what matters is the directory it leads to.
	if err := syscall.Stat(path, &st); err != nil {
		return "", &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	mode := uint32(st.Mode) & 0o7777
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return "", fmt.Errorf("%w: %s is not a directory; fix: move it away and let meshd make it", ErrUnsafeMode, path)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return "", fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d); fix: run meshd as its owner, or chown -R %d %s",
			ErrUnsafeMode, path, st.Uid, uid, uid, path)
	}
	if mode&0o022 != 0 {
		return "", unsafeModeError(path, mode, "group or others may write to it, so its files cannot be trusted",
			fmt.Sprintf("check its files, then chmod %o %s", want&0o777, path))
	}
	group := s.GroupSet && int(st.Gid) != s.GroupID
	if mode == want && !group {
		return "", nil
	}
	if group {
		// Before the chmod: a chown clears the setgid bit.
		if err := os.Chown(path, -1, s.GroupID); err != nil {
			return "", fmt.Errorf("give %s to group %d: %w (meshd's user must be a member of the mailbox group)", path, s.GroupID, err)
		}
	}
	if err := syscall.Chmod(path, want); err != nil {
		return "", &fs.PathError{Op: "chmod", Path: path, Err: err}
	}
	what := fmt.Sprintf("%s: mode %04o → %04o", path, mode, want)
	if group {
		what += fmt.Sprintf(", group %d → %d", st.Gid, s.GroupID)
	}
	return what, nil
}

package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Folders of a day directory. An inbox item's file is in inbox/ while it
// is unread and moves to read/ when it is marked read; the envelopes this
// node sends are in sent/.
const (
	FolderInbox = "inbox"
	FolderRead  = "read"
	FolderSent  = "sent"
)

// Folders lists the folders of a day directory that hold mirror files.
var Folders = []string{FolderInbox, FolderRead, FolderSent}

// folderOf is the folder of it's file.
func folderOf(it Item) string {
	if it.Folder == "" {
		return FolderInbox
	}
	return it.Folder
}

// isFolderPath reports whether s is "FOLDER/NAME" for a mirror folder.
func isFolderPath(s string) bool {
	f, name, ok := strings.Cut(s, "/")
	return ok && name != "" && slices.Contains(Folders, f)
}

// MoveToRead moves the mirror file at path, in a day's inbox folder, to
// that day's read folder, under the same name or, if that is taken, a
// numbered one, and returns its new path. The move is one rename: a
// reader sees the file in one folder or the other, whole. The day's index
// keeps the line that names it in inbox/.
func (m *Mirror) MoveToRead(path string) (string, error) {
	inbox := filepath.Dir(path)
	dayDir := filepath.Dir(inbox)
	if filepath.Base(inbox) != FolderInbox || !IsDay(filepath.Base(dayDir)) || filepath.Dir(dayDir) != filepath.Clean(m.dir) {
		return "", fmt.Errorf("mailbox: not an inbox file: %s", path)
	}
	if _, ok := TagOf(filepath.Base(path)); !ok {
		return "", fmt.Errorf("mailbox: not a mirror file: %s", path)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	read := filepath.Join(dayDir, FolderRead)
	var dirs dirSet
	if err := m.mkdirLocked(dayDir, read, &dirs); err != nil {
		return "", err
	}
	base := strings.TrimSuffix(filepath.Base(path), ".txt")
	if i := strings.LastIndexByte(base, '-'); i > 0 && len(base)-i <= 4 && strings.Count(base, "-") == 2 {
		base = base[:i] // a numbered name: number it again in read/
	}
	dst, err := m.renameFree(path, read, base, ".txt")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", wrapFS("move to read/", err)
	}
	if m.sys.syncfs == nil && !m.cfg.SyncFiles {
		m.unsynced.add(read)
		m.unsynced.add(inbox)
	}
	return dst, nil
}

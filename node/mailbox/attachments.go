package mailbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshd/meshd/internal/fsutil"
)

// attachmentMode is the mode of an attachment file in the mailbox:
// read-only, to the group too when the mailbox is shared. The file is
// usually a hard link to the node's blob, one inode with it, so nobody
// may write through either name; only meshd's user may chmod it.
func (a Access) attachmentMode() fs.FileMode {
	if a.GroupSet {
		return 0o440
	}
	return 0o400
}

// PlaceAttachment shows src, a verified blob of the node's store, as
// dir/name, where dir is an envelope's attachments folder under root
// ([AttachmentDir]): a hard link to src where the file system allows it,
// else a copy made under a temporary name and renamed, so that no
// partial file is ever visible. The folders it makes (the day's,
// attachments/, dir) get the mailbox's folder mode and group, which the
// group may read and pass but never write, and the file the read-only
// attachmentMode: a member of the group reads it, and so the blob through
// the link, but cannot change, rename or replace either. It returns the
// file's path.
func (a Access) PlaceAttachment(root, dir, name, src string) (string, error) {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
		return "", fmt.Errorf("attachments folder %s is not under the mailbox %s", dir, root)
	}
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		if err := a.mkdirAll(root); err != nil {
			return "", err
		}
	}
	at := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		at = filepath.Join(at, part)
		if _, err := a.mkdir(at); err != nil {
			return "", fmt.Errorf("attachments folder: %w", err)
		}
	}
	dst := filepath.Join(dir, name)
	if err := os.Link(src, dst); err == nil || errors.Is(err, fs.ErrExist) {
		if err := a.apply(dst, a.attachmentMode()); err != nil {
			return "", err
		}
		return dst, fsutil.SyncDir(dir)
	}
	return dst, a.copyInto(src, dir, dst)
}

// copyInto copies src to dst through a temporary file in dir, given the
// attachment mode before it is renamed into place.
func (a Access) copyInto(src, dir, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, fsutil.TempPrefix+"attach-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = io.Copy(tmp, in)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = a.applyFd(tmp, tmp.Name(), a.attachmentMode())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("place %s: %w", dst, err)
	}
	return fsutil.SyncDir(dir)
}

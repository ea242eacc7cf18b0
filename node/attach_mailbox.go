package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// attachmentPath is where the mailbox shows attachment a of envelope se
// delivered at t.
func (n *Node) attachmentPath(se *proto.SignedEnvelope, t time.Time, a proto.Attachment) string {
	return filepath.Join(mailbox.AttachmentDir(n.home.MailboxDir(), t, se.ID.String()), a.Name)
}

// place puts w's verified blob beside its envelope's mailbox file: a hard
// link to the store's copy, or a copy made under a temporary name and
// renamed, so that no partial file is ever visible there.
func (at *attachments) place(w want) {
	src, err := at.store.Path(w.A.SHA256)
	if err != nil {
		return
	}
	dir := mailbox.AttachmentDir(at.n.home.MailboxDir(), time.UnixMilli(w.Delivered), w.ID.String())
	dst := filepath.Join(dir, w.A.Name)
	if _, err := os.Stat(dst); err == nil {
		return
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		at.n.log.Warn("attachments: mailbox folder not made", "dir", dir, "err", err)
		return
	}
	if err := os.Link(src, dst); err == nil || errors.Is(err, os.ErrExist) {
		_ = fsutil.SyncDir(dir)
		return
	}
	if err := copyInto(src, dir, dst); err != nil {
		at.n.log.Warn("attachments: file not placed in the mailbox", "path", dst, "err", err)
	}
}

// copyInto copies src to dst through a temporary file in dir.
func copyInto(src, dir, dst string) error {
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
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("place %s: %w", dst, err)
	}
	return fsutil.SyncDir(dir)
}

// renderAttachments lists se's attachments for the API, each with its
// local path once the verified file is present: beside the mailbox file,
// or in the store (our own, and before the mailbox copy is made).
func (n *Node) renderAttachments(se *proto.SignedEnvelope, delivered time.Time) []api.Attachment {
	as := se.Attachments()
	if len(as) == 0 {
		return nil
	}
	out := make([]api.Attachment, 0, len(as))
	for _, a := range as {
		x := api.Attachment{Name: a.Name, Size: a.Size, MediaType: a.MediaType, SHA256: a.SHA256.String()}
		if p := n.attachmentPath(se, delivered, a); fileExists(p) {
			x.Path = p
		} else if n.attach != nil {
			if p, err := n.attach.store.Path(a.SHA256); err == nil {
				x.Path = p
			}
		}
		out = append(out, x)
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

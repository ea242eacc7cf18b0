package node

import (
	"os"
	"path/filepath"
	"time"

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
// renamed, so that no partial file is ever visible there. The file is
// read-only, readable by the mailbox group when there is one, in folders
// the group may read but not write (mailbox.Access.PlaceAttachment).
func (at *attachments) place(w want) {
	src, err := at.store.Path(w.A.SHA256)
	if err != nil {
		return
	}
	root := at.n.home.MailboxDir()
	dir := mailbox.AttachmentDir(root, time.UnixMilli(w.Delivered), w.ID.String())
	if dst, err := at.n.cfg.MailboxAccess.PlaceAttachment(root, dir, w.A.Name, src); err != nil {
		at.n.log.Warn("attachments: file not placed in the mailbox", "path", dst, "err", err)
	}
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

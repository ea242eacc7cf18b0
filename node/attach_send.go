package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/blobs"
	"github.com/meshd/meshd/proto"
)

var cTxRefusedAttachment = newCounter("tx.refused.attachment", famSendRefused, "attachment")

// attachFiles copies the local files at paths into the blob store and
// returns their attachment entries, refusing (before anything is signed)
// a path the daemon cannot read, a folder, a file over attachment_max_mib,
// a name the protocol does not allow, and two files of one name.
func (n *Node) attachFiles(paths []string) ([]proto.Attachment, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	refuseAttach := func(status int, hint, format string, args ...any) error {
		n.metrics.inc(cTxRefusedAttachment)
		err := refuse(status, hint, format, args...)
		n.logRL.warn(n.log, "send refused: bad attachment", "", "tx.refused.attachment", "err", err)
		return err
	}
	if len(paths) > proto.MaxAttachments {
		return nil, refuseAttach(http.StatusBadRequest, "put the files in an archive and attach that",
			"%d attachments: at most %d per message", len(paths), proto.MaxAttachments)
	}
	var out []proto.Attachment
	for _, p := range paths {
		a, err := n.attachFile(p)
		if err != nil {
			return nil, refuseAttach(http.StatusBadRequest, "give the path of a regular file the daemon's user can read", "attachment %s: %v", p, err)
		}
		for _, b := range out {
			if b.Name == a.Name {
				return nil, refuseAttach(http.StatusBadRequest, "rename one of them", "two attachments are named %q", a.Name)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func (n *Node) attachFile(p string) (proto.Attachment, error) {
	if !filepath.IsAbs(p) {
		return proto.Attachment{}, errors.New("not an absolute path")
	}
	name := filepath.Base(p)
	if err := proto.CheckAttachmentName(name); err != nil {
		return proto.Attachment{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		return proto.Attachment{}, fmt.Errorf("the daemon cannot read it: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return proto.Attachment{}, err
	}
	if !st.Mode().IsRegular() {
		return proto.Attachment{}, errors.New("not a regular file")
	}
	if st.Size() > n.cfg.AttachmentMax {
		return proto.Attachment{}, fmt.Errorf("%d bytes, over attachment_max_mib (%d bytes)", st.Size(), n.cfg.AttachmentMax)
	}
	mt := mediaTypeOf(name, f)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return proto.Attachment{}, err
	}
	a, err := n.attach.store.Add(f, name, mt)
	if errors.Is(err, blobs.ErrTooLarge) {
		return proto.Attachment{}, fmt.Errorf("over attachment_max_mib (%d bytes)", n.cfg.AttachmentMax)
	}
	return a, err
}

// mediaTypeOf guesses a file's media type from its name, else from its
// first bytes, without parameters; application/octet-stream if neither
// gives one the protocol takes.
func mediaTypeOf(name string, r io.Reader) string {
	for _, mt := range []string{mime.TypeByExtension(filepath.Ext(name)), sniff(r)} {
		mt, _, _ = strings.Cut(mt, ";")
		mt = strings.TrimSpace(mt)
		if proto.CheckMediaType(mt) == nil {
			return mt
		}
	}
	return "application/octet-stream"
}

func sniff(r io.Reader) string {
	b := make([]byte, 512)
	k, _ := io.ReadFull(r, b)
	return http.DetectContentType(b[:k])
}

// Fetch fetches the attachments of the inbox item id (all, or the one
// named name) and waits until each is verified and present, or ctx ends.
func (n *Node) Fetch(ctx context.Context, req api.Fetch) (*api.Fetched, error) {
	n.own.Acted()
	id, err := uuid.Parse(req.ID)
	if err != nil {
		return nil, badRequest("id: %v", err)
	}
	it, err := n.q.Item(id, "")
	if err != nil {
		return nil, err
	}
	st, err := n.store.Get(it.From, it.ID)
	if err != nil {
		return nil, err
	}
	se, err := st.Envelope()
	if err != nil {
		return nil, err
	}
	var fs []*fetch
	found := false
	for _, a := range se.Attachments() {
		if req.Name != "" && a.Name != req.Name {
			continue
		}
		found = true
		if a.Size > uint64(n.cfg.AttachmentMax) {
			return nil, refuse(http.StatusRequestEntityTooLarge, "raise attachment_max_mib in meshd.toml to fetch it",
				"%s is %d bytes, over attachment_max_mib (%d bytes)", a.Name, a.Size, n.cfg.AttachmentMax)
		}
		if f := n.attach.want(se, it.Delivered, a); f != nil {
			fs = append(fs, f)
		}
	}
	if !found {
		if req.Name != "" {
			return nil, notFound("list its attachments with: meshctl inbox --all --json", "%s has no attachment named %q", id, req.Name)
		}
		return nil, notFound("", "%s has no attachments", id)
	}
	for _, f := range fs {
		select {
		case <-f.done:
			if f.err != nil {
				return nil, fmt.Errorf("fetch %s: %w", f.a.Name, f.err)
			}
		case <-ctx.Done():
			return nil, refuse(http.StatusGatewayTimeout, "run meshctl fetch again: the fetch goes on meanwhile",
				"%s not fetched yet: %v", f.a.Name, ctx.Err())
		}
	}
	out := &api.Fetched{}
	for _, x := range n.renderAttachments(se, it.Delivered) {
		if req.Name == "" || x.Name == req.Name {
			out.Attachments = append(out.Attachments, x)
		}
	}
	return out, nil
}

// attachmentNote says why a kept envelope of ours with attachments may
// stay unacknowledged: the recipient refuses it while it would take us
// past its attachment budget for us (PROTOCOL.md §16.3), or, predating
// attachments, drops it as malformed (§6.8). Empty for other envelopes
// and states.
func (n *Node) attachmentNote(id uuid.UUID, r history.DeliveryRecord) string {
	if r.IsChannel || r.Reason != "" || (r.State != history.DeliveryQueued && r.State != history.DeliveryExpired) {
		return ""
	}
	st, err := n.store.Get(n.id.Pub, id)
	if err != nil {
		return ""
	}
	se, err := st.Envelope()
	if err != nil || len(se.Attachments()) == 0 {
		return ""
	}
	return fmt.Sprintf("it lists %d attachment(s): the recipient refuses it while it would take this node past its attachment budget there "+
		"(attachment_sender_max_mib; it is re-sent until retention there makes room), or, running a meshd older than attachments, "+
		"drops it as malformed and never acknowledges it", len(se.Attachments()))
}

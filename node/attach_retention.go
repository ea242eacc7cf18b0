package node

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

var cBlobPruned = newCounter("blob.pruned", famBlob, "pruned")

// blobGrace keeps a blob no kept envelope names for this long after it
// was stored: one added by a send that is still being signed, or fetched
// for an envelope whose reference is being written.
const blobGrace = time.Hour

// blobRef is one envelope that lists a blob: refs/<sha256> holds the
// envelopes (and where their mailbox shows the file) that name it.
type blobRef struct {
	From      proto.PubKey `cbor:"0,keyasint"`
	ID        uuid.UUID    `cbor:"1,keyasint"`
	Delivered int64        `cbor:"2,keyasint,omitempty"` // Unix ms; 0 for our own
	Size      uint64       `cbor:"3,keyasint,omitempty"` // the attachment's size
}

func (at *attachments) refsPath(h proto.Hash) string {
	return filepath.Join(at.n.home.BlobsDir(), "refs", h.String())
}

func (at *attachments) readRefs(h proto.Hash) []blobRef {
	b, err := os.ReadFile(at.refsPath(h))
	if err != nil {
		return nil
	}
	var refs []blobRef
	if proto.Unmarshal(b, &refs) != nil {
		return nil
	}
	return refs
}

func (at *attachments) writeRefs(h proto.Hash, refs []blobRef) error {
	if len(refs) == 0 {
		if err := os.Remove(at.refsPath(h)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := proto.Marshal(refs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(at.refsPath(h)), 0o700); err != nil {
		return err
	}
	return fsutil.WriteAtomic(at.refsPath(h), b, 0o600)
}

// noteRefs records that se lists its attachments, so that retention
// keeps their blobs while se is kept.
func (at *attachments) noteRefs(se *proto.SignedEnvelope, delivered time.Time) {
	if at == nil {
		return
	}
	var ms int64
	if !delivered.IsZero() {
		ms = delivered.UnixMilli()
	}
	at.refMu.Lock()
	defer at.refMu.Unlock()
	usage := at.usageLocked()
	for _, a := range se.Attachments() {
		refs := at.readRefs(a.SHA256)
		r := blobRef{From: se.From, ID: se.ID, Delivered: ms, Size: a.Size}
		dup := false
		for _, x := range refs {
			dup = dup || (x.From == r.From && x.ID == r.ID)
		}
		if dup {
			continue
		}
		if err := at.writeRefs(a.SHA256, append(refs, r)); err != nil {
			at.n.log.Warn("attachments: reference not recorded; retention may remove the blob early", "sha256", a.SHA256, "err", err)
		}
		usage[r.From] += r.Size
	}
}

// prune removes the blobs that no kept envelope lists any more, past
// blobGrace, with their files in the mailbox; and forgets the references
// of envelopes retention removed. It returns how many blobs it removed.
func (at *attachments) prune(now time.Time) int {
	if at == nil {
		return 0
	}
	hs, err := at.store.List()
	if err != nil {
		at.n.log.Warn("attachments: cannot list the blob store", "err", err)
		return 0
	}
	removed := 0
	for _, h := range hs {
		if at.n.ctx.Err() != nil {
			break
		}
		at.refMu.Lock()
		refs := at.readRefs(h)
		var live []blobRef
		for _, r := range refs {
			if _, err := at.n.store.Get(r.From, r.ID); err == nil {
				live = append(live, r)
				continue
			}
			if u := at.usageLocked(); u[r.From] >= r.Size {
				u[r.From] -= r.Size
			}
			if r.Delivered != 0 {
				_ = os.RemoveAll(mailbox.AttachmentDir(at.n.home.MailboxDir(), time.UnixMilli(r.Delivered), r.ID.String()))
			}
		}
		if len(live) != len(refs) {
			_ = at.writeRefs(h, live)
		}
		at.refMu.Unlock()
		if len(live) > 0 || at.fetching(h) {
			continue
		}
		p, err := at.store.Path(h)
		if err != nil {
			continue
		}
		if st, err := os.Stat(p); err != nil || now.Sub(st.ModTime()) < blobGrace {
			continue
		}
		if err := at.store.Remove(h); err != nil {
			at.n.log.Warn("attachments: blob not removed", "sha256", h, "err", err)
			continue
		}
		removed++
		at.n.metrics.inc(cBlobPruned)
	}
	return removed
}

func (at *attachments) fetching(h proto.Hash) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	return at.fetches[h] != nil
}

var cBlobQuota = newCounter("blob.quota", famBlob, "quota")

// usageLocked returns the bytes of attachments each sender's kept
// envelopes list, built from the refs files on first use. The caller
// holds refMu.
func (at *attachments) usageLocked() map[proto.PubKey]uint64 {
	if at.usage != nil {
		return at.usage
	}
	at.usage = map[proto.PubKey]uint64{}
	ents, err := os.ReadDir(filepath.Join(at.n.home.BlobsDir(), "refs"))
	if err != nil {
		return at.usage
	}
	for _, e := range ents {
		h, err := proto.ParseHash(e.Name())
		if err != nil {
			continue
		}
		for _, r := range at.readRefs(h) {
			at.usage[r.From] += r.Size
		}
	}
	return at.usage
}

// withinBudget reports whether the attachments sender's kept envelopes
// list stay within attachment_sender_max_mib; past it, its attachments
// are not fetched as they arrive (blob.quota), only on demand.
func (at *attachments) withinBudget(sender proto.PubKey) bool {
	at.refMu.Lock()
	used := at.usageLocked()[sender]
	at.refMu.Unlock()
	if used <= uint64(at.n.cfg.AttachmentSenderMax) {
		return true
	}
	at.n.metrics.inc(cBlobQuota)
	at.n.logRL.warn(at.n.log, "attachments over the sender's budget are not fetched as they arrive; meshctl fetch still fetches them", sender.Fingerprint(), "blob.quota",
		"sender", sender.Fingerprint(), "listed_bytes", used, "max", at.n.cfg.AttachmentSenderMax)
	return false
}

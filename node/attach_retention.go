package node

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
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
			continue
		}
		usage[r.From] += at.counted(r.Size)
	}
}

// prune removes the blobs that no kept envelope lists any more, past
// blobGrace, with their files in the mailbox; and forgets the references
// of envelopes retention removed, fetched or not, which gives their bytes
// back to their senders' budgets. It returns how many blobs it removed.
func (at *attachments) prune(now time.Time) int {
	if at == nil {
		return 0
	}
	hs, err := at.store.List()
	if err != nil {
		at.n.log.Warn("attachments: cannot list the blob store", "err", err)
		return 0
	}
	held := make(map[proto.Hash]bool, len(hs))
	for _, h := range hs {
		held[h] = true
	}
	// References to blobs this node never fetched (on demand ones nobody
	// asked for, say) count against their senders' budgets too.
	for _, h := range at.refHashes() {
		if !held[h] && at.n.life.ctx.Err() == nil {
			at.forgetRemoved(h)
		}
	}
	removed := 0
	for _, h := range hs {
		if at.n.life.ctx.Err() != nil {
			break
		}
		if at.forgetRemoved(h) > 0 || at.fetching(h) {
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

// forgetRemoved drops the references to h of envelopes the store no
// longer holds, with their mailbox folders, and gives their bytes back
// to their senders' budgets. It returns how many references are left.
func (at *attachments) forgetRemoved(h proto.Hash) int {
	at.refMu.Lock()
	defer at.refMu.Unlock()
	refs := at.readRefs(h)
	var live []blobRef
	for _, r := range refs {
		if _, err := at.n.store.Get(r.From, r.ID); !errors.Is(err, history.ErrNotFound) {
			live = append(live, r) // kept, or unknown for now: kept
			continue
		}
		u := at.usageLocked()
		if u[r.From] -= min(u[r.From], at.counted(r.Size)); u[r.From] == 0 {
			delete(u, r.From)
		}
		if r.Delivered != 0 {
			_ = os.RemoveAll(mailbox.AttachmentDir(at.n.home.MailboxDir(), time.UnixMilli(r.Delivered), r.ID.String()))
		}
	}
	if len(live) != len(refs) {
		if err := at.writeRefs(h, live); err != nil {
			at.n.log.Warn("attachments: references not updated", "sha256", h, "err", err)
		}
	}
	return len(live)
}

func (at *attachments) fetching(h proto.Hash) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	return at.fetches[h] != nil
}

// usageLocked returns the bytes of attachments each sender's kept
// envelopes list, built from the refs files on first use. The caller
// holds refMu.
func (at *attachments) usageLocked() map[proto.PubKey]uint64 {
	if at.usage != nil {
		return at.usage
	}
	at.usage = map[proto.PubKey]uint64{}
	for _, h := range at.refHashes() {
		for _, r := range at.readRefs(h) {
			at.usage[r.From] += at.counted(r.Size)
		}
	}
	return at.usage
}

// counted is what an attachment of size bytes counts against its
// sender's budget: its size, or nothing when it is over attachment_max,
// which this node never fetches.
func (at *attachments) counted(size uint64) uint64 {
	if size > uint64(at.n.cfg.AttachmentMax) {
		return 0
	}
	return size
}

// refHashes lists the blobs that have a refs file, fetched or not.
func (at *attachments) refHashes() []proto.Hash {
	ents, err := os.ReadDir(filepath.Join(at.n.home.BlobsDir(), "refs"))
	if err != nil {
		return nil
	}
	var hs []proto.Hash
	for _, e := range ents {
		if h, err := proto.ParseHash(e.Name()); err == nil {
			hs = append(hs, h)
		}
	}
	return hs
}

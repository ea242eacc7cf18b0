package node

import (
	"time"

	"github.com/meshd/meshd/node/blobs"
	"github.com/meshd/meshd/proto"
)

var cBlobPausedDisk = newCounter("blob.paused_disk", famBlob, "paused_disk")

// diskRoom reports whether p's fetch may go on: the blob store's file
// system keeps at least mailbox_min_free_mib free once the rest of the
// blob is written. Below it the fetch pauses, with a warning, until there
// is room (the check runs again every blobNoSourceRetry).
func (at *attachments) diskRoom(p *blobs.Part) bool {
	floor := at.n.cfg.MailboxMinFree
	if floor <= 0 {
		return true
	}
	free, _, err := diskSpace(at.n.home.BlobsDir())
	if err != nil {
		return true // unknown on this platform: do not block fetches on it
	}
	have, total := p.Progress()
	a := p.Attachment()
	rest := a.Size
	if total > 0 {
		rest = uint64(total-have) * proto.ChunkSize
	}
	if int64(free)-int64(min(rest, a.Size)) >= floor {
		return true
	}
	at.n.metrics.inc(cBlobPausedDisk)
	at.n.logRL.warn(at.n.log, "attachment fetch paused: too little disk space", "", "blob.paused_disk",
		"name", a.Name, "sha256", a.SHA256, "free_bytes", free, "min_free_bytes", floor, "needs", rest)
	select {
	case <-time.After(blobNoSourceRetry):
	case <-at.ctx().Done():
	}
	return false
}

package node

import (
	"context"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// blobServeTimeout bounds the serving of one blob-want: a peer that does
// not read its link's bulk lane holds a serving slot no longer.
const blobServeTimeout = time.Minute

// handleWant serves a blob-want: only to a member that may read the
// envelope it names, which must list the blob; knowing a hash is not
// enough. A refusal and a blob not held get the same answer.
func (at *attachments) handleWant(pl *peers.Link, payload []byte) {
	n := at.n
	w, err := proto.ParseBlobWant(payload)
	if err != nil {
		n.metrics.inc(cBlobMalformed)
		n.logRL.warn(n.log, "bad blob-want frame", pl.Key.Fingerprint(), "blob.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	a, ok := at.allowed(pl.Key, w)
	if !ok {
		n.metrics.inc(cBlobRefused)
		n.logRL.warn(n.log, "blob refused: the asker may not read an envelope of ours that lists it", pl.Key.Fingerprint(), "blob.refused",
			"peer", pl.Key.Fingerprint(), "sha256", w.SHA256, "id", w.ID)
		at.sendChunk(pl, &proto.BlobChunk{SHA256: w.SHA256, What: proto.BlobUnavailable})
		return
	}
	if !at.store.Has(a.SHA256) {
		n.metrics.inc(cBlobUnavailable)
		at.sendChunk(pl, &proto.BlobChunk{SHA256: w.SHA256, What: proto.BlobUnavailable})
		return
	}
	select {
	case at.serveSem <- struct{}{}:
	default:
		n.metrics.inc(cBlobServeBusy)
		return
	}
	at.mu.Lock()
	if at.closed {
		at.mu.Unlock()
		<-at.serveSem
		return
	}
	at.wg.Add(1)
	at.mu.Unlock()
	go func() {
		defer at.wg.Done()
		defer func() { <-at.serveSem }()
		at.serve(pl, a, w.Chunks)
	}()
}

// allowed returns the attachment w asks for if k may read the envelope
// w names and that envelope lists it.
func (at *attachments) allowed(k proto.PubKey, w *proto.BlobWant) (proto.Attachment, bool) {
	st, err := at.n.store.Get(w.From, w.ID)
	if err != nil {
		return proto.Attachment{}, false
	}
	se, err := st.Envelope()
	if err != nil || !at.mayRead(k, se) {
		return proto.Attachment{}, false
	}
	for _, a := range se.Attachments() {
		if a.SHA256 == w.SHA256 {
			return a, true
		}
	}
	return proto.Attachment{}, false
}

// mayRead reports whether member k may read se: an end of a DM, Request
// or Response, or a reader of the channel of a channel Message.
func (at *attachments) mayRead(k proto.PubKey, se *proto.SignedEnvelope) bool {
	switch se.To.Kind {
	case proto.DestPeer:
		return k.Equal(se.From) || k.Equal(se.To.Peer)
	case proto.DestChannel:
		p, ok := at.n.channels.ByID(se.To.Channel)
		return ok && p.CanRead(at.n.Roster(), k)
	}
	return false
}

// serve sends a's chunk list (no chunks asked) or the chunks asked, in
// the link's bulk lane, waiting for room there.
func (at *attachments) serve(pl *peers.Link, a proto.Attachment, chunks []uint32) {
	ctx, cancel := context.WithTimeout(at.ctx(), blobServeTimeout)
	defer cancel()
	if len(chunks) == 0 {
		list, err := at.store.Chunks(a)
		if err != nil {
			at.n.log.Warn("attachments: chunk list not served", "sha256", a.SHA256, "err", err)
			return
		}
		at.sendChunkWait(ctx, pl, &proto.BlobChunk{SHA256: a.SHA256, What: proto.BlobChunkList, Data: encodeList(list)})
		return
	}
	buf := make([]byte, proto.ChunkSize)
	for _, i := range chunks {
		if int(i) >= a.Chunks() {
			continue
		}
		data, err := at.store.ReadChunk(a, int(i), buf)
		if err != nil {
			at.n.log.Warn("attachments: chunk not served", "sha256", a.SHA256, "index", i, "err", err)
			return
		}
		if !at.sendChunkWait(ctx, pl, &proto.BlobChunk{SHA256: a.SHA256, What: proto.BlobChunkData, Index: i, Data: data}) {
			return
		}
		at.n.metrics.inc(cBlobServed)
	}
}

func encodeList(list []proto.Hash) []byte {
	b := make([]byte, 0, len(list)*len(proto.Hash{}))
	for _, h := range list {
		b = append(b, h[:]...)
	}
	return b
}

func chunkFrame(c *proto.BlobChunk) []byte { return proto.BlobChunkFrame(c) }

func (at *attachments) sendChunk(pl *peers.Link, c *proto.BlobChunk) {
	if f := chunkFrame(c); f != nil {
		_ = pl.Conn.SendBulk(f)
	}
}

func (at *attachments) sendChunkWait(ctx context.Context, pl *peers.Link, c *proto.BlobChunk) bool {
	f := chunkFrame(c)
	return f != nil && pl.Conn.SendBulkWait(ctx, f) == nil
}

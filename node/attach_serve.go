package node

import (
	"context"
	"errors"
	"time"

	"github.com/meshd/meshd/node/blobs"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// blobServeTimeout bounds the serving of one blob-want: a peer that does
// not read its link's bulk lane holds a serving slot no longer.
const blobServeTimeout = time.Minute

// handleWant serves a blob-want: only to a member that may read the
// envelope it names, which must list the blob; knowing a hash is not
// enough. A refusal and a blob not held at all (neither complete nor a
// part) get the same answer.
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
	if at.store.Holding(a.SHA256) == blobs.HoldsNothing {
		n.metrics.inc(cBlobUnavailable)
		at.sendChunk(pl, &proto.BlobChunk{SHA256: w.SHA256, What: proto.BlobUnavailable})
		return
	}
	if len(w.Chunks) == 0 {
		at.serveList(pl, a)
		return
	}
	at.queueWant(pl, a, w.Chunks)
}

// The wants of chunks of one link are served one after another by one
// goroutine, which holds one of blobServeConcurrency slots while it runs:
// they share the link's bulk lane, so serving two at once would not send
// faster. A want that finds its link being served waits in the link's
// queue, up to blobWantQueue of them, rather than being answered "not
// yet": a fetch keeps several wants ahead of its chunks (fetchInFlight),
// and each "not yet" cost it blobNotYetRetry. With every want in a slot
// of its own, a 256 MiB DM on loopback (its files in memory) spent about
// 0.95 s of its 2.4 s of transfer waiting out those retries
// (docs/BENCHMARKS.md). So that a link does not keep its slot while
// others are turned away, a server that sees a want refused for want of
// a slot hands its slot back after the want it is serving, and answers
// its queue "not yet".
type serveQueue struct {
	wants []queuedWant
}

type queuedWant struct {
	a      proto.Attachment
	chunks []uint32
}

// blobWantQueue bounds the wants of chunks queued on one link behind the
// one being served: as many as a fetch has out at its smallest want
// (fetchInFlight chunks in wants of minWantChunks).
const blobWantQueue = fetchInFlight / minWantChunks

// queueWant serves a want of chunks, or queues it behind its link's, or
// answers it "not yet" (a full queue, or no slot free).
func (at *attachments) queueWant(pl *peers.Link, a proto.Attachment, chunks []uint32) {
	at.mu.Lock()
	if at.closed {
		at.mu.Unlock()
		return
	}
	if q := at.serving[pl]; q != nil {
		if len(q.wants) < blobWantQueue {
			q.wants = append(q.wants, queuedWant{a, chunks})
			at.mu.Unlock()
			return
		}
		at.mu.Unlock()
		at.refuseBusy(pl, a.SHA256, chunks) // its own queue is full: it holds a slot already
		return
	}
	select {
	case at.serveSem <- struct{}{}:
	default:
		at.mu.Unlock()
		at.refusals.Add(1) // the links being served hand their slots back
		at.refuseBusy(pl, a.SHA256, chunks)
		return
	}
	q := &serveQueue{wants: []queuedWant{{a, chunks}}}
	at.serving[pl] = q
	at.wg.Add(1)
	at.mu.Unlock()
	go at.serveLink(pl, q)
}

// refuseBusy answers a want "not yet" for want of a slot or of room in
// its link's queue.
func (at *attachments) refuseBusy(pl *peers.Link, h proto.Hash, chunks []uint32) {
	at.n.metrics.inc(cBlobServeBusy)
	at.notYet(pl, h, chunks)
}

// serveLink serves the wants queued on pl until none are left, the link
// stops taking chunks, or a want elsewhere was refused a slot.
func (at *attachments) serveLink(pl *peers.Link, q *serveQueue) {
	defer at.wg.Done()
	refused := at.refusals.Load()
	ok := true
	for {
		at.mu.Lock()
		if len(q.wants) == 0 || !ok || at.refusals.Load() != refused {
			rest := q.wants
			delete(at.serving, pl)
			at.mu.Unlock()
			<-at.serveSem // before the answers below: the asker's next want finds the slot
			for _, w := range rest {
				if ok {
					at.notYet(pl, w.a.SHA256, w.chunks)
				}
			}
			return
		}
		w := q.wants[0]
		q.wants = q.wants[1:]
		at.mu.Unlock()
		ok = at.serve(pl, w.a, w.chunks)
	}
}

// serveList serves a want of a's chunk list, in a slot of listSem; one
// beyond those is dropped.
func (at *attachments) serveList(pl *peers.Link, a proto.Attachment) {
	select {
	case at.listSem <- struct{}{}:
	default:
		at.n.metrics.inc(cBlobServeBusy)
		return
	}
	at.mu.Lock()
	if at.closed {
		at.mu.Unlock()
		<-at.listSem
		return
	}
	at.wg.Add(1)
	at.mu.Unlock()
	go func() {
		defer at.wg.Done()
		defer func() { <-at.listSem }()
		at.serve(pl, a, nil)
	}()
}

// notYet answers "not yet" (what 4) for each chunk asked: this node
// serves the blob to the asker but does not send these chunks now (it
// lacks them, or serves as many wants as it may), so the asker asks
// again shortly or asks another holder. A list asked for gets nothing.
func (at *attachments) notYet(pl *peers.Link, h proto.Hash, chunks []uint32) {
	for _, i := range chunks {
		at.n.metrics.inc(cBlobNotYetSent)
		at.sendChunk(pl, &proto.BlobChunk{SHA256: h, What: proto.BlobNotYet, Index: i})
	}
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
		p, ok := at.n.chans.Set().ByID(se.To.Channel)
		return ok && p.CanRead(at.n.Roster(), k)
	}
	return false
}

// serve sends a's chunk list (no chunks asked) or the chunks asked, in
// the link's bulk lane, waiting for room there: from the complete blob,
// or from a part being fetched, which answers "not yet" for the chunks
// it lacks. A part thrown away meanwhile answers unavailable. It returns
// false if the link stopped taking frames (closed, or not read within
// blobServeTimeout), or the node is closing.
func (at *attachments) serve(pl *peers.Link, a proto.Attachment, chunks []uint32) bool {
	ctx, cancel := context.WithTimeout(at.ctx(), blobServeTimeout)
	defer cancel()
	if len(chunks) == 0 {
		list, err := at.store.ChunkList(a)
		if err != nil {
			if !errors.Is(err, blobs.ErrNotYet) && !errors.Is(err, blobs.ErrNotFound) {
				at.n.log.Warn("attachments: chunk list not served", "sha256", a.SHA256, "err", err)
			}
			at.n.metrics.inc(cBlobUnavailable)
			at.sendChunk(pl, &proto.BlobChunk{SHA256: a.SHA256, What: proto.BlobUnavailable})
			return true
		}
		return at.sendChunkWait(ctx, pl, &proto.BlobChunk{SHA256: a.SHA256, What: proto.BlobChunkList, Data: encodeList(list)})
	}
	var spare []byte // a frame built and not sent (its chunk not held yet)
	for _, i := range chunks {
		if int(i) >= a.Chunks() {
			continue
		}
		// The chunk is read straight into its frame, which the link then
		// owns: no copy of it, and no buffer of the serve's.
		if spare == nil {
			spare = transport.ChunkFrameBuf()
		}
		frame, data := proto.BlobChunkDataFrame(spare, a.SHA256, i, proto.ChunkLen(a.Size, int(i)))
		spare = nil
		_, fromPart, err := at.store.ReadVerifiedChunk(a, int(i), data)
		switch {
		case errors.Is(err, blobs.ErrNotYet):
			spare = frame
			at.n.metrics.inc(cBlobNotYetSent)
			if !at.sendChunkWait(ctx, pl, &proto.BlobChunk{SHA256: a.SHA256, What: proto.BlobNotYet, Index: i}) {
				return false
			}
			continue
		case errors.Is(err, blobs.ErrNotFound):
			at.n.metrics.inc(cBlobUnavailable)
			at.sendChunk(pl, &proto.BlobChunk{SHA256: a.SHA256, What: proto.BlobUnavailable})
			return true
		case err != nil:
			at.n.log.Warn("attachments: chunk not served", "sha256", a.SHA256, "index", i, "err", err)
			return true
		}
		if pl.Conn.SendBulkWait(ctx, frame) != nil {
			return false
		}
		at.n.metrics.inc(cBlobServed)
		if fromPart {
			at.n.metrics.inc(cBlobPartServed)
		}
	}
	return true
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

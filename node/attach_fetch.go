package node

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meshd/meshd/node/blobs"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// blobWantTimeout is how long a fetch waits for the next answer of the
// peer it asked before it asks again (that peer or another).
const blobWantTimeout = 10 * time.Second

// blobNoSourceRetry is how often a fetch with no linked source looks
// again, besides each link that comes up; and how long a peer that said
// it does not serve the blob is passed over.
const blobNoSourceRetry = 5 * time.Second

// maxCorruptRetries bounds the times a blob whose chunks all verified but
// whose whole did not (its sender signed a wrong SHA-256) is fetched
// again before the fetch gives up.
const maxCorruptRetries = 2

// fetch is the transfer of one blob, for every envelope that lists it.
type fetch struct {
	a       proto.Attachment
	arrived chan struct{} // capacity 1: an answer came

	// guarded by attachments.mu
	wants []want
	part  *blobs.Part
	cw    *chunkWriter

	umu         sync.Mutex
	unavailable map[proto.PubKey]time.Time // guarded by umu
	notYets     []notYetAnswer             // guarded by umu: "not yet"s since the last round

	done chan struct{} // closed when the fetch ends
	err  error         // set before done closes
}

func (f *fetch) signal() {
	select {
	case f.arrived <- struct{}{}:
	default:
	}
}

// schedule starts the fetch of w's blob, or adds w to the one under way.
// It returns nil once the node is closing.
func (at *attachments) schedule(w want) *fetch {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.closed {
		return nil
	}
	if f := at.fetches[w.A.SHA256]; f != nil {
		if !slices.Contains(f.wants, w) {
			f.wants = append(f.wants, w)
		}
		return f
	}
	f := &fetch{a: w.A, wants: []want{w}, arrived: make(chan struct{}, 1),
		unavailable: map[proto.PubKey]time.Time{}, done: make(chan struct{})}
	at.fetches[w.A.SHA256] = f
	at.waiting = append(at.waiting, f)
	at.startLocked()
	return f
}

// maxFetches bounds the fetches under way at once; the others wait, in
// memory (a few hundred bytes each) and in their want files, however
// many envelopes list attachments.
const maxFetches = 4

// startLocked starts waiting fetches while fewer than maxFetches run.
func (at *attachments) startLocked() {
	for at.running < maxFetches && len(at.waiting) > 0 && !at.closed {
		f := at.waiting[0]
		at.waiting[0] = nil
		at.waiting = at.waiting[1:]
		at.running++
		at.wg.Add(1)
		go at.run(f)
	}
}

func (at *attachments) run(f *fetch) {
	defer at.wg.Done()
	err := at.fetchBlob(f)
	// Fetched: place every want, those added meanwhile too, before the
	// fetch leaves the table. pendingFor must find it until then, or a
	// sibling fetch of the same envelope, finishing now, announces the
	// envelope with this attachment's path in the store.
	var wants []want
	for placed := 0; ; {
		at.mu.Lock()
		if more := f.wants[placed:]; err == nil && len(more) > 0 {
			more = slices.Clone(more)
			at.mu.Unlock()
			for _, w := range more {
				at.place(w)
				at.dropWant(w)
			}
			placed += len(more)
			continue
		}
		delete(at.fetches, f.a.SHA256)
		wants = f.wants
		at.running--
		at.startLocked()
		at.mu.Unlock()
		break
	}
	switch {
	case err == nil:
		at.placedAll(wants)
	case at.ctx().Err() != nil:
		// Shutting down: the want files resume the fetch at the next start.
	default:
		at.n.logRL.warn(at.n.log, "attachment not fetched", f.a.SHA256.String(), "blob.failed",
			"name", f.a.Name, "sha256", f.a.SHA256, "err", err)
		for _, w := range wants {
			at.dropWant(w)
		}
	}
	f.err = err
	close(f.done)
}

// fetchBlob fetches f's blob into the store, resuming any part.
func (at *attachments) fetchBlob(f *fetch) error {
	for try := 0; ; try++ {
		p, err := at.store.Begin(f.a)
		if errors.Is(err, blobs.ErrComplete) {
			return nil
		}
		if err != nil {
			return err
		}
		cw := at.startChunkWriter(f, p)
		at.mu.Lock()
		f.part, f.cw = p, cw
		at.mu.Unlock()
		err = at.pull(f, p)
		cw.close()
		if err != nil {
			_ = p.Close()
			return err
		}
		err = p.Finish()
		if err == nil {
			at.n.metrics.inc(cBlobFetched)
			return nil
		}
		if !errors.Is(err, blobs.ErrCorrupt) || try >= maxCorruptRetries {
			_ = p.Close()
			return err
		}
		at.n.metrics.inc(cBlobCorrupt)
		at.n.logRL.warn(at.n.log, "attachment content does not match its signed hash; fetching it again", f.a.SHA256.String(), "blob.corrupt",
			"name", f.a.Name, "sha256", f.a.SHA256)
	}
}

// pull asks linked sources for what p lacks until it has every chunk:
// the chunk list from one source, then the missing chunks from several at
// once, as swarm picks them (attach_sources.go), each source with at most
// blobPerSource chunks outstanding in wants of at most wantChunks, and at
// most fetchInFlight in all.
func (at *attachments) pull(f *fetch, p *blobs.Part) error {
	s := newSwarm(at, f)
	s.refresh(time.Now(), true)
	tick := time.NewTicker(blobNotYetRetry / 2)
	defer tick.Stop()
	for !p.Done() {
		if err := at.ctx().Err(); err != nil {
			return err
		}
		if !at.diskRoom(p) {
			continue
		}
		now := time.Now()
		s.refresh(now, false)
		if !s.anyLinked() {
			select {
			case <-at.linkUp:
				s.refresh(time.Now(), true)
			case <-time.After(blobNoSourceRetry):
				s.refresh(time.Now(), true)
			case <-at.ctx().Done():
			}
			continue
		}
		if p.NeedChunks() {
			if i := s.listSource(now); i >= 0 && !s.send(i, nil) {
				s.list = -1
			}
		} else {
			s.list = -1
			missing := p.Missing(0)
			s.settle(missing, now)
			for i, chunks := range s.wants(missing, now) {
				s.send(i, chunks)
			}
		}
		select { // links are looked at again every blobLinksRefresh: at.linkUp is for idle fetches
		case <-f.arrived:
		case <-tick.C:
		case <-at.ctx().Done():
		}
	}
	return nil
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (f *fetch) passOver(k proto.PubKey) {
	f.umu.Lock()
	f.unavailable[k] = time.Now()
	f.umu.Unlock()
}

func (f *fetch) passedOver(k proto.PubKey) bool {
	f.umu.Lock()
	defer f.umu.Unlock()
	t, ok := f.unavailable[k]
	if ok && time.Since(t) > blobNoSourceRetry {
		delete(f.unavailable, k)
		return false
	}
	return ok
}

// candidates lists who may hold w's blob: its envelope's sender, then
// the other members that may read the envelope; and, for a channel
// Message, the stripe owners (stripeOwners).
func (at *attachments) candidates(w want) (keys, owners []proto.PubKey) {
	keys = []proto.PubKey{w.From}
	st, err := at.n.store.Get(w.From, w.ID)
	if err != nil {
		return keys, nil
	}
	se, err := st.Envelope()
	if err != nil {
		return keys, nil
	}
	switch se.To.Kind {
	case proto.DestPeer:
		keys = append(keys, se.To.Peer)
	case proto.DestChannel:
		if p, ok := at.n.chans.Set().ByID(se.To.Channel); ok {
			readers := p.Readers(at.n.Roster())
			keys = append(keys, readers...)
			owners = stripeOwners(se.From, readers)
		}
	}
	return keys, owners
}

// handleChunk takes a blob-chunk frame (type byte included): a chunk
// list, a chunk, a "not yet" or a refusal for a fetch under way. Chunks
// go to the fetch's writer (attach_write.go), which verifies each before
// it is written, and then hands the frame back to the link's pool; one
// that fails is dropped and counted, and asked for again.
func (at *attachments) handleChunk(pl *peers.Link, frame []byte) {
	n := at.n
	c, err := proto.ParseBlobChunk(frame[1:])
	if err != nil {
		n.metrics.inc(cBlobMalformed)
		n.logRL.warn(n.log, "bad blob-chunk frame", pl.Key.Fingerprint(), "blob.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	at.mu.Lock()
	f := at.fetches[c.SHA256]
	var p *blobs.Part
	var cw *chunkWriter
	if f != nil {
		p, cw = f.part, f.cw
	}
	at.mu.Unlock()
	if p == nil {
		n.metrics.inc(cBlobUnwanted)
		return
	}
	switch c.What {
	case proto.BlobUnavailable:
		f.passOver(pl.Key)
	case proto.BlobNotYet:
		n.metrics.inc(cBlobNotYet)
		f.noteNotYet(pl.Key, c.Index)
	case proto.BlobChunkList:
		err = p.SetChunks(c.Data)
	case proto.BlobChunkData:
		cw.put(chunkJob{from: pl.Key, index: c.Index, data: c.Data, frame: frame})
		return // the writer signals f
	}
	if errors.Is(err, blobs.ErrBadChunk) {
		n.metrics.inc(cBlobBadChunk)
		n.logRL.warn(n.log, "attachment chunk does not match its hash; dropped", pl.Key.Fingerprint(), "blob.bad_chunk",
			"peer", pl.Key.Fingerprint(), "sha256", c.SHA256, "index", c.Index, "err", err)
		f.passOver(pl.Key)
	} else if err != nil {
		n.logRL.warn(n.log, "attachment chunk not written", c.SHA256.String(), "blob.write", "sha256", c.SHA256, "err", err)
	}
	f.signal()
}

// onDelivered starts the eager fetches of a delivered envelope's
// attachments: a DM's, Request's or Response's up to AttachmentEagerMax,
// a channel Message's below AttachmentChannelEagerMax. Larger ones wait
// for meshctl fetch; those over AttachmentMax are never fetched.
func (at *attachments) onDelivered(se *proto.SignedEnvelope, at0 time.Time) {
	if at == nil {
		return
	}
	cfg := at.n.cfg
	at.noteRefs(se, at0)
	for _, a := range se.Attachments() {
		if a.Size > uint64(cfg.AttachmentMax) {
			at.n.metrics.inc(cBlobTooLarge)
			at.n.logRL.log(at.n.log, "attachment over attachment_max_mib is not fetched", se.From.Fingerprint(), "blob.too_large",
				"id", se.ID, "name", a.Name, "size", a.Size, "max", cfg.AttachmentMax)
			continue
		}
		eager := a.Size <= uint64(cfg.AttachmentEagerMax)
		if se.To.Kind == proto.DestChannel {
			eager = a.Size < uint64(cfg.AttachmentChannelEagerMax)
		}
		if eager {
			at.want(se, at0, a)
		}
	}
}

// want records and starts the fetch of attachment a of se.
func (at *attachments) want(se *proto.SignedEnvelope, delivered time.Time, a proto.Attachment) *fetch {
	w := want{From: se.From, ID: se.ID, Delivered: delivered.UnixMilli(), A: a}
	if err := at.saveWant(w); err != nil {
		at.n.log.Warn("attachments: fetch record not written; a restart will not resume it", "name", a.Name, "err", err)
	}
	return at.schedule(w)
}

func (f *fetch) String() string { return fmt.Sprintf("fetch %s (%s)", f.a.Name, f.a.SHA256) }

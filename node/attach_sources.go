package node

import (
	"bytes"
	"slices"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// A fetch asks several linked members at once, and spreads its load
// without messages (PROTOCOL.md §13.5): for a channel Message, the
// channel's readers other than the envelope's sender, sorted by key, each
// own a stripe of the chunks (index mod their count). A reader asks the
// sender only for its own stripe, and each other stripe's owner first;
// it falls back to the sender (then any other holder) for a stripe whose
// owner is not linked, is passed over (it answered unavailable, sent a
// bad chunk or stayed silent), or is stalled: it has said "not yet"
// without sending a chunk asked of it for blobStallAfter, while the
// sender was not busy with this node. So the sender uploads about one
// copy, and each reader about one stripe per other reader. A DM, Request
// or Response has no stripes: its sender is asked first.

// blobStallAfter is how long an owner may answer "not yet" for its stripe
// without sending any chunk asked of it, the sender not busy meanwhile,
// before its stripe is asked of the sender. A reader that fetches the
// blob gets its stripe from the sender, so it sends something within a
// few wants' time once the sender has room; one that does not fetch (a
// part left on disk, a fetch waiting its turn) holds up the others' copy
// of its stripe by no more than this. With 3 s, and a busy sender not
// taken into account, the late owners of nine looked stalled and the
// sender uploaded 4 copies (docs/BENCHMARKS.md).
const blobStallAfter = 5 * time.Second

// blobNotYetRetry is how long a chunk answered "not yet" waits before it
// is asked again: short, since the source is most likely fetching it.
const blobNotYetRetry = 400 * time.Millisecond

// blobPerSource bounds the chunks asked of one source and not yet
// answered: two wants' worth, so the next want is asked for while the
// chunks of the one before still arrive.
const blobPerSource = 2 * wantChunks

// minWantChunks is the fewest chunks asked in one want of a source that
// still owes chunks: as chunks arrive one by one, a fetch waits until a
// source has room for half a want rather than asking it for each chunk
// in a want of its own. A want costs the source a lookup of the envelope
// it names (to check who may read it) and a goroutine; with a want a
// chunk, on loopback, the 256 MiB DM asked 1,024 of them.
const minWantChunks = wantChunks / 2

// blobSourcesRefresh is how often a fetch looks again at who may hold
// its blob (the channel's readers, the envelopes listing it) and at its
// links.
const (
	blobSourcesRefresh = 2 * time.Second
	blobLinksRefresh   = 250 * time.Millisecond
)

// fetchSource is one member a fetch may ask.
type fetchSource struct {
	key      proto.PubKey
	w        want        // the envelope named when asking it
	link     *peers.Link // nil while not linked
	inflight int         // chunks asked and not answered
	waiting  time.Time   // since when it owes an answer: the first ask, or its last answer
	notYet   time.Time   // the start of its run of "not yet"s with no chunk sent; zero if none
	busy     time.Time   // its last "not yet" (of the sender: it was busy)
}

// chunkAsk is one chunk's state in a fetch (24 bytes): who it was asked
// of (-1: nobody), when (Unix ns), and when it may be asked again after a
// "not yet" (Unix ns).
type chunkAsk struct {
	src   int32
	asked int64
	retry int64
}

// blobChunkTimeout is how long one chunk asked of a source that keeps
// answering others may go unanswered (its answer lost, say a "not yet"
// the source could not queue) before it is asked again, of whom pick then
// chooses. It is well above the time a source takes to send the two wants
// it may owe, so that a slow source is not asked twice for the same chunk.
const blobChunkTimeout = 3 * blobWantTimeout

// notYetAnswer is a "not yet" a source sent for one chunk.
type notYetAnswer struct {
	key   proto.PubKey
	index uint32
}

// swarm decides who to ask for what in one fetch; it is used by the
// fetch's goroutine only. Its state is bounded by the chunk count (at
// most 4096) and the candidates (members that may read an envelope
// listing the blob).
type swarm struct {
	at      *attachments
	f       *fetch
	srcs    []*fetchSource
	byKey   map[proto.PubKey]int
	owners  []int // stripe owners (indexes into srcs, -1 for this node), nil without stripes
	sender  int   // index of the first envelope's sender in srcs, -1 if none
	asks    []chunkAsk
	list    int // source asked for the chunk list, -1 if none
	listAt  time.Time
	sources time.Time // last look at the candidates
	links   time.Time // last look at the links
}

func newSwarm(at *attachments, f *fetch) *swarm {
	return &swarm{at: at, f: f, byKey: map[proto.PubKey]int{}, sender: -1, list: -1}
}

// refresh looks again at the candidates (every blobSourcesRefresh, or
// when forced) and at their links (every blobLinksRefresh).
func (s *swarm) refresh(now time.Time, force bool) {
	if force || now.Sub(s.sources) >= blobSourcesRefresh {
		s.sources = now
		s.candidates()
	}
	if force || now.Sub(s.links) >= blobLinksRefresh {
		s.links = now
		for i, src := range s.srcs {
			pl := s.at.n.peers.Linked(src.key)
			if src.link != nil && (pl != src.link || isDone(src.link.Conn.Done())) {
				s.release(i)
			}
			src.link = pl
		}
	}
}

// candidates adds the members that may hold the blob to srcs (never
// removing one: indexes stay valid), and sets the stripes from the first
// envelope listing it.
func (s *swarm) candidates() {
	at := s.at
	at.mu.Lock()
	wants := slices.Clone(s.f.wants)
	at.mu.Unlock()
	me := at.n.id.Pub
	for j, w := range wants {
		keys, owners := at.candidates(w)
		for _, k := range keys {
			if k.Equal(me) {
				continue
			}
			if _, ok := s.byKey[k]; !ok && len(s.srcs) < maxFetchSources {
				s.byKey[k] = len(s.srcs)
				s.srcs = append(s.srcs, &fetchSource{key: k, w: w})
			}
		}
		if j == 0 {
			s.sender = s.index(w.From)
			s.owners = s.owners[:0]
			for _, k := range owners {
				s.owners = append(s.owners, s.index(k))
			}
			if len(s.owners) == 0 {
				s.owners = nil
			}
		}
	}
}

// maxFetchSources bounds the members one fetch keeps state for.
const maxFetchSources = 1024

func (s *swarm) index(k proto.PubKey) int {
	if i, ok := s.byKey[k]; ok {
		return i
	}
	return -1
}

// usable reports whether source i may be asked now.
func (s *swarm) usable(i int) bool {
	if i < 0 {
		return false
	}
	src := s.srcs[i]
	return src.link != nil && !s.f.passedOver(src.key)
}

// stalled reports whether source i has said "not yet" for chunks of its
// own stripe for longer than blobStallAfter without sending a chunk asked
// of it, while the sender was not busy: an owner waits for its stripe
// from the sender, so while the sender answers this node "not yet" too,
// the owner's wait is the sender's, and asking the sender for its stripe
// would only add to it. A stalled source is tried again as an owner
// blobNoSourceRetry later (settle).
func (s *swarm) stalled(i int, now time.Time) bool {
	t := s.srcs[i].notYet
	if t.IsZero() || now.Sub(t) <= blobStallAfter {
		return false
	}
	return s.sender < 0 || now.Sub(s.srcs[s.sender].busy) > blobStallAfter
}

// pick chooses who to ask for chunk c: its stripe's owner unless it is
// stalled; else the sender, which holds the whole blob (a busy sender's
// "not yet" is no reason to ask elsewhere); else the owner even if
// stalled, else any other candidate, one not stalled first. Only usable
// sources are picked; -1: nobody.
func (s *swarm) pick(c int, now time.Time) int {
	owner := s.owner(c)
	switch {
	case s.usable(owner) && !s.stalled(owner, now):
		return owner
	case s.usable(s.sender):
		return s.sender
	case s.usable(owner):
		return owner
	}
	first := -1
	for i := range s.srcs {
		if !s.usable(i) {
			continue
		}
		if !s.stalled(i, now) {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

// owner returns the source that owns chunk c's stripe; -1 if there are
// no stripes, or this node owns it.
func (s *swarm) owner(c int) int {
	if len(s.owners) == 0 {
		return -1
	}
	return s.owners[c%len(s.owners)]
}

// ask records chunk c as asked of source i.
func (s *swarm) ask(c, i int, now time.Time) {
	src := s.srcs[i]
	if src.inflight == 0 {
		src.waiting = now
	}
	src.inflight++
	s.asks[c].src = int32(i)
	s.asks[c].asked = now.UnixNano()
}

// answered records that source i answered for chunk c (it arrived, or
// "not yet").
func (s *swarm) answered(c int, now time.Time) {
	i := s.asks[c].src
	if i < 0 {
		return
	}
	src := s.srcs[i]
	src.inflight--
	src.waiting = now
	s.asks[c].src = -1
}

// release forgets every chunk asked of source i, so it is asked again
// elsewhere.
func (s *swarm) release(i int) {
	for c := range s.asks {
		if s.asks[c].src == int32(i) {
			s.asks[c].src = -1
		}
	}
	s.srcs[i].inflight = 0
	if s.list == i {
		s.list = -1
	}
}

// settle takes what happened since the last round: chunks that arrived,
// "not yet" answers, sources gone or silent for blobWantTimeout.
func (s *swarm) settle(missing []int, now time.Time) {
	if s.asks == nil {
		s.asks = make([]chunkAsk, s.f.a.Chunks())
		for c := range s.asks {
			s.asks[c].src = -1
		}
	}
	lacking := make([]bool, len(s.asks))
	for _, c := range missing {
		lacking[c] = true
	}
	lost := now.Add(-blobChunkTimeout).UnixNano()
	for c := range s.asks {
		i := s.asks[c].src
		switch {
		case i >= 0 && !lacking[c]:
			s.answered(c, now)
			s.srcs[i].notYet = time.Time{} // it sends: not stalled
		case i >= 0 && s.asks[c].asked < lost:
			s.srcs[i].inflight-- // its answer was lost: ask again
			s.asks[c].src = -1
		}
	}
	for _, ny := range s.f.takeNotYets() {
		i := s.index(ny.key)
		c := int(ny.index)
		if i < 0 || c >= len(s.asks) || s.asks[c].src != int32(i) {
			continue // not asked of it (any more)
		}
		s.answered(c, now)
		s.asks[c].retry = now.Add(blobNotYetRetry).UnixNano()
		s.srcs[i].busy = now
		if i == s.owner(c) && s.srcs[i].notYet.IsZero() {
			s.srcs[i].notYet = now
		}
	}
	for i, src := range s.srcs {
		if !src.notYet.IsZero() && now.Sub(src.notYet) > blobStallAfter+blobNoSourceRetry {
			src.notYet = time.Time{} // stalled long enough: try it again as an owner
		}
		silent := src.inflight > 0 && now.Sub(src.waiting) > blobWantTimeout
		if silent {
			s.f.passOver(src.key) // silent: ask another, or this one again later
		}
		if silent || (src.inflight > 0 && !s.usable(i)) {
			s.release(i)
		}
	}
}

// wants returns the blob-wants to send now: missing chunks not asked of
// anyone, grouped by the source picked for each, at most blobPerSource
// outstanding per source, wantChunks per want and fetchInFlight in all.
func (s *swarm) wants(missing []int, now time.Time) map[int][]uint32 {
	out := map[int][]uint32{}
	total := 0
	for _, src := range s.srcs {
		total += src.inflight
	}
	for _, c := range missing {
		if total >= fetchInFlight {
			break
		}
		if s.asks[c].src >= 0 || now.UnixNano() < s.asks[c].retry {
			continue
		}
		i := s.pick(c, now)
		if i < 0 || s.srcs[i].inflight >= blobPerSource || len(out[i]) >= wantChunks {
			continue
		}
		if len(out[i]) == 0 && s.srcs[i].inflight > 0 && blobPerSource-s.srcs[i].inflight < minWantChunks {
			continue // it owes chunks enough: ask once it has room for more
		}
		total++
		out[i] = append(out[i], uint32(c))
		s.ask(c, i, now)
	}
	return out
}

// listSource returns who to ask for the chunk list, if it is to be asked
// now: the sender first, else any usable candidate; -1 if none or if one
// was asked less than blobWantTimeout ago.
func (s *swarm) listSource(now time.Time) int {
	if s.list >= 0 {
		if s.usable(s.list) && now.Sub(s.listAt) <= blobWantTimeout {
			return -1
		}
		if s.usable(s.list) {
			s.f.passOver(s.srcs[s.list].key)
		}
		s.list = -1
	}
	i := s.sender
	if !s.usable(i) {
		i = slices.IndexFunc(s.srcs, func(src *fetchSource) bool { return s.usable(s.index(src.key)) })
	}
	if i >= 0 {
		s.list, s.listAt = i, now
	}
	return i
}

// send sends a blob-want to source i; false if the link refused it.
func (s *swarm) send(i int, chunks []uint32) bool {
	src := s.srcs[i]
	w := proto.BlobWant{From: src.w.From, ID: src.w.ID, SHA256: s.f.a.SHA256, Chunks: chunks}
	b, err := proto.Marshal(&w)
	if err != nil {
		return false
	}
	// The fetch's rate (attachment_fetch_rate_mib, and less while
	// envelopes move on the link), then the receive credit the chunks
	// asked for take (attach_write.go).
	if err := s.at.waitFetchRate(src.link.Conn, len(chunks)); err != nil {
		s.release(i)
		return false
	}
	if err := src.link.Conn.Send(append([]byte{byte(proto.FrameBlobWant)}, b...)); err != nil {
		s.f.passOver(src.key)
		s.release(i)
		return false
	}
	grantChunks(src.link.Conn, len(chunks))
	return true
}

// anyLinked reports whether some candidate may be asked now.
func (s *swarm) anyLinked() bool {
	for i := range s.srcs {
		if s.usable(i) {
			return true
		}
	}
	return false
}

// stripeOwners returns the stripe owners of a channel Message from
// sender, given the channel's readers: the readers other than the sender,
// sorted by key.
func stripeOwners(sender proto.PubKey, readers []proto.PubKey) []proto.PubKey {
	out := make([]proto.PubKey, 0, len(readers))
	for _, k := range readers {
		if !k.Equal(sender) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b proto.PubKey) int { return bytes.Compare(a[:], b[:]) })
	return slices.CompactFunc(out, func(a, b proto.PubKey) bool { return a.Equal(b) })
}

// noteNotYet records a "not yet" from k for chunk index of f's blob, for
// the fetch's next round. At most one per chunk of the blob waits: more
// are dropped (the chunk is then asked again after blobWantTimeout).
func (f *fetch) noteNotYet(k proto.PubKey, index uint32) {
	f.umu.Lock()
	if len(f.notYets) < max(f.a.Chunks(), 1) {
		f.notYets = append(f.notYets, notYetAnswer{key: k, index: index})
	}
	f.umu.Unlock()
}

func (f *fetch) takeNotYets() []notYetAnswer {
	f.umu.Lock()
	defer f.umu.Unlock()
	out := f.notYets
	f.notYets = nil
	return out
}

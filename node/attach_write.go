package node

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/meshd/meshd/node/blobs"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// wantChunks is how many chunks one want of a fetch asks for (at most
// proto.MaxWantChunks): 4 MiB. A fetch keeps at most two wants' worth
// outstanding per source (blobPerSource), and fetchInFlight in all.
const wantChunks = 16

// fetchInFlight bounds the chunks one fetch has asked for and not yet
// received, over all its sources: 16 MiB, four wants, so that a fetch
// from several readers keeps each busy while its memory stays bounded.
const fetchInFlight = 4 * wantChunks

// chunkQueue bounds the chunks a fetch holds between its link's reader
// and its writer: as many as it can have asked for and not written, so
// that the chunks it asked for never stop the link's reader (an
// envelope behind them would wait for the disk). Past it (chunks nobody
// asked for) the reader waits, so the socket's buffer fills and flow
// control slows the sender: the memory a fetch holds does not grow with
// a fast peer or a slow disk.
const chunkQueue = fetchInFlight

// chunkJob is one chunk received for a fetch, to verify and write.
type chunkJob struct {
	from  proto.PubKey
	index uint32
	data  []byte // aliases frame
	frame []byte // the frame the link handed over, recycled once written
}

// chunkWriter verifies and writes a fetch's chunks in a goroutine of its
// own, so that the link's reader goes on reading (envelopes and acks
// included) while a chunk is hashed and written and the part file synced.
type chunkWriter struct {
	at   *attachments
	f    *fetch
	p    *blobs.Part
	q    chan chunkJob
	stop chan struct{} // closed by close: put drops, the goroutine ends
	done chan struct{} // closed when the goroutine has ended
	once sync.Once
}

// startChunkWriter starts the writer of f's part p.
func (at *attachments) startChunkWriter(f *fetch, p *blobs.Part) *chunkWriter {
	w := &chunkWriter{at: at, f: f, p: p, q: make(chan chunkJob, chunkQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// put queues a chunk, waiting while the queue is full; the chunk is
// dropped once the writer is closed or the node is closing.
func (w *chunkWriter) put(j chunkJob) {
	select {
	case w.q <- j:
	case <-w.stop:
	case <-w.at.ctx().Done():
	}
}

// close stops the writer and waits for it; chunks still queued are
// dropped (a fetch closes its writer once every chunk is written, or
// when it stops). Idempotent.
func (w *chunkWriter) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *chunkWriter) run() {
	defer close(w.done)
	for {
		select {
		case j := <-w.q:
			w.write(j)
		case <-w.stop:
			return
		}
	}
}

// write verifies and writes one chunk; one that does not match its hash
// is dropped and counted, its sender passed over, and asked for again.
func (w *chunkWriter) write(j chunkJob) {
	n := w.at.n
	w.at.wrote.Store(time.Now().UnixNano())
	err := w.p.WriteChunk(int(j.index), j.data)
	// WriteChunk has hashed and written the data and keeps no reference
	// to it: the frame's buffer goes back for the link to read into.
	transport.RecycleChunkFrame(j.frame)
	if errors.Is(err, blobs.ErrBadChunk) {
		n.metrics.inc(cBlobBadChunk)
		n.logRL.warn(n.log, "attachment chunk does not match its hash; dropped", j.from.Fingerprint(), "blob.bad_chunk",
			"peer", j.from.Fingerprint(), "sha256", w.p.Attachment().SHA256, "index", j.index, "err", err)
		w.f.passOver(j.from)
	} else if err != nil {
		n.logRL.warn(n.log, "attachment chunk not written", w.p.Attachment().SHA256.String(), "blob.write",
			"sha256", w.p.Attachment().SHA256, "err", err)
	}
	w.f.signal()
}

// fetchLimiter returns the limiter of attachment_fetch_rate_mib, bytes a
// second of chunks asked for over all fetches; nil for no limit. Its
// burst is one want's worth.
func fetchLimiter(bytesPerSec int64) *rate.Limiter {
	if bytesPerSec <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(bytesPerSec), wantChunks*proto.ChunkSize)
}

// A fetch gives way to the other traffic of its link: while the last four
// frames other than the transfer's went over the link within busyWindow
// (envelopes, acks), the node asks for at most busyFetchRate bytes a
// second of chunks over all fetches; otherwise only
// attachment_fetch_rate_mib bounds it. One or two frames are not traffic
// to give way to: with the last one alone, the DM that started a transfer
// and its ack held the transfer's first 4 MiB back by 200 ms.
// On a machine whose CPU the transfer would take, the envelopes then
// wait less behind it (docs/BENCHMARKS.md); the transfer never stops.
const (
	busyWindow    = 200 * time.Millisecond
	busyFetchRate = 16 << 20
)

// waitFetchRate waits until the fetch rates allow asking the peer of
// link c for that many chunks; an error means the node is closing.
func (at *attachments) waitFetchRate(c *transport.Link, chunks int) error {
	if chunks == 0 {
		return nil
	}
	if at.fetchLim != nil {
		if err := at.fetchLim.WaitN(at.ctx(), chunks*proto.ChunkSize); err != nil {
			return err
		}
	}
	if at.busyLim != nil && c.OthersWithin(busyWindow) {
		return at.busyLim.WaitN(at.ctx(), chunks*proto.ChunkSize)
	}
	return nil
}

// grantChunks gives link c a receive credit for the chunks a want asks
// for (PROTOCOL.md §13.5): they pass the link's receive limit unpaced.
func grantChunks(c *transport.Link, chunks int) {
	c.GrantRecv(chunks * chunkGrant)
}

// chunkGrant is the receive credit one asked-for chunk takes on the
// wire: its data, its frame's encoding, and the record framing of the
// five records a chunk's frame takes (2 + 1 + 16 bytes each).
const chunkGrant = proto.ChunkSize + 128 + 5*19

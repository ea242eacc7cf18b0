package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/node/blobs"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Attachments (PROTOCOL.md §6.8, §13.5): the blob store, the fetches
// under way, and the serving of blobs to members that may read them.
type attachments struct {
	n       *Node
	store   *blobs.Store
	wantDir string // one file per (blob, envelope) still to fetch

	mu      sync.Mutex
	fetches map[proto.Hash]*fetch // guarded by mu: under way or waiting
	waiting []*fetch              // guarded by mu: not started, oldest first
	running int                   // guarded by mu
	closed  bool                  // guarded by mu

	refMu    sync.Mutex                  // serialises the refs files' read-modify-write
	usage    map[proto.PubKey]uint64     // guarded by refMu: bytes each sender's kept envelopes list
	linkUp   chan struct{}               // capacity 1: a link came up; idle fetches look again
	serveSem chan struct{}               // bounds the links whose chunk wants are served at once
	serving  map[*peers.Link]*serveQueue // guarded by mu: the links being served
	refusals atomic.Uint64               // chunk wants answered "not yet" for want of a slot
	listSem  chan struct{}               // bounds the chunk list wants served at once
	fetchLim *rate.Limiter               // attachment_fetch_rate_mib; nil without a limit
	busyLim  *rate.Limiter               // the fetch rate while envelopes move (busyFetchRate)
	wrote    atomic.Int64                // when a chunk was last written (Unix ns); see bulk
	wg       sync.WaitGroup
}

// bulkWindow is how long after a chunk is written the node counts an
// attachment as being written (attachments.bulk).
const bulkWindow = time.Second

// bulk reports whether a fetch wrote a chunk within bulkWindow: the
// mailbox's checkpoint waits meanwhile (mailbox.LoopConfig.Bulk), since
// its syncfs would write the part file back under the chunk writer.
func (a *attachments) bulk() bool {
	t := a.wrote.Load()
	return t != 0 && time.Since(time.Unix(0, t)) < bulkWindow
}

// The attachment counters.
var (
	famBlob = newFamily("meshd_attachment_events_total", "Attachment transfer events, by event.", "event")

	cBlobFetched     = newCounter("blob.fetched", famBlob, "fetched")
	cBlobServed      = newCounter("blob.chunks_served", famBlob, "chunks_served")
	cBlobBadChunk    = newCounter("blob.bad_chunk", famBlob, "bad_chunk")
	cBlobCorrupt     = newCounter("blob.corrupt", famBlob, "corrupt")
	cBlobMalformed   = newCounter("blob.malformed", famBlob, "malformed")
	cBlobRefused     = newCounter("blob.refused", famBlob, "refused")
	cBlobUnavailable = newCounter("blob.unavailable", famBlob, "unavailable")
	cBlobServeBusy   = newCounter("blob.serve_busy", famBlob, "serve_busy")
	cBlobUnwanted    = newCounter("blob.unwanted", famBlob, "unwanted")
	cBlobTooLarge    = newCounter("blob.too_large", famBlob, "too_large")
	cBlobPartServed  = newCounter("blob.part_chunks_served", famBlob, "part_chunks_served")
	cBlobNotYetSent  = newCounter("blob.not_yet_sent", famBlob, "not_yet_sent")
	cBlobNotYet      = newCounter("blob.not_yet", famBlob, "not_yet")
)

// blobServeConcurrency bounds the links whose wants of chunks this node
// serves at once; a want beyond it is answered "not yet" for each chunk
// (blob.serve_busy) and its asker asks again (attach_serve.go has how the
// wants of one link queue behind each other). Wants of a chunk list
// (at most 128 KiB each) have slots of their own, so that a busy node
// still lets its askers start, and spread their wants over other holders;
// one beyond those is dropped.
const (
	blobServeConcurrency = 4
	blobListConcurrency  = 8
)

func (n *Node) openAttachments() error {
	st, err := blobs.Open(n.home.BlobsDir(), uint64(n.cfg.AttachmentMax))
	if err != nil {
		return err
	}
	want := filepath.Join(n.home.BlobsDir(), "want")
	if err := os.MkdirAll(want, 0o700); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	n.attach = &attachments{n: n, store: st, wantDir: want, fetches: map[proto.Hash]*fetch{},
		linkUp: make(chan struct{}, 1), serveSem: make(chan struct{}, blobServeConcurrency),
		serving:  map[*peers.Link]*serveQueue{},
		listSem:  make(chan struct{}, blobListConcurrency),
		fetchLim: fetchLimiter(n.cfg.AttachmentFetchRate), busyLim: fetchLimiter(busyFetchRate)}
	return nil
}

// start resumes the fetches a restart interrupted.
func (at *attachments) start() {
	ents, err := os.ReadDir(at.wantDir)
	if err != nil {
		at.n.log.Warn("attachments: cannot list fetches to resume", "err", err)
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		w, err := readWant(filepath.Join(at.wantDir, e.Name()))
		if err != nil {
			at.n.log.Warn("attachments: dropping an unreadable fetch record", "file", e.Name(), "err", err)
			_ = os.Remove(filepath.Join(at.wantDir, e.Name()))
			continue
		}
		at.schedule(w)
	}
}

// close stops every fetch and waits for the goroutines; idempotent.
func (at *attachments) close() {
	if at == nil {
		return
	}
	at.mu.Lock()
	at.closed = true
	at.mu.Unlock()
	at.wg.Wait()
}

// onLinkUp wakes fetches waiting for a source.
func (at *attachments) onLinkUp() {
	if at == nil {
		return
	}
	select {
	case at.linkUp <- struct{}{}:
	default:
	}
}

// want is one attachment of one envelope to fetch: persisted until the
// blob is stored and placed beside the envelope's mailbox file.
type want struct {
	From      proto.PubKey     `cbor:"0,keyasint"`
	ID        uuid.UUID        `cbor:"1,keyasint"`
	Delivered int64            `cbor:"2,keyasint"` // Unix ms: names the mailbox folder
	A         proto.Attachment `cbor:"3,keyasint"`
}

func (w want) file() string {
	return fmt.Sprintf("%s-%s-%s", w.A.SHA256, w.ID, w.From.Fingerprint())
}

func readWant(path string) (want, error) {
	var w want
	b, err := os.ReadFile(path)
	if err != nil {
		return w, err
	}
	if err := proto.Unmarshal(b, &w); err != nil {
		return w, err
	}
	return w, nil
}

func (at *attachments) saveWant(w want) error {
	b, err := proto.Marshal(&w)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(filepath.Join(at.wantDir, w.file()), b, 0o600)
}

func (at *attachments) dropWant(w want) {
	if err := os.Remove(filepath.Join(at.wantDir, w.file())); err != nil && !errors.Is(err, os.ErrNotExist) {
		at.n.log.Warn("attachments: cannot remove a finished fetch record", "err", err)
	}
}

// ctx is the node's context.
func (at *attachments) ctx() context.Context { return at.n.life.ctx }

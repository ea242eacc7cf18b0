package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/meshd/meshd/internal/fsutil"
)

// Errors callers decide on. Match them with errors.Is.
var (
	// ErrNotFound: no envelope, inbox entry or record with that id.
	ErrNotFound = errors.New("not found")
	// ErrQuota: the write would grow the file past Config.MaxBytes.
	ErrQuota = errors.New("quota exceeded")
	// ErrQueueFull: the peer's store-and-forward queue holds
	// Config.MaxQueuePerPeer envelopes already.
	ErrQueueFull = errors.New("store-and-forward queue full")
	// ErrLocked: another process holds the store open.
	ErrLocked = errors.New("locked by another process")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("history store closed")
	// ErrCorrupt: the file or a record in it cannot be read. A caller
	// may move the file aside and start afresh (with a new send epoch).
	ErrCorrupt = errors.New("history store corrupt")
	// ErrNewerFormat: the file was written by a newer build, in a format
	// this one does not read. It is not damaged; an error wrapping it also
	// wraps [ErrCorrupt], since this build cannot use it either.
	ErrNewerFormat = errors.New("history store from a newer format")
)

// Store is the node's durable store. All writes go through one writer
// goroutine that group-commits them; reads run concurrently in short
// read transactions. A Store is safe for concurrent use.
type Store struct {
	path string
	cfg  Config
	log  *slog.Logger
	db   *bolt.DB
	seen *seenCache

	reqs chan *request
	quit chan struct{} // closed by Close to stop the writer
	wg   sync.WaitGroup

	closeMu   sync.RWMutex // guards closed; held for reading while a request is handed to the writer
	closed    bool
	closeOnce sync.Once
	closeErr  error

	st storeCounters

	// failHook, when set, is told of envelopes of ours that expired or
	// were refused unacknowledged, after the change is durable.
	failHook atomic.Pointer[func([]DeliveryRecord)]
}

// OnDeliveryFailed sets fn to be called, after the commit, with the
// delivery records of our queued envelopes that expired or were refused.
func (s *Store) OnDeliveryFailed(fn func([]DeliveryRecord)) { s.failHook.Store(&fn) }

// deliveryFailed calls the hook of [Store.OnDeliveryFailed].
func (s *Store) deliveryFailed(rs []DeliveryRecord) {
	if fn := s.failHook.Load(); fn != nil && len(rs) > 0 {
		(*fn)(rs)
	}
}

// storeCounters are running totals reported by [Store.Stats].
type storeCounters struct {
	commits      atomic.Uint64
	requests     atomic.Uint64
	batchedEnvs  atomic.Uint64 // envelopes in committed Put requests
	putCommits   atomic.Uint64 // commits holding at least one Put
	envelopes    atomic.Uint64
	duplicates   atomic.Uint64
	failedTx     atomic.Uint64
	emptyTx      atomic.Uint64 // batches that changed nothing, rolled back
	queueExpired atomic.Uint64
	pruned       atomic.Uint64
	seenPruned   atomic.Uint64
	cacheHits    atomic.Uint64
	cacheMisses  atomic.Uint64
	histSkipped  atomic.Uint64
	overBudget   atomic.Uint64
}

// request is one caller's write. apply runs inside the batch transaction
// and may run more than once (a failed batch is retried in halves), so it
// must set its outputs afresh each time. It returns the caller's result
// and, separately, a fatal error that aborts the whole transaction.
// onCommit runs in the writer after the transaction is durable.
type request struct {
	apply    func(w *wtx) (result, fatal error)
	onCommit func()
	envs     int // envelopes the request puts, for Stats
	result   error
	done     chan error
}

// Open opens or creates the store at path (mode 0600). A second opener,
// in this process or another, fails after Config.LockTimeout with an
// error wrapping [ErrLocked].
//
// A file that fails [CheckFile] is not opened: the error is a
// [*DamageError] (matching [ErrCorrupt], or [ErrNewerFormat]). A new
// store is made under a temporary name and renamed into place once its
// header is on disk, so a store file shorter than its header, an empty
// one included, is always damage, never a store that was being created.
func Open(path string, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)
	if created {
		if err := createFile(path, cfg); err != nil {
			return nil, err
		}
	}
	if err := checkLocked(path, cfg.LockTimeout); err != nil {
		return nil, err
	}
	db, err := openBolt(path, boltOptions(cfg))
	if err == nil {
		// A store of an older schema is upgraded in place, then opened
		// again (see migrate.go).
		var v uint64
		if v, err = schemaOf(db); err == nil && v != 0 && v < schemaVersion {
			db.Close()
			if err := upgradeFile(path, v, cfg); err != nil {
				return nil, err
			}
			db, err = openBolt(path, boltOptions(cfg))
		} else if err != nil {
			db.Close()
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, fmt.Errorf("history store %s is %w (gave up after %v)", path, ErrLocked, cfg.LockTimeout)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
			errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
			return nil, fmt.Errorf("%w: open %s: %w", ErrCorrupt, path, err)
		}
		return nil, fmt.Errorf("open history store %s: %w", path, err)
	}
	s := &Store{
		path: path,
		cfg:  cfg,
		log:  cfg.Logger,
		db:   db,
		seen: newSeenCache(cfg.SeenCacheSize),
		reqs: make(chan *request, cfg.MaxBatch),
		quit: make(chan struct{}),
	}
	if created {
		// Make the new file's directory entry durable too.
		if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
			db.Close()
			return nil, fmt.Errorf("open history store %s: %w", path, err)
		}
	}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.writer()
	return s, nil
}

func boltOptions(cfg Config) *bolt.Options {
	return &bolt.Options{
		Timeout:        cfg.LockTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		MaxSize:        int(cfg.MaxBytes),
	}
}

// init creates the buckets, checks the schema version and warms the seen
// cache with the most recent entries.
func (s *Store) init() error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		v := meta.Get(metaSchema)
		if v == nil {
			return meta.Put(metaSchema, u64(schemaVersion))
		}
		if got := getU64(v); got > schemaVersion {
			return &DamageError{Path: s.path, Newer: true,
				Reason: fmt.Sprintf("its schema is version %d; this build reads version %d", got, schemaVersion)}
		} else if got != schemaVersion {
			return fmt.Errorf("%w: schema version %d, this build reads %d", ErrCorrupt, got, schemaVersion)
		}
		return nil
	})
	var de *DamageError
	if errors.As(err, &de) {
		return err
	}
	if err != nil {
		return fmt.Errorf("open history store %s: %w", s.path, s.txError(err))
	}
	var keys [][seenKLen]byte
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSeenAge).Cursor()
		for k, _ := c.Last(); k != nil && len(keys) < s.cfg.SeenCacheSize; k, _ = c.Prev() {
			if len(k) != tsLen+seenKLen {
				return fmt.Errorf("%w: seen-age key of %d bytes", ErrCorrupt, len(k))
			}
			keys = append(keys, [seenKLen]byte(k[tsLen:]))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("open history store %s: %w", s.path, err)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		s.seen.add(keys[i])
	}
	return nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close drains pending writes, stops the writer and closes the database.
// It is idempotent; later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		s.closeMu.Unlock()
		close(s.quit)
		s.wg.Wait()
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close history store %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// submit hands r to the writer and waits until its batch is durable.
func (s *Store) submit(r *request) error {
	r.done = make(chan error, 1)
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	s.reqs <- r
	s.closeMu.RUnlock()
	return <-r.done
}

// write runs apply as one request and returns its result.
func (s *Store) write(apply func(w *wtx) (result, fatal error), onCommit func()) error {
	return s.submit(&request{apply: apply, onCommit: onCommit})
}

// writer is the single goroutine that commits every write. It takes
// what is queued, waits up to CommitWindow for more when writers are
// concurrent, and commits the batch in one transaction.
func (s *Store) writer() {
	defer s.wg.Done()
	batch := make([]*request, 0, s.cfg.MaxBatch)
	last := 0
	for {
		var r *request
		select {
		case r = <-s.reqs:
		case <-s.quit:
			s.drain(batch[:0])
			return
		}
		batch = append(batch[:0], r)
		batch = s.take(batch)
		if s.cfg.CommitWindow > 0 && len(batch) < s.cfg.MaxBatch && (len(batch) > 1 || last > 1) {
			batch = s.collect(batch)
		}
		s.commit(batch)
		last = len(batch)
		clear(batch) // drop references for the garbage collector
	}
}

// take appends what is queued without waiting.
func (s *Store) take(batch []*request) []*request {
	for len(batch) < s.cfg.MaxBatch {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// collect appends requests arriving within CommitWindow. It stops early
// once no request has arrived for an eighth of the window: when every
// writer is already in the batch (each waits for its own result), more
// waiting only adds latency.
func (s *Store) collect(batch []*request) []*request {
	idleFor := max(s.cfg.CommitWindow/8, 50*time.Microsecond)
	deadline := time.NewTimer(s.cfg.CommitWindow)
	defer deadline.Stop()
	idle := time.NewTimer(idleFor)
	defer idle.Stop()
	for len(batch) < s.cfg.MaxBatch {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			idle.Reset(idleFor)
		case <-idle.C:
			return batch
		case <-deadline.C:
			return batch
		case <-s.quit:
			return batch
		}
	}
	return batch
}

// drain commits everything still queued at Close. No request can be
// added any more: Close set closed before it closed quit.
func (s *Store) drain(batch []*request) {
	for {
		batch = s.take(batch[:0])
		if len(batch) == 0 {
			return
		}
		s.commit(batch)
	}
}

// commit applies batch in one transaction. If the transaction fails, the
// batch is retried in halves, so one failing request (a quota overrun,
// say) fails alone and the rest still commit.
func (s *Store) commit(batch []*request) {
	now := s.cfg.Now()
	err := s.db.Update(func(tx *bolt.Tx) error {
		w := newWtx(s, tx, now)
		for _, r := range batch {
			res, fatal := r.apply(w)
			if fatal != nil {
				return fatal
			}
			r.result = res
		}
		if st := tx.Stats(); st.GetNodeCount() == 0 {
			// Nothing was put or deleted (bbolt materializes a node for
			// every change): roll back rather than write and sync the
			// meta and freelist pages for nothing. Retention's passes
			// on an idle node are such batches, once a minute.
			return errNothingWritten
		}
		return nil
	})
	if errors.Is(err, errNothingWritten) {
		s.st.emptyTx.Add(1)
		for _, r := range batch {
			if r.onCommit != nil {
				r.onCommit()
			}
			r.done <- r.result
		}
		return
	}
	if err != nil {
		s.st.failedTx.Add(1)
		if len(batch) == 1 {
			batch[0].done <- s.txError(err)
			return
		}
		mid := len(batch) / 2
		s.commit(batch[:mid])
		s.commit(batch[mid:])
		return
	}
	s.st.commits.Add(1)
	s.st.requests.Add(uint64(len(batch)))
	envs := 0
	for _, r := range batch {
		envs += r.envs
	}
	if envs > 0 {
		s.st.batchedEnvs.Add(uint64(envs))
		s.st.putCommits.Add(1)
	}
	for _, r := range batch {
		if r.onCommit != nil {
			r.onCommit()
		}
		r.done <- r.result
	}
}

// errNothingWritten rolls back a write transaction that changed nothing.
var errNothingWritten = errors.New("history: nothing written")

// txError turns a bbolt error into one of ours.
func (s *Store) txError(err error) error {
	switch {
	case errors.Is(err, berrors.ErrMaxSizeReached):
		return fmt.Errorf("history store %s: %w: the write would grow the file past its limit of %d bytes; prune it or raise the limit", s.path, ErrQuota, s.cfg.MaxBytes)
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return ErrClosed
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrClosed):
		return err
	}
	return fmt.Errorf("history store %s: %w", s.path, err)
}

// view runs fn in a read transaction. fn must not block on anything but
// the database: a long read transaction keeps the writer from reusing
// pages and from remapping a growing file.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	if err := s.db.View(fn); err != nil {
		return s.txError(err)
	}
	return nil
}

// wtx is the writer's view of one batch transaction.
type wtx struct {
	s   *Store
	tx  *bolt.Tx
	now time.Time

	// open holds the buckets this transaction has used, by wtxBucket
	// index: each is opened on first use, since opening one costs a
	// cursor search and some 25 allocations, and a commit of received
	// envelopes uses fewer than half of them.
	open [numWtxBuckets]*bolt.Bucket

	// key is scratch space for one key at a time: bbolt copies the key of
	// a Put and keeps no reference to the key of a Get, Seek or Delete.
	key []byte
	// vals is the unused tail of the chunk that value carves from, and
	// chunk that chunk's size.
	vals  []byte
	chunk int
	// gone collects the inbox items a prune step removes, for
	// Config.InboxPruned once the step is committed.
	gone []PrunedItem
}

// Chunks that back small values start at minValueChunk bytes (a commit
// of one envelope needs about 100) and double up to maxValueChunk.
const (
	minValueChunk = 256
	maxValueChunk = 4096
)

// value returns n zero bytes (n at most minValueChunk: a counter, a mark
// or an inbox record) for a value to Put in this transaction. bbolt keeps
// a reference to a value until the transaction ends, so a value is never
// reused; they share chunks, so a batch of envelopes does not cost an
// allocation per value.
func (w *wtx) value(n int) []byte {
	if len(w.vals) < n {
		w.chunk = min(max(2*w.chunk, minValueChunk), maxValueChunk)
		w.vals = make([]byte, w.chunk)
	}
	v := w.vals[:n:n]
	w.vals = w.vals[n:]
	return v
}

func newWtx(s *Store, tx *bolt.Tx, now time.Time) *wtx {
	return &wtx{s: s, tx: tx, now: now}
}

// wtxBuckets are the buckets a write transaction reaches through wtx,
// and whether each is append-mostly.
//
// Keys in the append-mostly buckets grow with time (UUIDv7 ids,
// timestamps first, or per-sender and per-peer sequences), so inserts
// land at or near the right edge. bbolt splits a full page at
// FillPercent, 0.5 by default: pages left behind an append stay half
// empty for good. Filling them to appendFill halves the pages of the
// index buckets, and so the file, the mapped memory and the pages a
// commit rewrites.
var wtxBuckets = [numWtxBuckets]struct {
	name   []byte
	append bool
}{
	bMeta: {bucketMeta, false}, bEnv: {bucketEnv, true}, bChanIdx: {bucketChanIdx, true},
	bDirIdx: {bucketDirIdx, true}, bCounts: {bucketCounts, false}, bSeen: {bucketSeen, true},
	bSeenAge: {bucketSeenAge, true}, bMarks: {bucketMarks, false}, bRuns: {bucketRuns, false},
	bQueue: {bucketQueue, true}, bQueueID: {bucketQueueID, true}, bQCount: {bucketQCount, false},
	bInbox: {bucketInbox, true}, bInboxT: {bucketInboxT, true}, bSenders: {bucketSenders, false},
	bDelivery: {bucketDelivery, true}, bDeliveryT: {bucketDeliveryT, true},
	bDeliveryA: {bucketDeliveryA, true}, bReqOut: {bucketReqOut, false},
}

// Indexes into wtxBuckets.
const (
	bMeta = iota
	bEnv
	bChanIdx
	bDirIdx
	bCounts
	bSeen
	bSeenAge
	bMarks
	bRuns
	bQueue
	bQueueID
	bQCount
	bInbox
	bInboxT
	bSenders
	bDelivery
	bDeliveryT
	bDeliveryA
	bReqOut
	numWtxBuckets
)

// bucket returns bucket i of wtxBuckets, opening it on first use.
func (w *wtx) bucket(i int) *bolt.Bucket {
	if b := w.open[i]; b != nil {
		return b
	}
	b := w.tx.Bucket(wtxBuckets[i].name)
	if b != nil && wtxBuckets[i].append {
		b.FillPercent = appendFill
	}
	w.open[i] = b
	return b
}

func (w *wtx) meta() *bolt.Bucket      { return w.bucket(bMeta) }
func (w *wtx) env() *bolt.Bucket       { return w.bucket(bEnv) }
func (w *wtx) chanIdx() *bolt.Bucket   { return w.bucket(bChanIdx) }
func (w *wtx) dirIdx() *bolt.Bucket    { return w.bucket(bDirIdx) }
func (w *wtx) counts() *bolt.Bucket    { return w.bucket(bCounts) }
func (w *wtx) seen() *bolt.Bucket      { return w.bucket(bSeen) }
func (w *wtx) seenAge() *bolt.Bucket   { return w.bucket(bSeenAge) }
func (w *wtx) marks() *bolt.Bucket     { return w.bucket(bMarks) }
func (w *wtx) runs() *bolt.Bucket      { return w.bucket(bRuns) }
func (w *wtx) queue() *bolt.Bucket     { return w.bucket(bQueue) }
func (w *wtx) queueID() *bolt.Bucket   { return w.bucket(bQueueID) }
func (w *wtx) qcount() *bolt.Bucket    { return w.bucket(bQCount) }
func (w *wtx) inbox() *bolt.Bucket     { return w.bucket(bInbox) }
func (w *wtx) inboxT() *bolt.Bucket    { return w.bucket(bInboxT) }
func (w *wtx) senders() *bolt.Bucket   { return w.bucket(bSenders) }
func (w *wtx) delivery() *bolt.Bucket  { return w.bucket(bDelivery) }
func (w *wtx) deliveryT() *bolt.Bucket { return w.bucket(bDeliveryT) }
func (w *wtx) deliveryA() *bolt.Bucket { return w.bucket(bDeliveryA) }
func (w *wtx) reqOut() *bolt.Bucket    { return w.bucket(bReqOut) }

// appendFill is the FillPercent of the append-mostly buckets.
const appendFill = 0.9

// addCount adds delta to the counter under key in b, deleting it at zero.
func (w *wtx) addCount(b *bolt.Bucket, key []byte, delta int64) error {
	n := int64(getU64(b.Get(key))) + delta
	if n <= 0 {
		return b.Delete(key)
	}
	v := w.value(8)
	binary.BigEndian.PutUint64(v, uint64(n))
	return b.Put(key, v)
}

func syncDirOf(path string) error { return fsutil.SyncDir(filepath.Dir(path)) }

package claims

import (
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// maxClaims bounds the claims held at once.
const maxClaims = 100000

// Key names an inbox item: its sender and its id (senders may share ids).
type Key struct {
	From proto.PubKey
	ID   uuid.UUID
}

type claim struct {
	worker string
	until  time.Time
	// request is the request id of a claimed Request, so a response
	// releases it.
	request uuid.UUID
}

// Leases holds the live claims on the inbox items. Create it with [New].
type Leases struct {
	host  Host
	store *history.Store
	cfg   Config
	log   *slog.Logger
	done  <-chan struct{} // closed when the node shuts down: waits end

	mu sync.Mutex
	m  map[Key]claim // guarded by mu
	// freed is closed when a claim is released, so claim waiters look
	// again; guarded by mu.
	freed chan struct{}
}

// New returns an empty set of claims on the inbox of store; waits for
// items end when done is closed.
func New(host Host, store *history.Store, cfg Config, log *slog.Logger, done <-chan struct{}) *Leases {
	return &Leases{host: host, store: store, cfg: cfg, log: log, done: done,
		m: map[Key]claim{}, freed: make(chan struct{})}
}

// Of returns the live claim on k, or nil.
func (b *Leases) Of(k Key, now time.Time) *api.ItemClaim {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.m[k]
	if !ok || !c.until.After(now) {
		return nil
	}
	return &api.ItemClaim{Worker: c.worker, Until: c.until.UTC()}
}

// heldLocked reports whether another worker than worker holds k now.
func (b *Leases) heldLocked(k Key, worker string, now time.Time) (claim, bool) {
	c, ok := b.m[k]
	if !ok {
		return claim{}, false
	}
	if !c.until.After(now) {
		delete(b.m, k)
		return claim{}, false
	}
	return c, worker == "" || c.worker != worker
}

func (b *Leases) releaseLocked(k Key) bool {
	if _, ok := b.m[k]; !ok {
		return false
	}
	delete(b.m, k)
	close(b.freed)
	b.freed = make(chan struct{})
	return true
}

// ReleaseRead ends the claim on an item that was read.
func (b *Leases) ReleaseRead(k Key) {
	b.mu.Lock()
	released := b.releaseLocked(k)
	b.mu.Unlock()
	if released {
		b.host.Count(Released, 1)
	}
}

// Answered ends the claim on the Request requestID from from, when a
// response to it is sent, and marks the request read: the worker that
// held it handled it.
func (b *Leases) Answered(from proto.PubKey, requestID uuid.UUID) {
	k, ok := b.releaseRequest(from, requestID)
	if !ok {
		return
	}
	b.host.Count(Released, 1)
	if err := b.store.MarkRead(k.From, k.ID); err != nil {
		b.log.Warn("mark an answered request read", "id", k.ID, "err", err)
		return
	}
	b.host.Read(k.From, k.ID)
}

// releaseRequest drops the claim on the Request requestID from from, and
// returns its item.
func (b *Leases) releaseRequest(from proto.PubKey, requestID uuid.UUID) (Key, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, c := range b.m {
		if k.From.Equal(from) && c.request == requestID && c.request != uuid.Nil {
			b.releaseLocked(k)
			return k, true
		}
	}
	return Key{}, false
}

// waitState returns a channel closed at the next release, and the end of
// the earliest lease that still runs (zero if none). It drops the claims
// whose lease ended, so that a waiter never wakes for one again.
func (b *Leases) waitState() (<-chan struct{}, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var first time.Time
	for k, c := range b.m {
		if !c.until.After(now) {
			delete(b.m, k)
			continue
		}
		if first.IsZero() || c.until.Before(first) {
			first = c.until
		}
	}
	return b.freed, first
}

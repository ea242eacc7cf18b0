package node

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famClaims = newFamily("meshd_inbox_claims_total", "Inbox claims by workers of a pool, by result.", "result")

	cClaimReleased = newCounter("claim.released", famClaims, "released")
	cClaimConflict = newCounter("claim.conflict", famClaims, "conflict")
	cClaimTaken    = newCounter("claim.taken", famClaims, "taken")
)

// Claims let several workers behind one node (a pool of agents sharing
// its identity) share its inbox: a worker claims an unread item for a
// lease, and no other worker can claim it until the lease ends or the
// item is read (meshctl read, or meshctl respond for a request). Every
// claim is taken under one lock, which also covers the read-state check,
// so two workers never hold one item. Claims live in memory only: a
// restart of meshd returns every claimed item to the pool, which is what
// an expired lease does too.

// maxClaims bounds the claims held at once.
const maxClaims = 100000

type claim struct {
	worker string
	until  time.Time
	// request is the request id of a claimed Request, so a response
	// releases it.
	request uuid.UUID
}

// claimBook holds the live claims.
type claimBook struct {
	mu sync.Mutex
	m  map[envKey]claim // guarded by mu
	// freed is closed when a claim is released, so claim waiters look
	// again; guarded by mu.
	freed chan struct{}
}

func newClaimBook() *claimBook {
	return &claimBook{m: map[envKey]claim{}, freed: make(chan struct{})}
}

// of returns the live claim on k, or nil.
func (b *claimBook) of(k envKey, now time.Time) *api.ItemClaim {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.m[k]
	if !ok || !c.until.After(now) {
		return nil
	}
	return &api.ItemClaim{Worker: c.worker, Until: c.until.UTC()}
}

// heldLocked reports whether another worker than worker holds k now.
func (b *claimBook) heldLocked(k envKey, worker string, now time.Time) (claim, bool) {
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

// release drops the claim on k, if any, and wakes claim waiters.
func (b *claimBook) release(k envKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.releaseLocked(k)
}

func (b *claimBook) releaseLocked(k envKey) bool {
	if _, ok := b.m[k]; !ok {
		return false
	}
	delete(b.m, k)
	close(b.freed)
	b.freed = make(chan struct{})
	return true
}

// releaseRequest drops the claim on the Request requestID from from, and
// returns its item.
func (b *claimBook) releaseRequest(from proto.PubKey, requestID uuid.UUID) (envKey, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, c := range b.m {
		if k.from.Equal(from) && c.request == requestID && c.request != uuid.Nil {
			b.releaseLocked(k)
			return k, true
		}
	}
	return envKey{}, false
}

// waitState returns a channel closed at the next release, and the end of
// the earliest lease that still runs (zero if none). It drops the claims
// whose lease ended, so that a waiter never wakes for one again.
func (b *claimBook) waitState() (<-chan struct{}, time.Time) {
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

// maxWorkerName bounds a worker's name, which every claim keeps.
const maxWorkerName = 64

// checkWorker refuses a worker name that is too long or holds control
// characters.
func checkWorker(w string) error {
	if len(w) > maxWorkerName || strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return badRequest("worker %q: want at most %d bytes of printable text", w, maxWorkerName)
	}
	return nil
}

// parseLease reads a lease duration: empty is the default.
func parseLease(s string) (time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return api.DefaultLease, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > api.MaxLease {
		return 0, badRequest("lease %q: want a duration from 1s to %v, such as 5m", s, api.MaxLease)
	}
	return d, nil
}

// ClaimItem claims the unread inbox item id for in.Worker, renews the
// worker's own claim, or with in.Release gives it up. An item that is
// read, or that another worker holds, is refused with 409.
func (n *Node) ClaimItem(id uuid.UUID, from string, in api.Claim) (api.Item, error) {
	lease, err := parseLease(in.Lease)
	if err != nil {
		return api.Item{}, err
	}
	if err := checkWorker(in.Worker); err != nil {
		return api.Item{}, err
	}
	it, err := n.inboxItem(id, from)
	if err != nil {
		return api.Item{}, err
	}
	k := envKey{it.From, it.ID}
	b := n.claims
	b.mu.Lock()
	now := time.Now()
	c, held := b.heldLocked(k, in.Worker, now)
	switch {
	case in.Release:
		_, exists := b.m[k]
		if exists && held {
			b.mu.Unlock()
			return api.Item{}, refuse(http.StatusConflict, "only the worker that claimed it may release it",
				"item %s is claimed by %s, not %s", id, workerText(c.worker), workerText(in.Worker))
		}
		if exists {
			b.releaseLocked(k)
			n.metrics.inc(cClaimReleased)
		}
		b.mu.Unlock()
		return n.renderItem(it)
	case held:
		b.mu.Unlock()
		n.metrics.inc(cClaimConflict)
		return api.Item{}, refuse(http.StatusConflict, "claim another item: meshctl inbox --claim 1",
			"item %s is claimed by %s until %s", id, workerText(c.worker), c.until.UTC().Format(time.RFC3339))
	}
	cur, err := n.store.InboxEntry(it.From, it.ID)
	if err != nil {
		b.mu.Unlock()
		return api.Item{}, err
	}
	if cur.Read {
		b.mu.Unlock()
		n.metrics.inc(cClaimConflict)
		return api.Item{}, refuse(http.StatusConflict, "list unread items with: meshctl inbox", "item %s is read already: it is handled", id)
	}
	if len(b.m) >= maxClaims && c.until.IsZero() {
		b.mu.Unlock()
		return api.Item{}, refuse(http.StatusServiceUnavailable, "read what you handled, or wait for leases to end",
			"%d items are claimed, the most meshd holds", maxClaims)
	}
	b.m[k] = claim{worker: in.Worker, until: now.Add(lease), request: n.requestIDOf(it)}
	b.mu.Unlock()
	n.metrics.inc(cClaimTaken)
	return n.renderItem(it)
}

func workerText(w string) string {
	if w == "" {
		return "an anonymous worker"
	}
	return fmt.Sprintf("worker %q", w)
}

// requestIDOf returns the request id of an inbox item that is a Request
// from another member, else uuid.Nil.
func (n *Node) requestIDOf(it history.InboxItem) uuid.UUID {
	if it.Kind != proto.KindRequest || it.From.Equal(n.id.Pub) {
		return uuid.Nil
	}
	st, err := n.store.Get(it.From, it.ID)
	if err != nil {
		return uuid.Nil
	}
	se, err := st.Envelope()
	if err != nil || se.Request == nil {
		return uuid.Nil
	}
	return se.Request.RequestID
}

// inboxItem finds inbox item id, of sender from when several share it;
// hint is the fix an ambiguous id gets.
func (n *Node) inboxItem(id uuid.UUID, from string) (history.InboxItem, error) {
	return n.inboxItemHint(id, from, "name the sender with --from PEER")
}

func (n *Node) inboxItemHint(id uuid.UUID, from, hint string) (history.InboxItem, error) {
	items, err := n.store.InboxByID(id)
	if err != nil {
		return history.InboxItem{}, err
	}
	if len(items) == 0 {
		return history.InboxItem{}, notFound("list items with: meshctl inbox --all", "no inbox item %s", id)
	}
	if strings.TrimPrefix(strings.TrimSpace(from), "@") != "" {
		m, err := n.resolvePeer(from)
		if err != nil {
			return history.InboxItem{}, err
		}
		kept := items[:0]
		for _, it := range items {
			if it.From.Equal(m.Key) {
				kept = append(kept, it)
			}
		}
		if len(kept) == 0 {
			return history.InboxItem{}, notFound("list items with: meshctl inbox --all", "no inbox item %s from %s", id, label(m))
		}
		items = kept
	}
	if len(items) > 1 {
		var s []string
		for _, it := range items {
			s = append(s, n.memberLabel(it.From))
		}
		n.metrics.inc(cReadRefusedAmbiguous)
		return history.InboxItem{}, refuse(http.StatusConflict, hint,
			"inbox item id %s is ambiguous: %d senders' items share it: %s", id, len(items), strings.Join(s, ", "))
	}
	return items[0], nil
}

// ClaimNext claims up to q.Count unread items that pass q's filter and no
// worker holds, oldest first. With q.Wait it blocks until it claims at
// least one, up to the timeout or until ctx ends.
func (n *Node) ClaimNext(ctx context.Context, q api.ClaimNext) (*api.Inbox, error) {
	if q.Count <= 0 || q.Count > api.MaxClaimCount {
		return nil, badRequest("count %d: want 1 to %d", q.Count, api.MaxClaimCount)
	}
	lease, err := parseLease(q.Lease)
	if err != nil {
		return nil, err
	}
	if err := checkWorker(q.Worker); err != nil {
		return nil, err
	}
	timeout := 30 * time.Second
	if q.Timeout != "" {
		if timeout, err = time.ParseDuration(q.Timeout); err != nil || timeout < 0 {
			return nil, badRequest("timeout %q: want a duration such as 30s", q.Timeout)
		}
		timeout = min(timeout, 10*time.Minute)
	}
	match, since, err := n.inboxMatch(q.InboxFilter)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		woke := n.inbox.wait()
		freed, first := n.claims.waitState()
		items, err := n.claimPass(q, lease, since, match)
		if err != nil {
			return nil, err
		}
		if len(items) > 0 || !q.Wait {
			out := n.renderItems(items)
			for i := range out.Items {
				out.Items[i].Claim = n.claims.of(envKey{items[i].From, items[i].ID}, time.Now())
			}
			return out, nil
		}
		if err := n.claimWait(ctx, woke, freed, first, deadline.C); err != nil {
			if err == errTimedOut {
				return &api.Inbox{Items: []api.Item{}, TimedOut: true}, nil
			}
			return nil, err
		}
	}
}

// claimPass reads the unread items page by page, oldest first, and claims
// those no worker holds, under the claim lock, until it has q.Count.
func (n *Node) claimPass(q api.ClaimNext, lease time.Duration, since time.Time, match func(*history.Meta) bool) ([]history.InboxItem, error) {
	b := n.claims
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []history.InboxItem
	sq := history.InboxPageQuery{UnreadOnly: true, FromStart: true, Limit: maxInboxAnswer, MaxBytes: maxInboxBytes, Since: since, Match: match}
	for len(out) < q.Count {
		p, err := n.store.InboxPage(sq)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			k := envKey{it.From, it.ID}
			if _, held := b.heldLocked(k, "", now); held {
				continue
			}
			if len(b.m) >= maxClaims {
				return out, nil
			}
			b.m[k] = claim{worker: q.Worker, until: now.Add(lease), request: n.requestIDOf(it)}
			out = append(out, it)
			if len(out) == q.Count {
				break
			}
		}
		if p.Next == nil {
			break
		}
		sq.After, sq.FromStart = p.Next, false
	}
	n.metrics.add(cClaimTaken, uint64(len(out)))
	return out, nil
}

// releaseRead ends the claim on an item that was read.
func (n *Node) releaseRead(k envKey) {
	if n.claims.release(k) {
		n.metrics.inc(cClaimReleased)
	}
}

// releaseAnswered ends the claim on the Request requestID from from, when
// a response to it is sent, and marks the request read: the worker that
// held it handled it.
func (n *Node) releaseAnswered(from proto.PubKey, requestID uuid.UUID) {
	k, ok := n.claims.releaseRequest(from, requestID)
	if !ok {
		return
	}
	n.metrics.inc(cClaimReleased)
	if err := n.store.MarkRead(k.from, k.id); err != nil {
		n.log.Warn("mark an answered request read", "id", k.id, "err", err)
		return
	}
	n.onRead(k)
}

var errTimedOut = fmt.Errorf("timed out")

// claimWait waits for a new waking item, a released claim, the end of the
// earliest lease (first), the deadline (errTimedOut) or the end of ctx.
func (n *Node) claimWait(ctx context.Context, woke, freed <-chan struct{}, first time.Time, deadline <-chan time.Time) error {
	var expiry <-chan time.Time
	if !first.IsZero() {
		t := time.NewTimer(time.Until(first) + time.Millisecond)
		defer t.Stop()
		expiry = t.C
	}
	select {
	case <-woke:
	case <-freed:
	case <-expiry:
	case <-deadline:
		return errTimedOut
	case <-ctx.Done():
		return ctx.Err()
	case <-n.ctx.Done():
		return fmt.Errorf("meshd is shutting down")
	}
	return nil
}

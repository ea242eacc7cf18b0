package claims

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// The methods the control API calls (node/control's AgentBackend).

// maxWorkerName bounds a worker's name, which every claim keeps.
const maxWorkerName = 64

// checkWorker refuses a worker name that is too long or holds control
// characters.
func checkWorker(w string) error {
	if len(w) > maxWorkerName || strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return apierr.BadRequest("worker %q: want at most %d bytes of printable text", w, maxWorkerName)
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
		return 0, apierr.BadRequest("lease %q: want a duration from 1s to %v, such as 5m", s, api.MaxLease)
	}
	return d, nil
}

// ClaimItem claims the unread inbox item id for in.Worker, renews the
// worker's own claim, or with in.Release gives it up. An item that is
// read, or that another worker holds, is refused with 409.
func (b *Leases) ClaimItem(id uuid.UUID, from string, in api.Claim) (api.Item, error) {
	lease, err := parseLease(in.Lease)
	if err != nil {
		return api.Item{}, err
	}
	if err := checkWorker(in.Worker); err != nil {
		return api.Item{}, err
	}
	it, err := b.host.Item(id, from)
	if err != nil {
		return api.Item{}, err
	}
	k := Key{it.From, it.ID}
	b.mu.Lock()
	now := time.Now()
	c, held := b.heldLocked(k, in.Worker, now)
	switch {
	case in.Release:
		_, exists := b.m[k]
		if exists && held {
			b.mu.Unlock()
			return api.Item{}, apierr.New(http.StatusConflict, "only the worker that claimed it may release it",
				"item %s is claimed by %s, not %s", id, workerText(c.worker), workerText(in.Worker))
		}
		if exists {
			b.releaseLocked(k)
			b.host.Count(Released, 1)
		}
		b.mu.Unlock()
		return b.host.Render(it)
	case held:
		b.mu.Unlock()
		b.host.Count(Conflict, 1)
		return api.Item{}, apierr.New(http.StatusConflict, "claim another item: meshctl inbox --claim 1",
			"item %s is claimed by %s until %s", id, workerText(c.worker), c.until.UTC().Format(time.RFC3339))
	}
	cur, err := b.store.InboxEntry(it.From, it.ID)
	if err != nil {
		b.mu.Unlock()
		return api.Item{}, err
	}
	if cur.Read {
		b.mu.Unlock()
		b.host.Count(Conflict, 1)
		return api.Item{}, apierr.New(http.StatusConflict, "list unread items with: meshctl inbox", "item %s is read already: it is handled", id)
	}
	if len(b.m) >= maxClaims && c.until.IsZero() {
		b.mu.Unlock()
		return api.Item{}, apierr.New(http.StatusServiceUnavailable, "read what you handled, or wait for leases to end",
			"%d items are claimed, the most meshd holds", maxClaims)
	}
	b.m[k] = claim{worker: in.Worker, until: now.Add(lease), request: b.requestIDOf(it)}
	b.mu.Unlock()
	b.host.Count(Taken, 1)
	return b.host.Render(it)
}

func workerText(w string) string {
	if w == "" {
		return "an anonymous worker"
	}
	return fmt.Sprintf("worker %q", w)
}

// requestIDOf returns the request id of an inbox item that is a Request
// from another member, else uuid.Nil.
func (b *Leases) requestIDOf(it history.InboxItem) uuid.UUID {
	if it.Kind != proto.KindRequest || it.From.Equal(b.host.Self()) {
		return uuid.Nil
	}
	st, err := b.store.Get(it.From, it.ID)
	if err != nil {
		return uuid.Nil
	}
	se, err := st.Envelope()
	if err != nil || se.Request == nil {
		return uuid.Nil
	}
	return se.Request.RequestID
}

// ClaimNext claims up to q.Count unread items that pass q's filter and no
// worker holds, oldest first. With q.Wait it blocks until it claims at
// least one, up to the timeout or until ctx ends.
func (b *Leases) ClaimNext(ctx context.Context, q api.ClaimNext) (*api.Inbox, error) {
	if q.Count <= 0 || q.Count > api.MaxClaimCount {
		return nil, apierr.BadRequest("count %d: want 1 to %d", q.Count, api.MaxClaimCount)
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
			return nil, apierr.BadRequest("timeout %q: want a duration such as 30s", q.Timeout)
		}
		timeout = min(timeout, 10*time.Minute)
	}
	match, since, err := b.host.Match(q.InboxFilter)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		woke := b.host.Woken()
		freed, first := b.waitState()
		items, err := b.pass(q, lease, since, match)
		if err != nil {
			return nil, err
		}
		if len(items) > 0 || !q.Wait {
			return b.render(items), nil
		}
		if err := b.wait(ctx, woke, freed, first, deadline.C); err != nil {
			if errors.Is(err, errTimedOut) {
				return &api.Inbox{Items: []api.Item{}, TimedOut: true}, nil
			}
			return nil, err
		}
	}
}

// render renders the items claimed (their claims included).
func (b *Leases) render(items []history.InboxItem) *api.Inbox {
	out := &api.Inbox{Items: []api.Item{}}
	for _, it := range items {
		x, err := b.host.Render(it)
		if err != nil {
			b.log.Warn("inbox item unreadable", "id", it.ID, "err", err)
			continue
		}
		out.Items = append(out.Items, x)
	}
	return out
}

// pass reads the unread items page by page, oldest first, and claims
// those no worker holds, under the claim lock, until it has q.Count.
func (b *Leases) pass(q api.ClaimNext, lease time.Duration, since time.Time, match func(*history.Meta) bool) ([]history.InboxItem, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []history.InboxItem
	sq := history.InboxPageQuery{UnreadOnly: true, FromStart: true, Limit: b.cfg.PageItems, MaxBytes: b.cfg.PageBytes, Since: since, Match: match}
	for len(out) < q.Count {
		p, err := b.store.InboxPage(sq)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			k := Key{it.From, it.ID}
			if _, held := b.heldLocked(k, "", now); held {
				continue
			}
			if len(b.m) >= maxClaims {
				return out, nil
			}
			b.m[k] = claim{worker: q.Worker, until: now.Add(lease), request: b.requestIDOf(it)}
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
	b.host.Count(Taken, uint64(len(out)))
	return out, nil
}

var errTimedOut = errors.New("timed out")

// wait waits for a new waking item, a released claim, the end of the
// earliest lease (first), the deadline (errTimedOut) or the end of ctx.
func (b *Leases) wait(ctx context.Context, woke, freed <-chan struct{}, first time.Time, deadline <-chan time.Time) error {
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
	case <-b.done:
		return fmt.Errorf("meshd is shutting down")
	}
	return nil
}

package rostergossip

import (
	"context"
	"errors"
	"time"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// rekeyState is what a key rotation needs: a wake-up for the loop that
// closes links by previous keys when their window ends, and whether this
// start switched to a new key.
type rekeyState struct {
	changed chan struct{} // a roster was applied: re-arm the timer
	// switched: the node adopted the pending key at start; the send
	// counters start a new epoch under it. prev is the key it replaced.
	switched bool
	prev     proto.PubKey
}

// AdoptPendingKey switches the identity id to the pending key made by
// `meshctl rekey` when r lists it as a member's key, and returns the
// identity to use. The node calls it at start, before anything uses the
// identity.
func (k *Keeper) AdoptPendingKey(id home.Identity, r *roster.Roster) (home.Identity, error) {
	next, err := k.home.LoadNextKey()
	if errors.Is(err, home.ErrNoNextKey) {
		return id, nil
	}
	if err != nil {
		return id, err
	}
	pub := proto.PubKeyOf(next)
	if m, ok := r.Member(pub); !ok || m.Key != pub {
		k.log.Info("a new key waits until the roster lists it; an admin runs `meshctl roster rekey` with it",
			"key", pub.String(), "fingerprint", pub.Fingerprint(), "file", k.home.NextKeyPath())
		return id, nil
	}
	nid, err := k.home.AdoptNextKey()
	if err != nil {
		return id, err
	}
	if nid.Name == "" {
		nid.Name = id.Name
	}
	k.rekey.switched, k.rekey.prev = true, id.Pub
	k.host.Count(KeySwitchedAtStart)
	k.log.Info("switched to the new key the roster lists", "key", nid.Pub.String(), "fingerprint", nid.Pub.Fingerprint(),
		"previous", id.Pub.Fingerprint(), "previous_file", k.home.PrevKeyPath())
	return nid, nil
}

// Switched reports whether this start switched to a new key.
func (k *Keeper) Switched() bool { return k.rekey.switched }

// rekeyed is called by Apply after cur was replaced by r: it wakes the
// retirement timer, tells the node of members moved to new keys, and
// tells the operator when r lists this node's pending key.
func (k *Keeper) rekeyed(cur, r *roster.Roster) {
	select {
	case k.rekey.changed <- struct{}{}:
	default:
	}
	for _, m := range r.Members {
		if m.PrevKey.IsZero() {
			continue
		}
		if _, was := cur.Member(m.Key); was {
			continue // an earlier update made this rotation
		}
		k.host.Count(MemberRekeyed)
		k.log.Info("member moved to a new key", "name", m.Name, "key", m.Key.Fingerprint(),
			"previous", m.PrevKey.Fingerprint(), "previous_until", time.UnixMilli(m.PrevUntil).UTC())
		k.host.MemberRekeyed(m)
	}
	next, err := k.home.LoadNextKey()
	if err != nil {
		return
	}
	pub := proto.PubKeyOf(next)
	if m, ok := r.Member(pub); ok && m.Key == pub {
		until := "now"
		if mine, ok := r.Previous(k.host.Self()); ok && mine.Key == pub {
			until = time.UnixMilli(mine.PrevUntil).UTC().Format(time.RFC3339)
		}
		k.host.Count(RestartNeeded)
		k.log.Warn("the roster lists this node's new key: restart meshd to switch to it; the current key is accepted until "+until,
			"key", pub.Fingerprint(), "version", r.Version)
	}
}

// Run closes the links and forgets the peers of previous keys when their
// grace window ends, by this machine's clock, until ctx ends. It first
// tells the node when this start switched keys.
func (k *Keeper) Run(ctx context.Context) {
	if k.rekey.switched {
		k.host.KeySwitched(k.rekey.prev)
	}
	for {
		var fire <-chan time.Time
		var t *time.Timer
		if d, ok := k.Current().NextPrevDeadline(time.Now()); ok {
			t = time.NewTimer(time.Until(d))
			fire = t.C
		}
		select {
		case <-ctx.Done():
		case <-k.rekey.changed:
		case <-fire:
			k.retireExpiredKeys()
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// retireExpiredKeys closes every link, and forgets every peer, whose key
// the roster no longer accepts as a member's previous key.
func (k *Keeper) retireExpiredKeys() {
	r := k.Current()
	for _, pl := range k.host.Retire(r) {
		k.host.Count(LinkRetiredKey)
		k.log.Info("closing the link of a member's previous key: its grace window ended", "peer", pl.Key.Fingerprint(),
			"member", r.Label(pl.Key))
		k.host.CloseLink(pl, "previous key retired")
	}
}

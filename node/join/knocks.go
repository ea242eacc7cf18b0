package join

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/logrl"
)

// Knock to join (PROTOCOL.md §14.11). A seed or an mDNS peer of another
// org cannot complete a handshake with this node: the org is in the Noise
// prologue. So this node knocks: a handshake under the knock prologue,
// which any meshd completes whatever its org. The responder learns who
// knocked and from which org (and, for a fresh node, checks its one-node
// roster), lists it in its pending list, and closes; once an admin added
// it, the responder sends its roster instead. A fresh node adopts that
// roster (Knocks.Adopted; meshd moves the old one-node org aside and starts
// again in the new org) only when it came from a seed its user named, or
// is signed by an admin its user confirmed with meshctl adopt: on the LAN
// anyone can answer mDNS.

const (
	// knockTimeout bounds one knock, from the dial to the goodbye.
	knockTimeout = 5 * time.Second
	// maxKnocked bounds the knocked addresses remembered.
	maxKnocked = 32
	// knockMDNSEvery is how often one node found by mDNS is knocked at
	// most; a seed is knocked at each failed dial, on its backoff.
	knockMDNSEvery = 30 * time.Second
	// maxMDNSKnocks bounds the knocks at mDNS-found nodes running at once.
	maxMDNSKnocks = 4
	// maxConfirmed bounds the admins meshctl adopt may confirm.
	maxConfirmed = 8
)

// Knock outcomes and the reasons a roster offered was not adopted.
const (
	knockPending   = "pending"
	knockOffered   = "offered"
	knockNoAnswer  = "no_answer"
	viaSeed        = "seed"
	viaMDNS        = "mdns"
	adoptNotFresh  = "not_fresh"   // this node's org has other members, or a roster from elsewhere
	adoptUnconfirm = "unconfirmed" // offered over an mDNS-found link, no admin confirmed
	adoptMismatch  = "mismatch"    // the roster is not the responder's org, or does not list it
	adoptSignature = "signature"   // not signed by a quorum of its own admins
	adoptMalformed = "malformed"
)

// Adoption is a roster of another org that this fresh node adopted:
// meshd stops the node, moves its one-node org aside and starts again
// with Roster (see [Knocks.Adopted]).
type Adoption struct {
	Roster *roster.Roster
	From   string // the address the roster came from
	Left   string // the org this node leaves
}

// Knocks is what this node knocked at, and what its user confirmed; it
// also answers the knocks of others and keeps the pending list's API.
type Knocks struct {
	h   Host
	log *slog.Logger
	rl  *logrl.Limiter
	ctx context.Context

	mu        sync.Mutex
	targets   map[string]*knockTarget // by address
	confirmed []string                // admin fingerprints meshctl adopt named
	mdnsBusy  map[string]bool         // addresses of the mDNS knocks running
	adopted   chan Adoption           // holds the adoption, once
	done      bool                    // an adoption was handed over
}

type knockTarget struct {
	api.Knocked
	addr transport.Addr
}

// NewKnocks returns the knocks of a node that has knocked nowhere yet.
func NewKnocks(h Host, cfg Config) *Knocks {
	cfg = cfg.withDefaults()
	return &Knocks{h: h, log: cfg.Logger, rl: cfg.RateLog, ctx: cfg.Context,
		targets: map[string]*knockTarget{}, mdnsBusy: map[string]bool{}, adopted: make(chan Adoption, 1)}
}

// Adopted delivers the roster this node adopted, at most once. meshd
// then closes the node and starts it again in the adopted org.
func (k *Knocks) Adopted() <-chan Adoption { return k.adopted }

// FreshRoster returns the encoding of r if it is a one-node org of self's
// own: self its only member, and its only signer. Else nil.
func FreshRoster(r *roster.Roster, self proto.PubKey) []byte {
	if len(r.Members) != 1 || !r.Members[0].Key.Equal(self) {
		return nil
	}
	for _, k := range r.Signers() {
		if !k.Equal(self) {
			return nil
		}
	}
	b, err := r.Encode()
	if err != nil || len(b) > proto.MaxFreshRoster {
		return nil
	}
	return b
}

// checkFresh reports whether a knocking node proved that it is fresh: its
// Fresh roster is a one-node org of its own, of the org it says.
func checkFresh(p *proto.HandshakePayload) bool {
	if len(p.Fresh) == 0 {
		return false
	}
	r, err := roster.Parse(p.Fresh)
	if err != nil || r.Org != p.Org || roster.CheckBootstrap(r) != nil {
		return false
	}
	return FreshRoster(r, p.Identity) != nil
}

// Answer is the responder's side, from the node's admission: a member
// is let through to AnswerRefused (which sends it the roster); anyone
// else is listed as pending, with its org.
func (k *Knocks) Answer(p *proto.HandshakePayload) error {
	k.h.Count(KnockReceived)
	r := k.h.Roster()
	if _, ok := r.Member(p.Identity); ok {
		return nil // the transport refuses the knock; refuse sends the roster
	}
	k.RefusedNonMember(p)
	return fmt.Errorf("%s knocked from org %q and is not a member of roster %q v%d", p.Identity.Fingerprint(), p.Org, r.Org, r.Version)
}

// AnswerRefused runs on the completed knock, before it closes: a
// member gets the roster, which names it; anyone else only a goodbye.
func (k *Knocks) AnswerRefused(l *transport.Link) {
	p := l.Peer()
	r := k.h.Roster()
	if _, ok := r.Member(p.Identity); ok {
		if b, err := r.Encode(); err == nil {
			k.h.Count(KnockRosterSent)
			_ = l.Send(append([]byte{byte(proto.FrameRoster)}, b...))
		}
		_ = l.Send(peers.GoodbyeFrame(fmt.Sprintf("a member of roster %q v%d: adopt it", r.Org, r.Version)))
		rateLog(k.rl, k.log, slog.LevelInfo, "knock from a member of another org: sent it the roster", p.Identity.Fingerprint(), "knock_member",
			"peer", p.Identity.Fingerprint(), "its_org", p.Org, "remote", l.RemoteAddr())
		return
	}
	_ = l.Send(peers.GoodbyeFrame(fmt.Sprintf("knock noted: not a member of roster %q v%d; an admin can add you", r.Org, r.Version)))
}

// knock knocks at a, a seed's address (via "seed") or an mDNS peer's,
// and acts on the answer.
func (k *Knocks) knock(a transport.Addr, via string) {
	cfg := k.h.LinkConfig()
	cfg.Knock = true
	var peer *proto.HandshakePayload
	cfg.Admit = func(p *proto.HandshakePayload) error {
		if p.Identity.Equal(k.h.Self()) {
			return errors.New("peer is this node itself")
		}
		peer = p
		return nil
	}
	payload := cfg.Payload
	cfg.Payload = func() proto.HandshakePayload {
		var p proto.HandshakePayload
		if payload != nil {
			p = payload()
		}
		p.Fresh = FreshRoster(k.h.Roster(), k.h.Self())
		return p
	}
	ctx, cancel := context.WithTimeout(k.ctx, knockTimeout)
	defer cancel()
	k.h.Count(KnockSent)
	l, err := transport.Dial(ctx, a, cfg, nil)
	if err != nil {
		k.h.Count(KnockUnanswered)
		k.note(a, via, nil, knockNoAnswer, "", nil)
		k.log.Debug("knock not answered", "addr", a.String(), "err", err)
		return
	}
	if peer.Org == k.h.Roster().Org {
		// Our own org after all (the dial failed for another reason):
		// the ordinary dial links with it; a knock has nothing to add.
		l.Close()
		return
	}
	b := awaitKnockAnswer(ctx, l)
	if b == nil {
		k.note(a, via, peer, knockPending, "", nil)
		rateLog(k.rl, k.log, slog.LevelInfo, "knocked at a node of another org: it lists this node as pending until one of its admins adds it",
			peer.Identity.Fingerprint(), "knocked", "addr", a.String(), "org", peer.Org, "node", peer.Identity.Fingerprint(),
			"hint", "on an admin's node of that org: meshctl roster pending, meshctl roster add "+k.h.Self().Fingerprint()+", meshctl roster publish")
		return
	}
	k.considerAdoption(a, via, peer, b)
}

// awaitKnockAnswer reads what the responder says on a knock link until it
// closes it: the roster it sent, or nil.
func awaitKnockAnswer(ctx context.Context, l *transport.Link) []byte {
	got := make(chan []byte, 1)
	l.Start(func(frame []byte) {
		if len(frame) > 0 && proto.FrameType(frame[0]) == proto.FrameRoster {
			select {
			case got <- append([]byte(nil), frame[1:]...):
			default:
			}
		}
	})
	defer l.Close()
	select {
	case b := <-got:
		return b
	case <-l.Done():
		select {
		case b := <-got:
			return b
		default:
			return nil
		}
	case <-ctx.Done():
		return nil
	}
}

// considerAdoption decides on roster bytes b that peer, reached at a,
// sent this node because it lists it.
func (k *Knocks) considerAdoption(a transport.Addr, via string, peer *proto.HandshakePayload, b []byte) {
	r, err := roster.Parse(b)
	var admins []string
	why := ""
	switch {
	case err != nil:
		why = adoptMalformed
	case r.Org != peer.Org || !isMemberOf(r, peer.Identity) || !isMemberOf(r, k.h.Self()):
		why = adoptMismatch
	case roster.CheckBootstrap(r) != nil:
		why = adoptSignature
	}
	if r != nil {
		for _, k := range r.Admins() {
			admins = append(admins, k.Fingerprint())
		}
	}
	if why == "" {
		why = k.adoptable(r, via)
	}
	if why != "" {
		k.h.CountReason(AdoptRefused, why)
		k.note(a, via, peer, knockOffered, why, admins)
		rateLog(k.rl, k.log, slog.LevelWarn, "a roster of another org lists this node; not adopted", peer.Identity.Fingerprint(), "adopt_"+why,
			"org", peer.Org, "addr", a.String(), "via", via, "reason", why, "admins", strings.Join(admins, ","), "hint", adoptHint(why))
		return
	}
	k.note(a, via, peer, knockOffered, "", admins)
	cur := k.h.Roster()
	if !k.handOver(Adoption{Roster: r, From: a.String(), Left: cur.Org}) {
		return
	}
	k.h.Count(AdoptAdopted)
	k.log.Info("adopting the org whose roster lists this node: leaving the one-node org", "org", r.Org,
		"roster_version", r.Version, "from", a.String(), "via", via, "left", cur.Org)
}

// adoptable says why this node may not adopt r, offered via via, or "".
func (k *Knocks) adoptable(r *roster.Roster, via string) string {
	if FreshRoster(k.h.Roster(), k.h.Self()) == nil {
		return adoptNotFresh
	}
	if via == viaSeed {
		return ""
	}
	signed := map[string]bool{}
	for _, k := range r.Signers() {
		if r.IsAdmin(k) {
			signed[k.Fingerprint()] = true
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, fp := range k.confirmed {
		if signed[fp] {
			return ""
		}
	}
	return adoptUnconfirm
}

func adoptHint(why string) string {
	switch why {
	case adoptNotFresh:
		return "this node's org has other members or a roster from elsewhere; to move it: meshctl join --force with an invite"
	case adoptUnconfirm:
		return "found by mDNS only, which anyone on the LAN can answer: if it is the org you mean, run meshctl adopt with the fingerprint of one of its admins (meshctl id on that admin's node), or start meshd with --seed at its address"
	}
	return "the roster does not verify as that org's; ask its admin"
}

func isMemberOf(r *roster.Roster, k proto.PubKey) bool {
	_, ok := r.Member(k)
	return ok
}

// handOver delivers an adoption once.
func (k *Knocks) handOver(ad Adoption) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done {
		return false
	}
	k.done = true
	k.adopted <- ad
	return true
}

// note records the outcome of a knock at a.
func (k *Knocks) note(a transport.Addr, via string, peer *proto.HandshakePayload, state, reason string, admins []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := a.String()
	t := k.targets[key]
	if t == nil {
		if len(k.targets) >= maxKnocked {
			k.evictOldestLocked()
		}
		t = &knockTarget{addr: a}
		t.Address = key
		k.targets[key] = t
	}
	if t.Via != viaSeed {
		t.Via = via // a seed stays a seed when mDNS finds it too
	}
	t.LastKnock, t.State, t.Reason, t.Admins = time.Now().UTC(), state, reason, admins
	if peer != nil {
		t.Org, t.Node, t.Fingerprint = peer.Org, peer.Identity, peer.Identity.Fingerprint()
	}
}

func (k *Knocks) evictOldestLocked() {
	var oldest string
	for key, t := range k.targets {
		if oldest == "" || t.LastKnock.Before(k.targets[oldest].LastKnock) {
			oldest = key
		}
	}
	delete(k.targets, oldest)
}

// AnsweredOtherOrg reports whether a dial failed with err because a
// meshd answered as a node of another org (or protocol version): the
// handshake binds the org, so a responder of another org answers with a
// message this node cannot read.
func AnsweredOtherOrg(err error) bool {
	return errors.Is(err, transport.ErrWrongOrg) || errors.Is(err, transport.ErrProtocol)
}

// KnockSeed knocks at the addresses of a seed dial that answered as
// another org.
func (k *Knocks) KnockSeed(why []peers.DialFailure) {
	for _, f := range why {
		if AnsweredOtherOrg(f.Err) {
			k.knock(f.Addr, viaSeed)
			return
		}
	}
}

// KnockMDNS knocks, in the background, at a node mDNS found in another
// org, when this node is fresh and has not knocked there lately.
func (k *Knocks) KnockMDNS(addrs []string) {
	if FreshRoster(k.h.Roster(), k.h.Self()) == nil {
		return
	}
	var a transport.Addr
	for _, s := range addrs {
		if t, err := transport.ParseAddr(s); err == nil && t.Network == "tcp" {
			a = t
			break
		}
	}
	if a.Network == "" {
		return
	}
	k.mu.Lock()
	t := k.targets[a.String()]
	due := t == nil || time.Since(t.LastKnock) >= knockMDNSEvery
	if !due || k.mdnsBusy[a.String()] || len(k.mdnsBusy) >= maxMDNSKnocks || k.done {
		k.mu.Unlock()
		return
	}
	k.mdnsBusy[a.String()] = true
	k.mu.Unlock()
	k.h.Go(func() {
		defer func() { k.mu.Lock(); delete(k.mdnsBusy, a.String()); k.mu.Unlock() }()
		k.knock(a, viaMDNS)
	})
}

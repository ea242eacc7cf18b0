package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famKnocks = newFamily("meshd_knocks_total", "Knocks to join another org (PROTOCOL.md §14.11): sent, unanswered, received, rosters sent to a knocking member, org confirmations and adoptions.", "event")

	cKnockReceived   = newCounter("knock.received", famKnocks, "received")
	cKnockRosterSent = newCounter("knock.roster_sent", famKnocks, "roster_sent")
	cKnockSent       = newCounter("knock.sent", famKnocks, "sent")
	cKnockUnanswered = newCounter("knock.unanswered", famKnocks, "unanswered")
	cAdoptAdopted    = newCounter("adopt.adopted", famKnocks, "adopted")
	cAdoptConfirmed  = newCounter("adopt.confirmed", famKnocks, "confirmed")
)

// Knock to join (PROTOCOL.md §14.11). A seed or an mDNS peer of another
// org cannot complete a handshake with this node: the org is in the Noise
// prologue. So this node knocks: a handshake under the knock prologue,
// which any meshd completes whatever its org. The responder learns who
// knocked and from which org (and, for a fresh node, checks its one-node
// roster), lists it in its pending list, and closes; once an admin added
// it, the responder sends its roster instead. A fresh node adopts that
// roster (Node.Adopted; meshd moves the old one-node org aside and starts
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
// with Roster (see [Node.Adopted]).
type Adoption struct {
	Roster *roster.Roster
	From   string // the address the roster came from
	Left   string // the org this node leaves
}

// knockBook is what this node knocked at, and what its user confirmed.
type knockBook struct {
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

func newKnockBook() *knockBook {
	return &knockBook{targets: map[string]*knockTarget{}, mdnsBusy: map[string]bool{}, adopted: make(chan Adoption, 1)}
}

// Adopted delivers the roster this node adopted, at most once. meshd
// then closes the node and starts it again in the adopted org.
func (n *Node) Adopted() <-chan Adoption { return n.knocks.adopted }

// freshRoster returns the encoding of r if it is a one-node org of self's
// own: self its only member, and its only signer. Else nil.
func freshRoster(r *roster.Roster, self proto.PubKey) []byte {
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
	return freshRoster(r, p.Identity) != nil
}

// answerKnock is the responder's side, from admit: a member is let
// through to answerKnockRefused (which sends it the roster); anyone else
// is listed as pending, with its org.
func (n *Node) answerKnock(p *proto.HandshakePayload) error {
	n.metrics.inc(cKnockReceived)
	r := n.Roster()
	if _, ok := r.Member(p.Identity); ok {
		return nil // the transport refuses the knock; refuse sends the roster
	}
	n.refusedNonMember(p)
	return fmt.Errorf("%s knocked from org %q and is not a member of roster %q v%d", p.Identity.Fingerprint(), p.Org, r.Org, r.Version)
}

// answerKnockRefused runs on the completed knock, before it closes: a
// member gets the roster, which names it; anyone else only a goodbye.
func (n *Node) answerKnockRefused(l *transport.Link) {
	p := l.Peer()
	r := n.Roster()
	if _, ok := r.Member(p.Identity); ok {
		if b, err := r.Encode(); err == nil {
			n.metrics.inc(cKnockRosterSent)
			_ = l.Send(append([]byte{byte(proto.FrameRoster)}, b...))
		}
		_ = l.Send(peers.GoodbyeFrame(fmt.Sprintf("a member of roster %q v%d: adopt it", r.Org, r.Version)))
		n.logRL.log(n.log, "knock from a member of another org: sent it the roster", p.Identity.Fingerprint(), "knock_member",
			"peer", p.Identity.Fingerprint(), "its_org", p.Org, "remote", l.RemoteAddr())
		return
	}
	_ = l.Send(peers.GoodbyeFrame(fmt.Sprintf("knock noted: not a member of roster %q v%d; an admin can add you", r.Org, r.Version)))
}

// knock knocks at a, a seed's address (via "seed") or an mDNS peer's,
// and acts on the answer.
func (n *Node) knock(a transport.Addr, via string) {
	cfg := n.linkCfg
	cfg.Knock = true
	var peer *proto.HandshakePayload
	cfg.Admit = func(p *proto.HandshakePayload) error {
		if p.Identity.Equal(n.id.Pub) {
			return errors.New("peer is this node itself")
		}
		peer = p
		return nil
	}
	cfg.Payload = func() proto.HandshakePayload {
		p := n.payload()
		p.Fresh = freshRoster(n.Roster(), n.id.Pub)
		return p
	}
	ctx, cancel := context.WithTimeout(n.ctx, knockTimeout)
	defer cancel()
	n.metrics.inc(cKnockSent)
	l, err := transport.Dial(ctx, a, cfg, nil)
	if err != nil {
		n.metrics.inc(cKnockUnanswered)
		n.knocks.note(a, via, nil, knockNoAnswer, "", nil)
		n.log.Debug("knock not answered", "addr", a.String(), "err", err)
		return
	}
	if peer.Org == n.Roster().Org {
		// Our own org after all (the dial failed for another reason):
		// the ordinary dial links with it; a knock has nothing to add.
		l.Close()
		return
	}
	b := awaitKnockAnswer(ctx, l)
	if b == nil {
		n.knocks.note(a, via, peer, knockPending, "", nil)
		n.logRL.log(n.log, "knocked at a node of another org: it lists this node as pending until one of its admins adds it",
			peer.Identity.Fingerprint(), "knocked", "addr", a.String(), "org", peer.Org, "node", peer.Identity.Fingerprint(),
			"hint", "on an admin's node of that org: meshctl roster pending, meshctl roster add "+n.id.Pub.Fingerprint()+", meshctl roster publish")
		return
	}
	n.considerAdoption(a, via, peer, b)
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
func (n *Node) considerAdoption(a transport.Addr, via string, peer *proto.HandshakePayload, b []byte) {
	r, err := roster.Parse(b)
	var admins []string
	why := ""
	switch {
	case err != nil:
		why = adoptMalformed
	case r.Org != peer.Org || !isMemberOf(r, peer.Identity) || !isMemberOf(r, n.id.Pub):
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
		why = n.adoptable(r, via)
	}
	if why != "" {
		n.metrics.Inc("adopt.refused." + why)
		n.knocks.note(a, via, peer, knockOffered, why, admins)
		n.logRL.warn(n.log, "a roster of another org lists this node; not adopted", peer.Identity.Fingerprint(), "adopt_"+why,
			"org", peer.Org, "addr", a.String(), "via", via, "reason", why, "admins", strings.Join(admins, ","), "hint", adoptHint(why))
		return
	}
	n.knocks.note(a, via, peer, knockOffered, "", admins)
	cur := n.Roster()
	if !n.knocks.handOver(Adoption{Roster: r, From: a.String(), Left: cur.Org}) {
		return
	}
	n.metrics.inc(cAdoptAdopted)
	n.log.Info("adopting the org whose roster lists this node: leaving the one-node org", "org", r.Org,
		"roster_version", r.Version, "from", a.String(), "via", via, "left", cur.Org)
}

// adoptable says why this node may not adopt r, offered via via, or "".
func (n *Node) adoptable(r *roster.Roster, via string) string {
	if freshRoster(n.Roster(), n.id.Pub) == nil {
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
	n.knocks.mu.Lock()
	defer n.knocks.mu.Unlock()
	for _, fp := range n.knocks.confirmed {
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
func (b *knockBook) handOver(ad Adoption) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return false
	}
	b.done = true
	b.adopted <- ad
	return true
}

// note records the outcome of a knock at a.
func (b *knockBook) note(a transport.Addr, via string, peer *proto.HandshakePayload, state, reason string, admins []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := a.String()
	t := b.targets[k]
	if t == nil {
		if len(b.targets) >= maxKnocked {
			b.evictOldestLocked()
		}
		t = &knockTarget{addr: a}
		t.Address = k
		b.targets[k] = t
	}
	if t.Via != viaSeed {
		t.Via = via // a seed stays a seed when mDNS finds it too
	}
	t.LastKnock, t.State, t.Reason, t.Admins = time.Now().UTC(), state, reason, admins
	if peer != nil {
		t.Org, t.Node, t.Fingerprint = peer.Org, peer.Identity, peer.Identity.Fingerprint()
	}
}

func (b *knockBook) evictOldestLocked() {
	var oldest string
	for k, t := range b.targets {
		if oldest == "" || t.LastKnock.Before(b.targets[oldest].LastKnock) {
			oldest = k
		}
	}
	delete(b.targets, oldest)
}

// knockSeed knocks at the addresses of a seed dial that answered as
// another org.
func (n *Node) knockSeed(why []peers.DialFailure) {
	for _, f := range why {
		if classifyDial(f.Err) == dialOtherOrg {
			n.knock(f.Addr, viaSeed)
			return
		}
	}
}

// knockMDNS knocks, in the background, at a node mDNS found in another
// org, when this node is fresh and has not knocked there lately.
func (n *Node) knockMDNS(addrs []string) {
	if freshRoster(n.Roster(), n.id.Pub) == nil {
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
	b := n.knocks
	b.mu.Lock()
	t := b.targets[a.String()]
	due := t == nil || time.Since(t.LastKnock) >= knockMDNSEvery
	if !due || b.mdnsBusy[a.String()] || len(b.mdnsBusy) >= maxMDNSKnocks || b.done {
		b.mu.Unlock()
		return
	}
	b.mdnsBusy[a.String()] = true
	b.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() { b.mu.Lock(); delete(b.mdnsBusy, a.String()); b.mu.Unlock() }()
		n.knock(a, viaMDNS)
	}()
}

// AdoptState reports whether this node may adopt another org, what it
// knocked at and which admins its user confirmed (GET /v1/adopt).
func (n *Node) AdoptState() api.Adopt {
	r := n.Roster()
	b := n.knocks
	b.mu.Lock()
	defer b.mu.Unlock()
	out := api.Adopt{Fresh: freshRoster(r, n.id.Pub) != nil, Org: r.Org,
		Confirmed: append([]string{}, b.confirmed...), Knocked: []api.Knocked{}}
	for _, t := range b.targets {
		out.Knocked = append(out.Knocked, t.Knocked)
	}
	slices.SortFunc(out.Knocked, func(x, y api.Knocked) int { return y.LastKnock.Compare(x.LastKnock) })
	return out
}

// Adopt confirms an org by the fingerprint of one of its admins: a roster
// signed by that admin that lists this node is adopted even when it came
// over a link mDNS found (POST /v1/adopt). The nodes mDNS found are
// knocked at again at once.
func (n *Node) Adopt(req api.AdoptRequest) (*api.Adopt, error) {
	fp, err := parseAdminFingerprint(req.Fingerprint)
	if err != nil {
		return nil, err
	}
	if freshRoster(n.Roster(), n.id.Pub) == nil {
		r := n.Roster()
		return nil, refuse(http.StatusConflict, "to move this node to another org: meshctl join --force with an invite from one of its admins",
			"this node belongs to org %q (roster v%d, %d members): only a node of a one-node org of its own adopts another org", r.Org, r.Version, len(r.Members))
	}
	b := n.knocks
	b.mu.Lock()
	if !slices.Contains(b.confirmed, fp) {
		if len(b.confirmed) >= maxConfirmed {
			b.confirmed = b.confirmed[1:]
		}
		b.confirmed = append(b.confirmed, fp)
	}
	var again []transport.Addr
	for _, t := range b.targets {
		if t.Via == viaMDNS {
			again = append(again, t.addr)
		}
	}
	b.mu.Unlock()
	n.metrics.inc(cAdoptConfirmed)
	n.log.Info("org confirmed by its admin's fingerprint: a roster it signed that lists this node is adopted", "admin", fp)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for _, a := range again {
			n.knock(a, viaMDNS)
		}
	}()
	out := n.AdoptState()
	return &out, nil
}

// parseAdminFingerprint accepts an admin's key (ed25519:...) or its
// fingerprint (16 hex digits) and returns the fingerprint.
func parseAdminFingerprint(s string) (string, error) {
	s = strings.TrimSpace(s)
	if k, err := proto.ParsePubKey(s); err == nil {
		return k.Fingerprint(), nil
	}
	fp := strings.ToLower(s)
	if len(fp) == 16 && strings.Trim(fp, "0123456789abcdef") == "" {
		return fp, nil
	}
	return "", refuse(http.StatusBadRequest,
		"give the fingerprint of one of the org's admins: 16 hex digits, as meshctl id prints on that admin's node",
		"%q is not a key or fingerprint: an org id alone can be claimed by any node on the LAN", s)
}

// FinishAdoption switches the home to the org of ad, once the node that
// adopted it is closed: the one-node org's roster, history, seeds and
// mailbox go to <home>/left-ORG-TIME/ (as meshctl join does), the adopted
// roster becomes the home's, and the address it came from its seed. It
// returns the directory the old org went to. meshd then starts again.
func FinishAdoption(dir string, ad Adoption) (string, error) {
	h := home.Open(dir)
	unlock, err := h.Lock()
	if err != nil {
		return "", err
	}
	defer func() { _ = unlock() }()
	left, err := h.LeaveOrg(ad.Left)
	if err != nil {
		return "", err
	}
	if err := h.SaveRoster(ad.Roster); err != nil {
		return left, err
	}
	var seeds []string
	if a, err := transport.ParseAddr(ad.From); err == nil && a.Network == "tcp" {
		seeds = append(seeds, a.String())
	}
	return left, h.WriteSeeds("meshd on adopting org "+strconv.Quote(ad.Roster.Org), seeds)
}

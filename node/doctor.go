package node

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters counted in this file.
var (
	cMdnsIgnoredOtherOrg = newCounter("mdns.ignored.other_org", famMDNSIgnored, "other_org")
	cClockSkewWarned     = newEvent("clock.skew_warned")
)

// Thresholds of the doctor's checks.
const (
	// skewWarn is the clock difference to a peer that is reported (log,
	// status, doctor): a third of proto.MaxClockSkew, past which the
	// peer's envelopes are dropped as from the future.
	skewWarn = 10 * time.Second
	// skewFresh is how long a skew measurement counts.
	skewFresh = 15 * time.Minute
	// diskLowBytes and diskLowFraction: the home's file system is nearly
	// full below both.
	diskLowBytes    = 256 << 20
	diskLowFraction = 0.02
	maxForeignOrgs  = 16
	// foreignOrgFresh is how long a node of another org counts after
	// mDNS last reported it: mDNS reports an unchanged node every
	// minute (mdns.Config: RefreshEvery rounds of QueryInterval), so
	// one gone for three minutes has left.
	foreignOrgFresh = 3 * time.Minute
)

// mdnsHint is the advice when mDNS cannot start: on a single host (no
// multicast interface, or no route), seeds or the loopback interface.
const mdnsHint = "without mDNS this node finds peers only through seeds: give --seed tcp://HOST:PORT, or, with every node on this host, --mdns-interface lo after: sudo ip route add 224.0.0.0/4 dev lo"

// diagnosis holds what the node noticed for meshctl doctor.
type diagnosis struct {
	mu          sync.Mutex // guards the fields below
	mdnsErr     error      // why mDNS did not start, if it did not
	foreignOrgs map[string]*foreignOrg
	skew        map[proto.PubKey]skewSample
}

type foreignOrg struct {
	nodes map[proto.PubKey]time.Time // when mDNS last reported each
	last  time.Time
}

type skewSample struct {
	skew   time.Duration // the peer's clock minus ours, transit included
	at     time.Time
	logged time.Time
}

func newDiagnosis() *diagnosis {
	return &diagnosis{foreignOrgs: map[string]*foreignOrg{}, skew: map[proto.PubKey]skewSample{}}
}

// mdnsFailed records why mDNS could not start.
func (n *Node) mdnsFailed(err error) {
	n.diag.mu.Lock()
	n.diag.mdnsErr = err
	n.diag.mu.Unlock()
}

// sawForeignOrg records a node that mDNS found in another org: the usual
// reason a node that ran plain meshd once does not link with its
// neighbours.
func (n *Node) sawForeignOrg(org string, k proto.PubKey) {
	d := n.diag
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	for o, f := range d.foreignOrgs {
		if now.Sub(f.last) >= foreignOrgFresh {
			delete(d.foreignOrgs, o) // left: said again if it comes back
		}
	}
	f := d.foreignOrgs[org]
	if f == nil {
		if len(d.foreignOrgs) >= maxForeignOrgs {
			return
		}
		f = &foreignOrg{nodes: map[proto.PubKey]time.Time{}}
		d.foreignOrgs[org] = f
		n.metrics.inc(cMdnsIgnoredOtherOrg)
		r := n.Roster()
		hint := "to join it, ask one of its admins for an invite: meshctl invite, then meshctl join TOKEN here"
		if r.IsAdmin(n.id.Pub) && !(seenOrg{r.Org, []proto.PubKey{n.id.Pub}}).stray(r) {
			hint = "to bring such a node into this org: meshctl invite --role member here, then meshctl join TOKEN on it"
		}
		n.log.Info("mdns: ignoring nodes of another org", "org", org, "ours", r.Org, "hint", hint)
	}
	for k2, at := range f.nodes {
		if now.Sub(at) >= foreignOrgFresh {
			delete(f.nodes, k2)
		}
	}
	if _, ok := f.nodes[k]; ok || len(f.nodes) < 64 {
		f.nodes[k] = now
	}
	f.last = now
}

// observeClock records the clock difference a fresh envelope shows: one
// that came straight from its sender over the sender's own link.
func (n *Node) observeClock(se *proto.SignedEnvelope, src rxSource, now time.Time) {
	if src.link == nil || src.history || !src.link.Key.Equal(se.From) {
		return
	}
	skew := se.Time().Sub(now)
	d := n.diag
	d.mu.Lock()
	s := d.skew[se.From]
	s.skew, s.at = skew, now
	logIt := skew.Abs() > skewWarn && now.Sub(s.logged) > time.Hour
	if logIt {
		s.logged = now
	}
	d.skew[se.From] = s
	d.mu.Unlock()
	if logIt {
		n.metrics.inc(cClockSkewWarned)
		n.log.Warn("clock skew with a peer", "peer", se.From.Fingerprint(), "skew", skew.Round(time.Millisecond).String(),
			"hint", "one of the two clocks is off; keep clocks in sync with NTP (meshctl doctor says which)")
	}
}

// observeFutureClock records the clock difference an envelope shows when
// it claims to be from more than skewWarn in the future: queueing and
// store-and-forward only ever make envelopes look older, so this is the
// sender's clock (or ours), even for an envelope then dropped as from the
// future. Envelopes within skewWarn cost one comparison.
func (n *Node) observeFutureClock(se *proto.SignedEnvelope, src rxSource, now time.Time) {
	if se.Time().Sub(now) > skewWarn {
		n.observeClock(se, src, now)
	}
}

// maxSkew returns the largest recent clock difference to a peer.
func (n *Node) maxSkew(now time.Time) (time.Duration, proto.PubKey) {
	d := n.diag
	d.mu.Lock()
	defer d.mu.Unlock()
	var worst time.Duration
	var who proto.PubKey
	for k, s := range d.skew {
		if now.Sub(s.at) < skewFresh && s.skew.Abs() > worst.Abs() {
			worst, who = s.skew, k
		}
	}
	return worst, who
}

// Doctor runs the checks of meshctl doctor.
func (n *Node) Doctor() api.Doctor {
	r := n.Roster()
	now := time.Now()
	out := api.Doctor{Links: len(n.linkList()), Members: len(r.Members), Checks: []api.DoctorCheck{}}
	add := func(name, status, fix, format string, args ...any) {
		out.Checks = append(out.Checks, api.DoctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, args...), Fix: fix})
		if status == "problem" {
			out.Problems++
		}
	}
	n.checkMembership(r, add)
	n.checkOrgs(r, now, add)
	n.checkDiscovery(add)
	n.checkSeeds(r, add)
	n.checkLinks(r, out.Links, add)
	n.checkClock(r, now, add)
	n.checkDisk(add)
	n.checkMailbox(add)
	return out
}

type addCheck func(name, status, fix, format string, args ...any)

func (n *Node) checkMembership(r *roster.Roster, add addCheck) {
	if m, ok := r.Member(n.id.Pub); ok {
		add("membership", "ok", "", "in roster %q v%d as %s", r.Org, r.Version, m.Role)
		return
	}
	if n.peers.RemovedSelf() {
		add("membership", "problem", fmt.Sprintf("if this node should be back, ask an admin of %q to make an invite (meshctl invite) and run meshctl join TOKEN here; or to add it (meshctl roster add %s, then meshctl roster publish) and restart meshd here to redial at once",
			r.Org, n.id.Pub.Fingerprint()),
			"this node (%s) was removed from the org by roster %q v%d: every member refuses its links, so it redials each of them only every %v",
			n.id.Pub.Fingerprint(), r.Org, r.Version, peers.RemovedRetry)
		return
	}
	fix := fmt.Sprintf("ask an admin of %q to add this node: meshctl roster add %s --role member, then meshctl roster publish on their node (or have them run meshctl invite and run meshctl join TOKEN here)",
		r.Org, n.id.Pub.Fingerprint())
	add("membership", "problem", fix, "this node (%s) is not a member of its roster %q v%d: it was removed, or never added; every member refuses its links",
		n.id.Pub.Fingerprint(), r.Org, r.Version)
}

func (n *Node) checkDiscovery(add addCheck) {
	n.diag.mu.Lock()
	mdnsErr := n.diag.mdnsErr
	n.diag.mu.Unlock()
	n.peers.Lock()
	seeds := len(n.peers.Seeds)
	n.peers.Unlock()
	const fix = mdnsHint
	switch {
	case n.disc != nil:
		add("discovery", "ok", "", "mDNS runs")
	case mdnsErr != nil && seeds == 0:
		add("discovery", "problem", fix, "mDNS could not start (%v) and no seeds are configured: this node finds no peers by itself", mdnsErr)
	case mdnsErr != nil:
		add("discovery", "warn", fix, "mDNS could not start (%v); seeds and peer exchange still work", mdnsErr)
	case seeds == 0:
		add("discovery", "warn", fix, "mDNS is off and no seeds are configured: this node only links with nodes that dial it")
	default:
		add("discovery", "ok", "", "mDNS is off; %d seeds configured", seeds)
	}
}

func (n *Node) checkSeeds(r *roster.Roster, add addCheck) {
	n.peers.Lock()
	var bad, otherOrg []string
	total := len(n.peers.Seeds)
	for _, s := range n.peers.Seeds {
		if s.Fails == 0 || (!s.Key.IsZero() && n.peers.LinkedLocked(s.Key) != nil) {
			continue
		}
		text := fmt.Sprintf("%s (%d dials failed in a row)", s.Addrs.List()[0], s.Fails)
		if len(s.LastDial) > 0 {
			last := s.LastDial[len(s.LastDial)-1]
			text = fmt.Sprintf("%s (%d dials failed in a row)", dialText(last), s.Fails)
			if classifyDial(last.Err) == dialOtherOrg {
				otherOrg = append(otherOrg, text)
				continue
			}
		}
		bad = append(bad, text)
	}
	n.peers.Unlock()
	switch {
	case total == 0:
		return
	case len(bad) == 0 && len(otherOrg) == 0:
		add("seeds", "ok", "", "%d seeds, none failing", total)
		return
	}
	status := "warn"
	if len(bad)+len(otherOrg) == total {
		status = "problem"
	}
	if len(otherOrg) > 0 {
		// The seed answered: the network is fine, the org is not.
		add("seeds", status, seedsOtherOrgFix(r, n.id.Pub), "seeds of another org: %s", strings.Join(otherOrg, ", "))
	}
	if len(bad) > 0 {
		add("seeds", status, "check that meshd runs at each seed address and that this host can reach it (firewall, address, port); the log names each dial's error",
			"seeds failing: %s", strings.Join(bad, ", "))
	}
}

func (n *Node) checkLinks(r *roster.Roster, links int, add addCheck) {
	others := len(r.Members) - 1
	if _, ok := r.Member(n.id.Pub); !ok {
		others = len(r.Members)
	}
	failing := n.failingMembers(r)
	why := ""
	if failing != "" {
		why = ": " + failing
	}
	switch {
	case others <= 0:
		add("links", "ok", "to bring in other nodes: meshctl invite --role member", "a one-node org: there is no other member to link with")
	case links == 0:
		add("links", "problem", "check that meshd runs on each member and that this host reaches the address named (firewall, address, port); meshctl roster show lists the members",
			"no links to any of the %d other members%s", others, why)
	case links < others:
		add("links", "warn", "members that are offline cannot link; meshctl presence shows who was seen last; for an address named, check the firewall, address and port",
			"linked to %d of the %d other members%s", links, others, why)
	default:
		add("links", "ok", "", "linked to all %d other members", others)
	}
}

// maxFailingNamed bounds the members the links check names.
const maxFailingNamed = 8

// failingMembers names the members without a link whose last dial
// failed, with each address and why it failed.
func (n *Node) failingMembers(r *roster.Roster) string {
	n.peers.Lock()
	defer n.peers.Unlock()
	var parts []string
	more := 0
	for k, p := range n.peers.ByKey {
		if p.Link != nil || len(p.LastDial) == 0 {
			continue
		}
		if len(parts) == maxFailingNamed {
			more++
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s", memberLabel(r, k), dialsText(p.LastDial)))
	}
	slices.Sort(parts)
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, "; ")
}

func (n *Node) checkClock(r *roster.Roster, now time.Time, add addCheck) {
	linked := map[proto.PubKey]bool{}
	for _, l := range n.linkList() {
		linked[l.Key] = true
	}
	n.diag.mu.Lock()
	var far, near []string
	var farSum time.Duration
	for k, s := range n.diag.skew {
		if now.Sub(s.at) >= skewFresh {
			continue
		}
		switch {
		case s.skew.Abs() > skewWarn:
			far = append(far, fmt.Sprintf("%s %+ds", memberLabel(r, k), int(math.Round(s.skew.Seconds()))))
			farSum += s.skew
		case linked[k]:
			// Only a peer linked now vouches for the clocks agreeing.
			near = append(near, memberLabel(r, k))
		}
	}
	n.diag.mu.Unlock()
	slices.Sort(far)
	switch {
	case len(far) == 0 && len(near) == 0:
		add("clock", "ok", "", "no linked peer to compare clocks with")
	case len(far) == 0:
		add("clock", "ok", "", "clocks agree within %v with %d linked peers", skewWarn, len(near))
	default:
		who := "those peers' clocks are off"
		if len(near) == 0 {
			who = "this node's clock is probably off (it disagrees with every peer)"
		}
		add("clock", "problem", "keep clocks in sync with NTP (timedatectl set-ntp true, or chrony); envelopes more than 30s in the future are dropped",
			"clock differs by more than %v from %s: %s", skewWarn, strings.Join(far, ", "), who)
	}
}

func memberLabel(r *roster.Roster, k proto.PubKey) string {
	if m, ok := r.Member(k); ok {
		return m.Label()
	}
	return k.Fingerprint()
}

func (n *Node) checkDisk(add addCheck) {
	free, total, err := diskSpace(n.cfg.Home)
	switch {
	case err != nil:
		add("disk", "warn", "", "free space of %s unknown: %v", n.cfg.Home, err)
	case free < diskLowBytes && float64(free) < diskLowFraction*float64(total):
		add("disk", "problem", "free space on the file system of "+n.cfg.Home+", or move the home to a larger one",
			"the file system of %s is nearly full: %d MiB free of %d MiB; the history store and mailbox stop taking messages when it is full",
			n.cfg.Home, free>>20, total>>20)
	default:
		add("disk", "ok", "", "%d MiB free on the file system of %s", free>>20, n.cfg.Home)
	}
}

func (n *Node) checkMailbox(add addCheck) {
	dir := n.home.MailboxDir()
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		add("mailbox", "problem", "make "+dir+" writable by the user meshd runs as (meshctl repair can rebuild it from the history store)",
			"the mailbox is not writable: %v", err)
		return
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	add("mailbox", "ok", "", "%s is writable", dir)
}

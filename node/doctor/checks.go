package doctor

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Doctor runs the checks of meshctl doctor.
func (d *Diagnosis) Doctor() api.Doctor {
	r := d.h.Roster()
	now := d.now()
	links := d.h.Links()
	out := api.Doctor{Links: len(links), Members: len(r.Members), Checks: []api.DoctorCheck{}}
	add := func(name, status, fix, format string, args ...any) {
		out.Checks = append(out.Checks, api.DoctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, args...), Fix: fix})
		if status == "problem" {
			out.Problems++
		}
	}
	self := d.h.Self()
	d.checkMembership(r, self, add)
	d.checkOrgs(r, self, now, add)
	seeds, failing := d.h.Seeds()
	d.checkDiscovery(seeds, add)
	checkSeeds(r, self, seeds, failing, add)
	d.checkLinks(r, self, out.Links, add)
	d.checkClock(r, links, now, add)
	d.checkDisk(add)
	d.checkMailbox(add)
	return out
}

type addCheck func(name, status, fix, format string, args ...any)

func (d *Diagnosis) checkMembership(r *roster.Roster, self proto.PubKey, add addCheck) {
	if m, ok := r.Member(self); ok {
		add("membership", "ok", "", "in roster %q v%d as %s", r.Org, r.Version, m.Role)
		return
	}
	if d.h.RemovedSelf() {
		add("membership", "problem", fmt.Sprintf("if this node should be back, ask an admin of %q to make an invite (meshctl invite) and run meshctl join TOKEN here; or to add it (meshctl roster add %s, then meshctl roster publish) and restart meshd here to redial at once",
			r.Org, self.Fingerprint()),
			"this node (%s) was removed from the org by roster %q v%d: every member refuses its links, so it redials each of them only every %v",
			self.Fingerprint(), r.Org, r.Version, peers.RemovedRetry)
		return
	}
	fix := fmt.Sprintf("ask an admin of %q to add this node: meshctl roster add %s --role member, then meshctl roster publish on their node (or have them run meshctl invite and run meshctl join TOKEN here)",
		r.Org, self.Fingerprint())
	add("membership", "problem", fix, "this node (%s) is not a member of its roster %q v%d: it was removed, or never added; every member refuses its links",
		self.Fingerprint(), r.Org, r.Version)
}

func (d *Diagnosis) checkDiscovery(seeds int, add addCheck) {
	d.mu.Lock()
	mdnsErr := d.mdnsErr
	d.mu.Unlock()
	const fix = MDNSHint
	switch {
	case d.h.MDNSRuns():
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

func checkSeeds(r *roster.Roster, self proto.PubKey, total int, failing []SeedDial, add addCheck) {
	var bad, otherOrg []string
	for _, s := range failing {
		text := fmt.Sprintf("%s (%d dials failed in a row)", s.Addr, s.Fails)
		if len(s.Last) > 0 {
			last := s.Last[len(s.Last)-1]
			text = fmt.Sprintf("%s (%d dials failed in a row)", dialText(last), s.Fails)
			if classifyDial(last.Err) == dialOtherOrg {
				otherOrg = append(otherOrg, text)
				continue
			}
		}
		bad = append(bad, text)
	}
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
		add("seeds", status, seedsOtherOrgFix(r, self), "seeds of another org: %s", strings.Join(otherOrg, ", "))
	}
	if len(bad) > 0 {
		add("seeds", status, "check that meshd runs at each seed address and that this host can reach it (firewall, address, port); the log names each dial's error",
			"seeds failing: %s", strings.Join(bad, ", "))
	}
}

func (d *Diagnosis) checkLinks(r *roster.Roster, self proto.PubKey, links int, add addCheck) {
	others := len(r.Members) - 1
	if _, ok := r.Member(self); !ok {
		others = len(r.Members)
	}
	failing := failingMembers(r, d.h.FailingMembers())
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
func failingMembers(r *roster.Roster, ms []MemberDial) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s: %s", memberLabel(r, m.Key), dialsText(m.Last)))
	}
	slices.Sort(parts)
	if more := len(parts) - maxFailingNamed; more > 0 {
		parts = append(parts[:maxFailingNamed], fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, "; ")
}

func (d *Diagnosis) checkClock(r *roster.Roster, links []*peers.Link, now time.Time, add addCheck) {
	linked := map[proto.PubKey]bool{}
	for _, l := range links {
		linked[l.Key] = true
	}
	d.mu.Lock()
	var far, near []string
	var farSum time.Duration
	for k, s := range d.skew {
		if now.Sub(s.at) >= skewFresh {
			continue
		}
		switch {
		case s.skew.Abs() > SkewWarn:
			far = append(far, fmt.Sprintf("%s %+ds", memberLabel(r, k), int(math.Round(s.skew.Seconds()))))
			farSum += s.skew
		case linked[k]:
			// Only a peer linked now vouches for the clocks agreeing.
			near = append(near, memberLabel(r, k))
		}
	}
	d.mu.Unlock()
	slices.Sort(far)
	switch {
	case len(far) == 0 && len(near) == 0:
		add("clock", "ok", "", "no linked peer to compare clocks with")
	case len(far) == 0:
		add("clock", "ok", "", "clocks agree within %v with %d linked peers", SkewWarn, len(near))
	default:
		who := "those peers' clocks are off"
		if len(near) == 0 {
			who = "this node's clock is probably off (it disagrees with every peer)"
		}
		add("clock", "problem", "keep clocks in sync with NTP (timedatectl set-ntp true, or chrony); envelopes more than 30s in the future are dropped",
			"clock differs by more than %v from %s: %s", SkewWarn, strings.Join(far, ", "), who)
	}
}

func memberLabel(r *roster.Roster, k proto.PubKey) string {
	if m, ok := r.Member(k); ok {
		return m.Label()
	}
	return k.Fingerprint()
}

func (d *Diagnosis) checkDisk(add addCheck) {
	home := d.cfg.Home
	free, total, err := d.h.DiskSpace(home)
	switch {
	case err != nil:
		add("disk", "warn", "", "free space of %s unknown: %v", home, err)
	case free < diskLowBytes && float64(free) < diskLowFraction*float64(total):
		add("disk", "problem", "free space on the file system of "+home+", or move the home to a larger one",
			"the file system of %s is nearly full: %d MiB free of %d MiB; the history store and mailbox stop taking messages when it is full",
			home, free>>20, total>>20)
	default:
		add("disk", "ok", "", "%d MiB free on the file system of %s", free>>20, home)
	}
}

func (d *Diagnosis) checkMailbox(add addCheck) {
	dir := d.cfg.MailboxDir
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

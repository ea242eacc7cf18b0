package node

import (
	"slices"

	"github.com/meshd/meshd/node/doctor"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters of node/doctor.
var doctorCounters = [doctor.NumCounters]counter{
	doctor.ForeignOrg:  newCounter("mdns.ignored.other_org", famMDNSIgnored, "other_org"),
	doctor.ClockSkewed: newEvent("clock.skew_warned"),
}

// diskSpace (a variable for tests) returns the bytes free for an
// unprivileged user and the size of the file system holding path.
var diskSpace = doctor.DiskSpace

// doctorHost is the node as node/doctor sees it.
type doctorHost struct{ n *Node }

// newDoctor makes the doctor of n, with nothing noticed yet.
func newDoctor(n *Node) *doctor.Diagnosis {
	return doctor.New(doctorHost{n}, doctor.Config{Home: n.cfg.Home, MailboxDir: n.home.MailboxDir(), Logger: n.log})
}

func (h doctorHost) Roster() *roster.Roster                             { return h.n.Roster() }
func (h doctorHost) Self() proto.PubKey                                 { return h.n.id.Pub }
func (h doctorHost) Links() []*peers.Link                               { return h.n.peers.Links() }
func (h doctorHost) RemovedSelf() bool                                  { return h.n.peers.RemovedSelf() }
func (h doctorHost) MDNSRuns() bool                                     { return h.n.peers.Discovery() != nil }
func (h doctorHost) Count(c doctor.Counter)                             { h.n.metrics.inc(doctorCounters[c]) }
func (h doctorHost) DiskSpace(p string) (free, total uint64, err error) { return diskSpace(p) }

// Seeds returns the number of static seeds and those failing: a dial
// failed and the member they reached is not linked now.
func (h doctorHost) Seeds() (int, []doctor.SeedDial) {
	p := h.n.peers
	p.Lock()
	defer p.Unlock()
	var failing []doctor.SeedDial
	for _, s := range p.Seeds {
		if s.Fails == 0 || (!s.Key.IsZero() && p.LinkedLocked(s.Key) != nil) {
			continue
		}
		failing = append(failing, doctor.SeedDial{Addr: s.Addrs.List()[0].String(), Fails: s.Fails, Last: slices.Clone(s.LastDial)})
	}
	return len(p.Seeds), failing
}

// FailingMembers returns the members without a link whose last dial
// failed.
func (h doctorHost) FailingMembers() []doctor.MemberDial {
	p := h.n.peers
	p.Lock()
	defer p.Unlock()
	var out []doctor.MemberDial
	for k, pr := range p.ByKey {
		if pr.Link == nil && len(pr.LastDial) > 0 {
			out = append(out, doctor.MemberDial{Key: k, Last: slices.Clone(pr.LastDial)})
		}
	}
	return out
}

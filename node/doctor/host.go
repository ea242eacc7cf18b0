package doctor

import (
	"log/slog"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what the doctor sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Self returns this node's key.
	Self() proto.PubKey
	// Links returns every link.
	Links() []*peers.Link
	// RemovedSelf reports whether a roster update removed this node.
	RemovedSelf() bool
	// MDNSRuns reports whether mDNS discovery runs.
	MDNSRuns() bool
	// Seeds returns how many static seeds are configured, and those whose
	// last dial failed and that link with no member now.
	Seeds() (total int, failing []SeedDial)
	// FailingMembers returns the members without a link whose last dial
	// failed.
	FailingMembers() []MemberDial
	// DiskSpace returns the bytes free and the size of the file system
	// holding path.
	DiskSpace(path string) (free, total uint64, err error)
	// Count counts one event c.
	Count(c Counter)
}

// SeedDial is a static seed whose dials fail.
type SeedDial struct {
	Addr  string              // its address
	Fails int                 // dials failed in a row
	Last  []peers.DialFailure // why each address of the last dial failed, or nil
}

// MemberDial is a member without a link whose last dial failed.
type MemberDial struct {
	Key  proto.PubKey
	Last []peers.DialFailure
}

// Counter is an event the doctor counts; the node defines the metric of
// each (node/doctorhost.go).
type Counter uint8

// The doctor's counters.
const (
	ForeignOrg  Counter = iota // mDNS found a node of another org, first of its org
	ClockSkewed                // a peer's clock differs by more than SkewWarn (logged)
	NumCounters
)

// Config is what the doctor reads of the node's configuration.
type Config struct {
	Home       string // the node's home: the disk check's file system
	MailboxDir string // the mailbox the mailbox check writes to
	Logger     *slog.Logger
}

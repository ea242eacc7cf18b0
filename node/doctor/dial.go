package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/transport"
)

// Kinds of dial failure, as meshctl doctor tells them apart: whether
// something answered at the address decides the advice.
const (
	dialOtherOrg  = "other_org" // a meshd answered, of another org (or protocol version)
	dialRefused   = "refused"   // the peer answered and refused this node
	dialOtherKey  = "other_key" // a meshd answered with another identity
	dialNoListen  = "no_listen" // nothing listens at the address
	dialNoAnswer  = "no_answer" // nothing answered in time: a firewall, or the host is down
	dialNoRoute   = "no_route"  // the network or host is unreachable, or the name unknown
	dialOtherFail = "other"
)

// classifyDial names the kind of a dial error.
func classifyDial(err error) string {
	var dnsErr *net.DNSError
	var fm *peers.FormerMemberError
	switch {
	case join.AnsweredOtherOrg(err):
		return dialOtherOrg
	case errors.As(err, &fm), errors.Is(err, transport.ErrNotAdmitted):
		return dialRefused
	case errors.Is(err, transport.ErrUnexpectedPeer):
		return dialOtherKey
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, os.ErrNotExist):
		return dialNoListen
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, transport.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return dialNoAnswer
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH), errors.As(err, &dnsErr):
		return dialNoRoute
	}
	return dialOtherFail
}

// dialText says what a dial failure means, for meshctl doctor.
func dialText(f peers.DialFailure) string {
	a := f.Addr.String()
	switch classifyDial(f.Err) {
	case dialOtherOrg:
		return fmt.Sprintf("%s answers, but as a node of another org", a)
	case dialRefused:
		return fmt.Sprintf("%s answers, but refuses this node", a)
	case dialOtherKey:
		return fmt.Sprintf("%s answers with another node's key", a)
	case dialNoListen:
		return fmt.Sprintf("%s: nothing listens there (connection refused)", a)
	case dialNoAnswer:
		return fmt.Sprintf("%s: no answer in time (a firewall drops it, or the host is down)", a)
	case dialNoRoute:
		return fmt.Sprintf("%s: no route to it (%v)", a, f.Err)
	}
	return fmt.Sprintf("%s: %v", a, f.Err)
}

// dialsText joins the texts of a dial's failures.
func dialsText(fs []peers.DialFailure) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, dialText(f))
	}
	return strings.Join(parts, "; ")
}

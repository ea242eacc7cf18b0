package node

import (
	"errors"
	"strings"

	"github.com/meshd/meshd/transport"
)

// linkDown says why a link went down.
type linkDown uint8

const (
	linkDownClosed linkDown = iota
	linkDownSlowReader
	linkDownTimeout
	linkDownError
	numLinkDown
)

var linkDownNames = [numLinkDown]string{"closed", "slow_reader", "timeout", "error"}

// downReason classes why a link ended, for the "link.down.<class>"
// counters.
func downReason(err error) linkDown {
	switch {
	case err == nil, errors.Is(err, transport.ErrClosed):
		return linkDownClosed
	case errors.Is(err, transport.ErrSlowReader):
		return linkDownSlowReader
	case errors.Is(err, transport.ErrTimeout):
		return linkDownTimeout
	}
	return linkDownError
}

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// sanitize makes a peer's text (a goodbye's reason) fit for a log line:
// at most 200 bytes, valid UTF-8.
func sanitize(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.ToValidUTF8(string(b), "?")
}

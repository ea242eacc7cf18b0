package peers

import (
	"math/rand/v2"
	"time"

	"github.com/meshd/meshd/transport"
)

// A node that is not a member, or holds an old roster that still lists
// it, dials members that refuse it. Without help it would count each
// refusal as a successful dial and redial at once, forever. So:
//
//   - The refusing responder tells the peer why on the completed session
//     (the node's refuse hook): a former member gets the current signed
//     roster, which it verifies and applies like any roster update, and
//     so learns it was removed; everyone gets a goodbye.
//   - An outbound link that the peer ends with a goodbye, or without any
//     frame at all, within RefusedWithin of the handshake counts as a
//     refused dial, and the dialler backs off on RefusedBackoff: at most
//     ten dials in the first ten seconds, then one per 30 s.
//   - A node that applied a roster removing itself knows, verifiably, that
//     every member refuses it: it dials each member and seed only once
//     per RemovedRetry, in case an admin adds it back (status and doctor
//     say so).

const (
	// RefusedWithin is how soon after the handshake a goodbye marks an
	// outbound link as refused. A refusal arrives in the first round
	// trip; legitimate goodbyes (shutdown, duplicate link) come later or
	// on links that are not registered.
	RefusedWithin = 3 * time.Second
	// refusedBackoffMax is the slowest redial of a peer that refuses us.
	refusedBackoffMax = 30 * time.Second
	// RemovedRetry is how often a node removed from the roster redials
	// each member and seed.
	RemovedRetry = 10 * time.Minute
)

// SilentlyRefused reports whether l is an outbound link the peer closed
// soon after the handshake without sending a single frame: a responder
// that refuses without saying so (meshd before refusals were explained
// closed at once), since an admitted link always brings at least a
// policy digest frame (PROTOCOL.md §14.3).
func SilentlyRefused(l *transport.Link) bool {
	return l.Outbound() && l.Stats().FramesIn == 0 && time.Since(l.Established()) < RefusedWithin
}

// RefusedBackoff returns the redial delay after refusals refused dials
// in a row: 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s, each lengthened by up to
// a quarter (never shortened, so the bounds above hold).
func RefusedBackoff(refusals int) time.Duration {
	d := time.Second
	for i := 1; i < refusals && d < refusedBackoffMax; i++ {
		d *= 2
	}
	d = min(d, refusedBackoffMax)
	return d + time.Duration(rand.Int64N(int64(d/4)))
}

// RemovedRetryDelay is RemovedRetry lengthened by up to a quarter, so
// that the dials of a removed node's peers do not stay in step.
func RemovedRetryDelay() time.Duration {
	return RemovedRetry + time.Duration(rand.Int64N(int64(RemovedRetry/4)))
}

// Backoff returns the redial delay after fails consecutive failed dials:
// exponential from lo up to hi, drawn from [d/2, d].
func Backoff(lo, hi time.Duration, fails int) time.Duration {
	d := lo
	for i := 0; i < fails && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return time.Duration(float64(d) * (0.5 + 0.5*rand.Float64()))
}

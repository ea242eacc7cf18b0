package node

import (
	"github.com/meshd/meshd/proto"
)

// retireLoser closes loser, the link of a duplicate pair that lost to
// winner, with a goodbye, and queues the frames it still held unsent on
// winner, in their order. The peer reads the loser until it makes the
// same choice and then stops, so those frames would otherwise be lost:
// a DM would go again at the next flushQueue, but a channel message would
// reach the peer only at its next history catch-up. The caller holds the
// peers mutex and has not yet published winner, so that fan-out puts
// later frames behind these on winner (a frame refused by the closed
// loser is sent on the peer's link of the moment, see fanOut).
//
// Frames about the mesh's content move: envelopes, acks, rosters and
// policies, which the receiver takes from any link and dedupes. Frames
// about the link's own session do not: the goodbye, and the peer lists,
// their updates and the policy digest, which winner's link-up sends
// afresh.
func (n *Node) retireLoser(loser, winner *peerLink) {
	fs := loser.link.CloseAndDrain(goodbyeFrame("duplicate link"))
	moved, dropped := 0, 0
	for _, f := range fs {
		if len(f) == 0 || !rehomed(proto.FrameType(f[0])) {
			continue
		}
		if err := winner.link.Send(f); err != nil {
			dropped++
			n.metrics.Inc("send.dropped." + proto.FrameType(f[0]).String())
			continue
		}
		moved++
	}
	if moved > 0 {
		n.metrics.Add("link.rehomed_frames", uint64(moved))
	}
	if moved+dropped > 0 {
		n.log.Debug("frames of the losing duplicate link moved to the winner",
			"peer", loser.key.Fingerprint(), "moved", moved, "dropped", dropped)
	}
}

// rehomed reports whether a frame of type t queued on the loser of a
// duplicate pair goes on the winner.
func rehomed(t proto.FrameType) bool {
	switch t {
	case proto.FrameEnvelope, proto.FrameAck, proto.FrameRoster, proto.FramePolicy:
		return true
	}
	return false
}

package node

import (
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famRehomed = newFamily("meshd_link_frames_rehomed_total", "Frames still queued on the losing link of a duplicate pair that were sent on the winner instead.")

	cLinkRehomedFrames = newCounter("link.rehomed_frames", famRehomed)
)

// retireLoser closes loser, the link of a duplicate pair that lost to
// winner, with a goodbye, and queues the frames it still held unsent on
// winner, in their order. Written on the loser, they might find a peer
// that no longer reads it (an older build stops at once, and a loser the
// peer never started is not read at all) and be lost: a DM would go again
// at the next flushQueue, but a channel message would reach the peer only
// at its next history catch-up. The caller holds the
// peers mutex and has not yet published winner, so that fan-out puts
// later frames behind these on winner (a frame refused by the closed
// loser is sent on the peer's link of the moment, see fanOut).
//
// Frames about the mesh's content move: envelopes, acks, rosters and
// policies, which the receiver takes from any link and dedupes. Frames
// about the link's own session do not: the goodbye, and the peer lists,
// their updates and the policy digest, which winner's link-up sends
// afresh.
func (n *Node) retireLoser(loser, winner *peers.Link) {
	n.sendRehomed(loser.Conn.CloseAndDrain(peers.GoodbyeFrame("duplicate link")), loser, winner)
}

// sendRehomed sends on winner the frames fs taken from loser that move
// (see peers.Rehomed), in order, and counts them.
func (n *Node) sendRehomed(fs [][]byte, loser, winner *peers.Link) {
	moved, dropped := 0, 0
	for _, f := range fs {
		if len(f) == 0 || !peers.Rehomed(proto.FrameType(f[0])) {
			continue
		}
		if err := winner.Conn.Send(f); err != nil {
			dropped++
			n.metrics.inc(cSendDropped.of(proto.FrameType(f[0])))
			continue
		}
		moved++
	}
	if moved > 0 {
		n.metrics.add(cLinkRehomedFrames, uint64(moved))
	}
	if moved+dropped > 0 {
		n.log.Debug("frames of the losing duplicate link moved to the winner",
			"peer", loser.Key.Fingerprint(), "moved", moved, "dropped", dropped)
	}
}

// retireNewLoser closes pl, a link that lost its duplicate pair to the
// link already registered, before it was started. The peer may have
// registered pl first and sent on it before making the same choice: pl
// reads on until the peer's goodbye ends the stream (for at most a
// second, see [transport.Link.CloseAndDrain]), and hands the envelopes
// and acks it reads to the node, as from any link. The rest (peer lists,
// rosters, policies) is for a session that never started; the peer sends
// it again on the kept link.
func (n *Node) retireNewLoser(pl *peers.Link) {
	pl.Conn.Start(func(frame []byte) {
		if len(frame) == 0 {
			return
		}
		switch proto.FrameType(frame[0]) {
		case proto.FrameEnvelope, proto.FrameAck:
			n.handleFrame(pl, frame)
		}
	})
	// Anything queued already (an ack for what it read) goes on the
	// kept link.
	if fs := pl.Conn.CloseAndDrain(peers.GoodbyeFrame("duplicate link")); len(fs) > 0 {
		n.peers.Lock()
		kept := n.peers.LinkedLocked(pl.Key)
		n.peers.Unlock()
		if kept != nil {
			n.sendRehomed(fs, pl, kept)
		}
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-pl.Conn.Done()
	}()
}

// ackVia returns the link to acknowledge on for envelopes that came on
// pl: pl, or the peer's link of the moment once pl is closing (envelopes
// read by a link that lost a duplicate pair).
func (n *Node) ackVia(pl *peers.Link) *peers.Link {
	if pl.Conn.Err() == nil {
		return pl
	}
	n.peers.Lock()
	defer n.peers.Unlock()
	if cur := n.peers.LinkedLocked(pl.Key); cur != nil {
		return cur
	}
	return pl
}

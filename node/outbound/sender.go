package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Sender is the send side of a node. Create it with [New]; run
// [Sender.Run] for the readers' acks.
type Sender struct {
	host    Host
	cfg     Config
	log     *slog.Logger
	replies *replyDepths
	answers *answerBook
	acks    *readerAcks // acks of our channel Messages, counted in batches
	// requests are the Requests this node received, by request id
	// (requests.go).
	requests *requestBook
}

// New returns a sender over host with the store, counter and links of
// cfg.
func New(host Host, cfg Config) *Sender {
	return &Sender{
		host: host, cfg: cfg, log: cfg.Log,
		replies: newReplyDepths(), answers: newAnswerBook(), acks: newReaderAcks(),
		requests: newRequestBook(),
	}
}

// Counter is the sender counter that numbers our envelopes.
func (s *Sender) Counter() *history.SendCounter { return s.cfg.Counter }

// NoteReply records the reply depth of message m (sent or received) of
// envelope id, if it is a reply.
func (s *Sender) NoteReply(id uuid.UUID, m *proto.Message) { s.replies.note(id, m) }

// Sign builds, numbers and signs an envelope of ours to d.
func (s *Sender) Sign(d proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	// HistoryRequests and HistoryResponses are in no stream (§4.4): they
	// are never stored or fetched again, so a number taken from the peer's
	// stream would be a gap that nothing fills.
	var seq uint64
	if kind != proto.KindHistoryRequest && kind != proto.KindHistoryResponse {
		var err error
		if seq, err = s.cfg.Counter.Next(d); err != nil {
			return nil, fmt.Errorf("sequence number: %w", err)
		}
	}
	e := &proto.Envelope{
		ID:    proto.NewID(),
		From:  s.cfg.Self,
		To:    d,
		Kind:  kind,
		TS:    time.Now().UnixMilli(),
		TTL:   uint32(ttl / time.Second),
		Seq:   seq,
		Epoch: s.cfg.Counter.Epoch(),
	}
	fill(e)
	se, err := proto.SignEnvelope(s.cfg.Key, e)
	if err != nil {
		if errors.Is(err, proto.ErrHopLimit) {
			return nil, apierr.Forbidden("%w", err)
		}
		return nil, apierr.BadRequest("%w", err)
	}
	return se, nil
}

// fanOut hands se to every linked peer in to, and reports who got it.
func (s *Sender) fanOut(se *proto.SignedEnvelope, to []proto.PubKey) []string {
	ps := s.cfg.Peers
	sent := []string{}
	ps.Lock()
	var targets []*peers.Link
	for _, k := range to {
		if pl := ps.LinkedLocked(k); pl != nil {
			targets = append(targets, pl)
		}
	}
	ps.Unlock()
	for _, pl := range targets {
		f := append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)
		err := pl.Conn.Send(f)
		if errors.Is(err, transport.ErrClosed) {
			// The link closed since it was picked: it lost a duplicate
			// pair, or went down. The peer's link now, if another, takes
			// the frame.
			ps.Lock()
			cur := ps.LinkedLocked(pl.Key)
			ps.Unlock()
			if cur != nil && cur != pl {
				err = cur.Conn.Send(f)
			}
		}
		if err != nil {
			s.host.Count(DroppedQueue, 1)
			s.log.Warn("send queue refused envelope", "peer", pl.Key.Fingerprint(), "id", se.ID, "err", err)
			continue
		}
		sent = append(sent, pl.Key.Fingerprint())
	}
	s.host.Count(Copies, uint64(len(sent)))
	return sent
}

// linkedCount returns how many of keys we hold a link to.
func (s *Sender) linkedCount(keys []proto.PubKey) int {
	ps := s.cfg.Peers
	ps.Lock()
	defer ps.Unlock()
	c := 0
	for _, k := range keys {
		if ps.LinkedLocked(k) != nil {
			c++
		}
	}
	return c
}

// warnLimited writes a warning unless (peer, reason) was logged
// recently.
func (s *Sender) warnLimited(msg, peer, reason string, args ...any) {
	if s.cfg.RateLog == nil || !s.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	ok, suppressed := s.cfg.RateLog.Allow(peer+"|"+reason, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.log.Warn(msg, args...)
}

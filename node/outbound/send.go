package outbound

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const (
	hintChannels = "list channels with: meshctl channel list"
	hintMembers  = "list roster members with: meshctl roster show"
)

func (s *Sender) myRole() roster.Role {
	role, _ := s.host.Roster().Role(s.cfg.Self)
	return role
}

// Send sends a channel message ("#name") or a DM (anything else).
func (s *Sender) Send(req api.Send) (*api.Sent, error) {
	s.host.Acted()
	if len(req.Body) > proto.MaxBodySize {
		return nil, apierr.New(http.StatusBadRequest, "split it into several messages, or send a path or URL to the data",
			"body of %d bytes exceeds the message limit of 256 KiB (%d bytes)", len(req.Body), proto.MaxBodySize)
	}
	var reply *uuid.UUID
	if req.InReplyTo != "" {
		id, err := uuid.Parse(req.InReplyTo)
		if err != nil {
			return nil, apierr.BadRequest("in_reply_to: %v", err)
		}
		reply = &id
	}
	msg := &proto.Message{Body: req.Body, InReplyTo: reply}
	if err := s.host.MemberToSend(); err != nil {
		return nil, err
	}
	if s.myRole() == roster.RoleObserver {
		return nil, apierr.Forbidden("role too low: observers may read but not send")
	}
	if err := s.checkReplyDepth(reply); err != nil {
		return nil, err
	}
	var err error
	if msg.Attachments, err = s.host.AttachFiles(req.Attachments); err != nil {
		return nil, err
	}
	var out *api.Sent
	if strings.HasPrefix(req.To, "#") {
		out, err = s.sendChannel(req.To, msg)
	} else {
		out, err = s.sendDirect(req.To, proto.KindMessage, func(e *proto.Envelope) { e.Message = msg })
	}
	if err == nil && reply != nil {
		if id, perr := uuid.Parse(out.ID); perr == nil {
			s.replies.note(id, msg)
		}
	}
	return out, err
}

func (s *Sender) sendChannel(name string, msg *proto.Message) (*api.Sent, error) {
	p, err := s.host.ResolveChannel(name)
	if err != nil {
		return nil, err
	}
	r := s.host.Roster()
	if p.Deleted() {
		return nil, apierr.New(http.StatusForbidden, hintChannels, "#%s was deleted (policy v%d)", p.Name, p.Version)
	}
	if !p.CanWrite(r, s.cfg.Self) {
		return nil, apierr.Forbidden("not a writer of #%s (writers: %s)", p.Name, Principals(p.WriteACL))
	}
	se, err := s.Sign(proto.ToChannel(p.ID), proto.KindMessage, s.cfg.EnvelopeTTL, func(e *proto.Envelope) { e.Message = msg })
	if err != nil {
		return nil, err
	}
	// Our own history holds what we said, so we can serve it in sync. The
	// commit runs while the envelope goes out (unless it lists
	// attachments, below): readers need not wait for our fsync, and the
	// call returns once both are done. If we crash in
	// between, our next catch-up fetches the envelope back from a reader
	// (its number is a gap in our own stream).
	var readers []proto.PubKey
	for _, k := range p.Readers(r) {
		if !k.Equal(s.cfg.Self) {
			readers = append(readers, k)
		}
	}
	linked := s.linkedCount(readers)
	s.acks.noteSent(se.ID) // before any reader can ack it
	var sent []string
	if len(se.Attachments()) > 0 {
		// Stored first: readers ask for the attachments as soon as the
		// envelope arrives, and this node serves a blob only for an
		// envelope its store holds (node/attach_serve.go). Sent while
		// the commit ran, a reader was refused and passed this node over
		// (15 s in 4 of 24 runs of cmd/meshd
		// TestAttachmentChannelFetchOnDemand).
		if err = s.cfg.Store.PutSent(se, linked); err == nil {
			sent = s.fanOut(se, readers)
		}
	} else {
		stored := make(chan error, 1)
		go func() { stored <- s.cfg.Store.PutSent(se, linked) }()
		sent = s.fanOut(se, readers)
		err = <-stored
	}
	if err != nil {
		s.host.Count(StoreFailed, 1)
		s.log.Error("sent a channel message this node could not keep", "id", se.ID, "channel", p.Name, "peers", len(sent), "err", err)
		return nil, fmt.Errorf("store: %w (the message %s went to %d peers, but this node did not keep it)", err, se.ID, len(sent))
	}
	s.host.CountSent(proto.KindMessage)
	s.host.Sent(se)
	return &api.Sent{ID: se.ID.String(), Kind: se.Kind.String(), To: "#" + p.Name, Seq: se.Seq, SentTo: sent}, nil
}

// Principals lists a channel ACL's principals, or "none".
func Principals(ps []channel.Principal) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sendDirect signs a peer-addressed envelope, keeps it for the peer until
// the peer acknowledges it, and sends it if linked. It is signed with the
// store-and-forward window as its TTL whether or not the peer is linked
// (PROTOCOL §16.1): delivery is never confirmed at signing time, and a
// link that looks up may already be dead.
func (s *Sender) sendDirect(to string, kind proto.Kind, fill func(*proto.Envelope)) (*api.Sent, error) {
	m, err := s.host.ResolvePeer(to)
	if err != nil {
		return nil, err
	}
	if m.Key.Equal(s.cfg.Self) {
		return nil, apierr.BadRequest("cannot send to this node itself")
	}
	linked := s.cfg.Peers.Linked(m.Key) != nil
	se, err := s.Sign(proto.ToPeer(m.Key), kind, s.cfg.OfflineWindow, fill)
	if err != nil {
		return nil, err
	}
	if s.cfg.Queueing != nil {
		s.cfg.Queueing(linked)
	}
	// Keep it durably until the peer acknowledges it (FrameAck), linked
	// or not: a link can die with the envelope still in its send queue.
	if err := s.cfg.Store.Enqueue(m.Key, se); err != nil {
		if errors.Is(err, history.ErrQueueFull) {
			return nil, apierr.Forbidden("the queue for peer %s is full (it has not acknowledged earlier messages): %w", Label(m), err)
		}
		return nil, fmt.Errorf("queue for peer: %w", err)
	}
	s.host.Sent(se)
	// Send it on a link to the peer, looking again: a link that came up
	// since the check above may have sent the queue before the envelope
	// was in it, and would not send it until its next periodic flush.
	out := &api.Sent{ID: se.ID.String(), Kind: kind.String(), To: "@" + Label(m), Seq: se.Seq}
	out.SentTo = s.fanOut(se, []proto.PubKey{m.Key})
	if len(out.SentTo) == 0 {
		s.host.Count(Kept, 1)
		out.Queued = true
	}
	s.host.CountSent(kind)
	return out, nil
}

// Label names a member by its name, or its fingerprint if it has none.
func Label(m roster.Member) string {
	if m.Name != "" {
		return m.Name
	}
	return m.Key.Fingerprint()
}

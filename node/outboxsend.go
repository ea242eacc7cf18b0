package node

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// The outbox's counters.
var (
	famOutboxSends = newFamily("meshd_outbox_sends_total", "Sends the outbox asked of the node, by result.", "result")
	famOutboxRead  = newFamily("meshd_outbox_items_read_total", "Inbox items marked read by Kind: read outbox files.")

	cOutboxSent    = newCounter("outbox.sent", famOutboxSends, "sent")
	cOutboxRefused = newCounter("outbox.refused", famOutboxSends, "refused")
	cOutboxRead    = newCounter("outbox.read", famOutboxRead)
)

// sendFromOutbox signs and sends a file an agent dropped in the outbox,
// through the same paths as the control API.
func (n *Node) sendFromOutbox(m *mailbox.OutgoingMessage) (mailbox.Result, error) {
	to := m.To
	if m.Channel != "" {
		to = "#" + m.Channel
	} else if m.Peer != "" {
		to = m.Peer
	}
	var (
		sent *api.Sent
		err  error
	)
	if m.Read != nil {
		return n.readFromOutbox(m)
	}
	switch m.Kind {
	case proto.KindMessage:
		req := api.Send{To: to, Body: m.Body, Attachments: m.Attach}
		if m.InReplyTo != nil {
			req.InReplyTo = m.InReplyTo.String()
		}
		sent, err = n.out.Send(req)
	case proto.KindRequest:
		req := api.Request{To: to, Intent: m.Intent, Attachments: m.Attach}
		if len(m.Params) > 0 {
			if req.Params, err = proto.CBORToJSON(m.Params); err != nil {
				return mailbox.Result{}, err
			}
		}
		if m.ReplyTo != nil {
			req.ReplyTo = m.ReplyTo.String()
		}
		sent, err = n.out.Request(req)
	case proto.KindResponse:
		// The To header names the requester: it is honoured, so a reused
		// request id never sends the answer to another member.
		req := api.Respond{RequestID: m.RequestID.String(), Status: m.Status.String(), To: to, Attachments: m.Attach}
		if len(m.Result) > 0 {
			if req.Result, err = proto.CBORToJSON(m.Result); err != nil {
				return mailbox.Result{}, err
			}
		}
		sent, err = n.out.Respond(req)
	default:
		return mailbox.Result{}, fmt.Errorf("kind %s cannot be sent from the outbox", m.Kind)
	}
	if err != nil {
		n.metrics.inc(cOutboxRefused)
		return mailbox.Result{}, outboxError(err)
	}
	n.metrics.inc(cOutboxSent)
	var res mailbox.Result
	res.MessageID, _ = uuid.Parse(sent.ID)
	if sent.RequestID != "" {
		res.RequestID, _ = uuid.Parse(sent.RequestID)
	}
	return res, nil
}

// outboxError gives a refusal its reason word for the .error file.
func outboxError(err error) error {
	reason, hint := "refused", ""
	switch {
	case errors.Is(err, ErrNotFound):
		reason = "not-found"
		hint = "check the To: header against meshctl channel list / meshctl roster show"
	case errors.Is(err, ErrForbidden):
		reason = "forbidden"
	case errors.Is(err, ErrBadRequest):
		reason = "invalid"
	}
	msg := err.Error()
	for _, k := range []error{ErrBadRequest, ErrNotFound, ErrForbidden} {
		msg = strings.TrimPrefix(msg, k.Error()+": ")
	}
	return &mailbox.SendError{Reason: reason, Hint: hint, Err: errors.New(msg)}
}

// readFromOutbox marks the items a "Kind: read" outbox file lists read.
// Every id is tried; the file fails, naming them, if any could not be.
func (n *Node) readFromOutbox(m *mailbox.OutgoingMessage) (mailbox.Result, error) {
	var bad []string
	res := mailbox.Result{Read: []uuid.UUID{}}
	for _, id := range m.Read {
		if _, err := n.q.MarkRead(id, ""); err != nil {
			bad = append(bad, id.String()+": "+err.Error())
			continue
		}
		res.Read = append(res.Read, id)
	}
	if len(bad) > 0 {
		n.metrics.inc(cOutboxRefused)
		return mailbox.Result{}, &mailbox.SendError{Reason: "not-found",
			Hint: "the other ids were marked read; list items with: meshctl inbox --all",
			Err:  fmt.Errorf("%d of %d items not marked read: %s", len(bad), len(m.Read), strings.Join(bad, "; "))}
	}
	n.metrics.add(cOutboxRead, uint64(len(res.Read)))
	return res, nil
}

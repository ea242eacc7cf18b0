package node

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// mirrorQueueLen bounds inbox items waiting to be mirrored. When it is
// full the commit stage waits: the mirror is never skipped.
const mirrorQueueLen = 4096

// mirrorReconcileWindow is how far back a starting node checks that every
// inbox item has its mailbox file (a crash can fall between the store
// commit and the file).
const mirrorReconcileWindow = 48 * time.Hour

// openMailbox opens the mirror and the outbox under <home>/mailbox.
func (n *Node) openMailbox() error {
	mc := mailbox.DefaultConfig()
	mc.Logger = n.log.With("component", "mailbox")
	m, err := mailbox.Open(n.home.MailboxDir(), mc)
	if err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	n.mirror = m
	oc := mailbox.DefaultOutboxConfig()
	oc.Logger = n.log.With("component", "outbox")
	if n.outbox, err = mailbox.OpenOutbox(n.home.MailboxDir(), oc); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	n.mirrorq = make(chan mailbox.Item, mirrorQueueLen)
	return nil
}

// startMailbox runs the mirror writer, the startup reconciliation and the
// outbox, each owned by n.wg.
func (n *Node) startMailbox() {
	n.wg.Add(2)
	go n.mirrorLoop()
	go func() {
		defer n.wg.Done()
		if err := n.outbox.Run(n.ctx, n.sendFromOutbox); err != nil && n.ctx.Err() == nil {
			n.log.Error("outbox stopped", "err", err)
		}
	}()
}

// onInbox queues an inbox delivery for the mirror.
func (n *Node) onInbox(se *proto.SignedEnvelope, prio history.Priority, _ bool, src rxSource) {
	it := n.mirrorItem(se, prio, src.history, time.Now())
	select {
	case n.mirrorq <- it:
	case <-n.ctx.Done():
		// Shutting down: the startup reconciliation writes it next time.
	}
}

func (n *Node) mirrorItem(se *proto.SignedEnvelope, prio history.Priority, fromHistory bool, at time.Time) mailbox.Item {
	it := mailbox.Item{Env: se, Priority: prio.String(), FromHistory: fromHistory, Delivered: at}
	if m, ok := n.Roster().Member(se.From); ok {
		it.FromName = m.Name
	}
	it.ToText = n.destText(se.To)
	return it
}

// mirrorLoop writes queued items, as many as are waiting per batch, so
// the directory fsync is paid once per batch.
func (n *Node) mirrorLoop() {
	defer n.wg.Done()
	n.reconcileMirror()
	batch := make([]mailbox.Item, 0, 256)
	for {
		batch = batch[:0]
		select {
		case it := <-n.mirrorq:
			batch = append(batch, it)
		case <-n.ctx.Done():
			n.drainMirror(batch)
			return
		}
	more:
		for len(batch) < cap(batch) {
			select {
			case it := <-n.mirrorq:
				batch = append(batch, it)
			default:
				break more
			}
		}
		n.writeMirror(batch)
	}
}

// drainMirror writes what is queued at shutdown.
func (n *Node) drainMirror(batch []mailbox.Item) {
	for {
		select {
		case it := <-n.mirrorq:
			batch = append(batch, it)
			continue
		default:
		}
		break
	}
	if len(batch) > 0 {
		n.writeMirror(batch)
	}
}

func (n *Node) writeMirror(batch []mailbox.Item) {
	paths, err := n.mirror.Write(batch...)
	n.metrics.Add("mirror.files", uint64(len(paths)))
	if err != nil {
		// The envelopes are in the history store; the next start writes
		// the missing files (reconcileMirror).
		if errors.Is(err, mailbox.ErrDiskFull) {
			n.metrics.Inc("mirror.disk_full")
			n.log.Error("mailbox mirror: disk full; files will be written at the next start", "missing", len(batch)-len(paths), "err", err)
		} else {
			n.metrics.Inc("mirror.failed")
			n.log.Error("mailbox mirror", "missing", len(batch)-len(paths), "err", err)
		}
		return
	}
	n.metrics.Inc("mirror.batches")
}

// reconcileMirror writes the mailbox files of recent inbox items that
// have none: a crash between the store commit and the mirror write, or a
// full disk, loses no file.
func (n *Node) reconcileMirror() {
	items, err := n.store.Inbox(history.InboxFilter{Since: time.Now().Add(-mirrorReconcileWindow)})
	if err != nil {
		n.log.Error("mailbox reconcile", "err", err)
		return
	}
	var missing []mailbox.Item
	for _, it := range items {
		if n.mirrorExists(it.ID, it.Delivered) {
			continue
		}
		st, err := n.store.Get(it.ID)
		if err != nil {
			continue
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		missing = append(missing, n.mirrorItem(se, it.Priority, it.FromHistory, it.Delivered))
	}
	if len(missing) == 0 {
		return
	}
	n.log.Info("mailbox: writing files missing since the last run", "count", len(missing))
	n.metrics.Add("mirror.reconciled", uint64(len(missing)))
	for i := 0; i < len(missing); i += 256 {
		n.writeMirror(missing[i:min(i+256, len(missing))])
	}
}

// mirrorExists looks for id's file in the inbox folders of the days
// around its delivery.
func (n *Node) mirrorExists(id uuid.UUID, at time.Time) bool {
	hex := strings.ReplaceAll(id.String(), "-", "")
	suffix := hex[len(hex)-12:]
	for _, d := range []time.Time{at.Add(-24 * time.Hour), at, at.Add(24 * time.Hour)} {
		dir := filepath.Join(n.home.MailboxDir(), d.UTC().Format("2006-01-02"), "inbox")
		matches, _ := filepath.Glob(filepath.Join(dir, "*-"+suffix+"*.txt"))
		if len(matches) > 0 {
			return true
		}
	}
	return false
}

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
	switch m.Kind {
	case proto.KindMessage:
		req := api.Send{To: to, Body: m.Body}
		if m.InReplyTo != nil {
			req.InReplyTo = m.InReplyTo.String()
		}
		sent, err = n.Send(req)
	case proto.KindRequest:
		req := api.Request{To: to, Intent: m.Intent}
		if len(m.Params) > 0 {
			if req.Params, err = proto.CBORToJSON(m.Params); err != nil {
				return mailbox.Result{}, err
			}
		}
		if m.ReplyTo != nil {
			req.ReplyTo = m.ReplyTo.String()
		}
		sent, err = n.Request(req)
	case proto.KindResponse:
		req := api.Respond{RequestID: m.RequestID.String(), Status: m.Status.String()}
		if len(m.Result) > 0 {
			if req.Result, err = proto.CBORToJSON(m.Result); err != nil {
				return mailbox.Result{}, err
			}
		}
		sent, err = n.Respond(req)
	default:
		return mailbox.Result{}, fmt.Errorf("kind %s cannot be sent from the outbox", m.Kind)
	}
	if err != nil {
		n.metrics.Inc("outbox.refused")
		return mailbox.Result{}, outboxError(err)
	}
	n.metrics.Inc("outbox.sent")
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

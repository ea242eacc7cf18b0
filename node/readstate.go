package node

import (
	"fmt"
	"strings"

	"time"

	"github.com/google/uuid"
	"os"
	"path/filepath"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famMirrorMoved = newFamily("meshd_mirror_files_moved_read_total", "Mailbox files moved from inbox/ to read/ when their item was read.")
	famOutboxRead  = newFamily("meshd_outbox_items_read_total", "Inbox items marked read by Kind: read outbox files.")

	cMirrorReadMoveFailed = newCounter("mirror.read_move_failed", famMirrorFailures, "read_move")
	cMirrorMovedRead      = newCounter("mirror.moved_read", famMirrorMoved)
	cOutboxRead           = newCounter("outbox.read", famOutboxRead)
	cMirrorReconciledSent = newEvent("mirror.reconciled_sent")
)

// Read state and sent envelopes in the mailbox. An inbox item's file
// lives in <day>/inbox/ while it is unread and moves to <day>/read/ when
// it is marked read (meshctl read, read_inbox with mark_read, respond on a
// claimed request, or a "Kind: read" outbox file). The mirror loop does
// the moves, in order with the writes: a file written after its item was
// read goes to read/ at once. What this node sends is mirrored to
// <day>/sent/.

// onRead runs after the store marked the inbox item k read: the mirror
// loop moves its file to read/.
func (n *Node) onRead(k envKey) {
	if n.readq == nil {
		return
	}
	select {
	case n.readq <- k:
	case <-n.ctx.Done():
		// The next start moves it (reconcile).
	}
}

// moveRead moves the file of the read item k from inbox/ to read/. A
// file not written yet is written to read/ (readFolders); one not found
// was moved already.
func (r *mirrorRun) moveRead(k envKey) {
	n := r.n
	it, err := n.store.InboxEntry(k.from, k.id)
	if err != nil {
		return
	}
	files := &mirrorFiles{root: n.home.MailboxDir(), folders: map[string]map[string][]string{}, in: []string{mailbox.FolderInbox}}
	p := files.pathFrom(k.id, k.from, it.Delivered)
	if p == "" {
		return
	}
	r.move(p)
}

// move moves the inbox file p to read/, counting the outcome.
func (r *mirrorRun) move(p string) {
	n := r.n
	if _, err := n.mirror.MoveToRead(p); err != nil {
		if os.IsNotExist(err) {
			return
		}
		n.metrics.inc(cMirrorReadMoveFailed)
		n.logRL.warn(n.log, "mailbox: cannot move a read item's file to read/", "", "read_move", "path", p, "err", err)
		return
	}
	n.metrics.inc(cMirrorMovedRead)
}

// readFolders sends the files of queued items that were read before the
// mirror wrote them to read/.
func (r *mirrorRun) readFolders(batch []mailbox.Item) {
	for i := range batch {
		it := &batch[i]
		if it.Folder != "" {
			continue
		}
		e, err := r.n.store.InboxEntry(it.Env.From, it.Env.ID)
		if err == nil && e.Read {
			it.Folder = mailbox.FolderRead
		}
	}
}

// onSent queues an envelope this node sent for the mailbox's sent
// folder, named by its send time.
func (n *Node) onSent(se *proto.SignedEnvelope) {
	if len(se.Attachments()) > 0 {
		n.attach.noteRefs(se, time.Time{})
	}
	if n.mirrorq == nil {
		return
	}
	select {
	case n.mirrorq <- inboxDelivery{n: n, se: se, sent: true}:
	case <-n.ctx.Done():
	}
}

// sentItem renders an envelope this node sent as its sent folder's item,
// on the mirror loop's goroutine.
func (n *Node) sentItem(se *proto.SignedEnvelope) mailbox.Item {
	it := mailbox.Item{Env: se, Delivered: se.Time(), ToText: n.destText(se.To), Folder: mailbox.FolderSent}
	if m, ok := n.Roster().Member(se.From); ok {
		it.FromName = m.Name
	}
	return it
}

// sentPath is the sent-folder file of an envelope of ours that retention
// removed, or "".
func (f *mirrorFiles) sentPath(it history.PrunedItem) string {
	g := &mirrorFiles{root: f.root, folders: f.folders, in: []string{mailbox.FolderSent}}
	return g.pathFrom(it.ID, it.From, it.Delivered)
}

// folderOfPath is the folder of a mirror file path.
func folderOfPath(p string) string { return filepath.Base(filepath.Dir(p)) }

// readFromOutbox marks the items a "Kind: read" outbox file lists read.
// Every id is tried; the file fails, naming them, if any could not be.
func (n *Node) readFromOutbox(m *mailbox.OutgoingMessage) (mailbox.Result, error) {
	var bad []string
	res := mailbox.Result{Read: []uuid.UUID{}}
	for _, id := range m.Read {
		if _, err := n.MarkRead(id, ""); err != nil {
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

// reconcileSent writes the sent-folder files of what this node sent since
// since that have none: a crash between the send and the file, a full
// disk, or a paused mirror loses no file. It reads the delivery records
// (one per sent envelope and recipient) and each day's sent folder once.
func (r *mirrorRun) reconcileSent(since time.Time) (tried, written []mailbox.Item) {
	n := r.n
	rs, err := n.store.Deliveries(history.DeliveryFilter{Limit: maxDeliveryRecords})
	if err != nil {
		n.log.Error("mailbox reconcile: sent messages", "err", err)
		r.failures++
		return nil, nil
	}
	files := &mirrorFiles{root: n.home.MailboxDir(), folders: map[string]map[string][]string{}, in: []string{mailbox.FolderSent}}
	seen := map[uuid.UUID]bool{}
	var missing []mailbox.Item
	for _, rec := range rs {
		if rec.Sent.Before(since) {
			break // newest first
		}
		if seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		if files.path(rec.ID, rec.Sent) != "" {
			continue
		}
		st, err := n.store.Get(n.id.Pub, rec.ID)
		if err != nil {
			continue // sent before this node kept its own DMs, or pruned
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		it := mailbox.Item{Env: se, Delivered: se.Time(), ToText: n.destText(se.To), Folder: mailbox.FolderSent}
		if m, ok := n.Roster().Member(se.From); ok {
			it.FromName = m.Name
		}
		missing = append(missing, it)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	n.log.Info("mailbox: writing the files of sent messages that have none", "count", len(missing))
	n.metrics.add(cMirrorReconciledSent, uint64(len(missing)))
	for i := 0; i < len(missing); i += 256 {
		_, w := r.put(missing[i:min(i+256, len(missing))], false)
		written = append(written, w...)
	}
	return missing, written
}

package mailbox

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/meshd/meshd/history"
)

// Read state in the mailbox. An inbox item's file lives in <day>/inbox/
// while it is unread and moves to <day>/read/ when it is marked read
// (meshctl read, read_inbox with mark_read, respond on a claimed request,
// or a "Kind: read" outbox file). The loop does the moves, in order with
// the writes: a file written after its item was read goes to read/ at
// once. What the node sends is mirrored to <day>/sent/.

// moveRead moves the file of the read item k from inbox/ to read/. A
// file not written yet is written to read/ (readFolders); one not found
// was moved already.
func (l *Loop) moveRead(k itemKey) {
	it, err := l.cfg.Host.InboxEntry(k.from, k.id)
	if err != nil {
		return
	}
	p := newFileFinder(l.cfg.Root, FolderInbox).pathFrom(k.id, k.from, it.Delivered)
	if p == "" {
		return
	}
	l.move(p)
}

// move moves the inbox file p to read/, counting the outcome.
func (l *Loop) move(p string) {
	if _, err := l.cfg.Mirror.MoveToRead(p); err != nil {
		if os.IsNotExist(err) {
			return
		}
		l.cfg.Host.Count(CountReadMoveFailed, 1)
		if !l.cfg.Logger.Enabled(context.Background(), slog.LevelWarn) {
			return
		}
		if ok, suppressed := l.rl.Allow("|read_move", time.Now()); ok {
			args := []any{"path", p, "err", err}
			if suppressed > 0 {
				args = append(args, "suppressed", suppressed)
			}
			l.cfg.Logger.Log(context.Background(), slog.LevelWarn, "mailbox: cannot move a read item's file to read/", args...)
		}
		return
	}
	l.cfg.Host.Count(CountMovedRead, 1)
}

// readFolders sends the files of queued items that were read before the
// mirror wrote them to read/. It asks the host once for the batch: one
// lookup per file cost the loop a read transaction for each.
func (l *Loop) readFolders(batch []Item) {
	var keys []history.ItemKey
	var at []int // the index in batch of each key
	for i := range batch {
		if batch[i].Folder == "" {
			keys = append(keys, history.ItemKey{From: batch[i].Env.From, ID: batch[i].Env.ID})
			at = append(at, i)
		}
	}
	if len(keys) == 0 {
		return
	}
	read, err := l.cfg.Host.InboxRead(keys)
	if err != nil {
		return // written to inbox/; a later read moves it
	}
	for j, i := range at {
		if read[j] {
			batch[i].Folder = FolderRead
		}
	}
}

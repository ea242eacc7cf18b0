package mailbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fsutil"
)

// process handles one claimed file: parse, send, and file it in sent/ or
// failed/.
func (o *Outbox) process(ctx context.Context, name, path string, send func(*OutgoingMessage) (Result, error)) {
	b, reason, err := o.read(path)
	var msg *OutgoingMessage
	if err == nil {
		msg, err = ParseOutgoing(b)
		reason = ReasonMalformed
	}
	if err != nil {
		o.fail(name, path, reason, err)
		return
	}
	msg.File = name
	res, err := send(msg)
	if err != nil {
		if o.stopping(ctx) {
			// Interrupted by shutdown, not refused: try again next time.
			if back, ferr := freeName(o.out, strings.TrimSuffix(name, ".txt"), ".txt", ""); ferr == nil && os.Rename(path, back) == nil {
				o.log.Info("mailbox: outbox: send interrupted, file put back", "file", name, "err", err)
				return
			}
		}
		reason = ReasonSend
		if se, ok := errors.AsType[*SendError](err); ok && se.Reason != "" {
			reason = se.Reason
		}
		o.fail(name, path, reason, err)
		return
	}
	var sidecar strings.Builder
	if res.Read != nil {
		for _, id := range res.Read {
			fmt.Fprintf(&sidecar, "Read: %s\n", id)
		}
	} else {
		fmt.Fprintf(&sidecar, "Message-ID: %s\n", res.MessageID)
	}
	if res.RequestID != uuid.Nil {
		fmt.Fprintf(&sidecar, "Request-ID: %s\n", res.RequestID)
	}
	fmt.Fprintf(&sidecar, "Sent: %s\n", formatTime(o.now()))
	dst, err := o.file(o.sent, name, path, sentSuffix, sidecar.String())
	if err != nil {
		// Sent, but not filed: leave it in .processing, where the next
		// start finds it (and sends it again, which the log says).
		o.log.Error("mailbox: outbox: sent, but could not move the file to sent/", "file", name, "id", res.MessageID, "err", err)
		o.count(func(s *OutboxStats) { s.Sent++ })
		return
	}
	o.count(func(s *OutboxStats) { s.Sent++ })
	o.log.Info("mailbox: outbox: sent", "file", name, "id", res.MessageID, "to", msg.To, "kind", msg.Kind, "moved", dst)
}

// fail files a claimed file in failed/ with the reason.
func (o *Outbox) fail(name, path, reason string, err error) {
	o.count(func(s *OutboxStats) {
		s.Failed++
		s.FailedByReason[reason]++
		if reason == ReasonMalformed {
			s.Malformed++
		}
	})
	text := oneLine(err.Error()) + "\n"
	hint := Hint(err)
	if se, ok := errors.AsType[*SendError](err); ok && se.Hint != "" {
		hint = se.Hint
	}
	if hint != "" {
		text += "hint: " + oneLine(hint) + "\n"
	}
	dst, ferr := o.file(o.failed, name, path, errorSuffix, text)
	if ferr != nil {
		o.log.Error("mailbox: outbox: could not move a failed file to failed/", "file", name, "reason", err, "err", ferr)
		return
	}
	o.log.Warn("mailbox: outbox: not sent", "file", name, "reason", reason, "err", err, "moved", dst)
}

// file writes the sidecar next to a free name in dir, then moves the
// claimed file there, and returns the new path.
func (o *Outbox) file(dir, name, path, suffix, sidecar string) (string, error) {
	dst, err := freeName(dir, strings.TrimSuffix(name, ".txt"), ".txt", suffix)
	if err != nil {
		return "", err
	}
	if err := fsutil.WriteAtomic(dst+suffix, []byte(sidecar), o.cfg.Access.fileMode()); err != nil {
		return "", err
	}
	if err := os.Rename(path, dst); err != nil {
		return "", err
	}
	return dst, fsutil.SyncDir(dir)
}

// oneLine replaces line breaks and other control characters by spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if badRune(r) {
			return ' '
		}
		return r
	}, s)
}

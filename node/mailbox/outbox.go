package mailbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fsutil"
)

// Outbox directories and names, under the mailbox root.
const (
	OutboxDir     = "outbox"
	SentDir       = "sent"
	FailedDir     = "failed"
	processingDir = ".processing"
	readmeName    = "README.txt"
	sentSuffix    = ".sent"
	errorSuffix   = ".error"
)

// OutboxConfig configures an [Outbox]. Start from [DefaultOutboxConfig].
type OutboxConfig struct {
	// ScanInterval is how often the outbox is scanned besides the
	// fsnotify events. Default 2 s: a lost event (or a file system without
	// inotify) delays a send by at most that much.
	ScanInterval time.Duration
	// NoNotify turns fsnotify off, leaving the periodic scan alone: for
	// file systems where inotify does not work (some network mounts), and
	// for tests.
	NoNotify bool
	// MaxFileSize caps an outbox file. Default 1 MiB: the largest body
	// (256 KiB) with room for JSON whitespace.
	MaxFileSize int64
	// Access says who may read the outbox, sent/ and failed/ besides
	// the owner (and, when shared, who may drop files in the outbox).
	Access Access
	// Logger receives pick-ups, sends, failures and recoveries; nil
	// discards.
	Logger *slog.Logger
	// Now is the clock for the Sent line; nil is time.Now.
	Now func() time.Time
}

// DefaultOutboxConfig returns the configuration meshd uses.
func DefaultOutboxConfig() OutboxConfig {
	return OutboxConfig{ScanInterval: 2 * time.Second, MaxFileSize: 1 << 20}
}

// Result is what the send function reports for a file it sent.
type Result struct {
	// MessageID is the id of the envelope sent.
	MessageID uuid.UUID
	// RequestID is a request's request_id (zero for other kinds), so the
	// agent can match the response.
	RequestID uuid.UUID
	// Read lists the items a "Kind: read" file marked read (MessageID is
	// then zero).
	Read []uuid.UUID
}

// SendError is an error a send function may return to choose the reason
// the failure is counted under in [OutboxStats].FailedByReason (default
// "send") and to give the agent a hint.
type SendError struct {
	Reason string
	Hint   string
	Err    error
}

func (e *SendError) Error() string { return e.Err.Error() }
func (e *SendError) Unwrap() error { return e.Err }

// Failure reasons counted by [OutboxStats].FailedByReason.
const (
	ReasonMalformed  = "malformed"  // the file does not parse
	ReasonTooLarge   = "too-large"  // over MaxFileSize
	ReasonUnreadable = "unreadable" // not a regular file, or a read error
	ReasonSend       = "send"       // the send function failed
)

// OutboxStats counts what an [Outbox] did.
type OutboxStats struct {
	// Picked counts files taken for processing, recovered ones included.
	Picked uint64
	// Recovered counts files found in .processing at start.
	Recovered uint64
	Sent      uint64
	Failed    uint64
	// Malformed counts files that did not parse; they are in Failed too.
	Malformed uint64
	// FailedByReason splits Failed by reason (see ReasonMalformed...).
	FailedByReason map[string]uint64
	// ScanOnly is set while the outbox could not be watched (no inotify
	// instance left, a file system without it): Run then scans every
	// [ScanOnlyInterval] instead.
	ScanOnly bool
}

// ScanOnlyInterval is how often Run scans an outbox it could not watch.
// A scan of an empty folder is one readdir, so this costs little and
// keeps a send's delay short without notifications.
const ScanOnlyInterval = 250 * time.Millisecond

// newWatcher makes the outbox's watcher; tests replace it to fail.
var newWatcher = fsnotify.NewWatcher

// ErrClosed is returned by [Outbox.Run] after [Outbox.Close].
var ErrClosed = errors.New("outbox closed")

// Outbox picks up the files agents drop in <mailbox>/outbox and hands
// them to a send function (see the package documentation).
type Outbox struct {
	cfg                               OutboxConfig
	log                               *slog.Logger
	now                               func() time.Time
	out, proc, sent, failed, readmeAt string

	// caller is the context the running Run was given; see stopping.
	// Used by Run's goroutine only.
	caller context.Context
	// unclaimable holds the names already logged by claimFailed. Used by
	// Run's goroutine only.
	unclaimable map[string]bool

	mu      sync.Mutex  // guards the fields below
	stats   OutboxStats // FailedByReason is copied out by Stats
	running bool
	closed  bool
	cancel  context.CancelFunc // of the running Run
	done    chan struct{}      // closed when the running Run returns
}

// OpenOutbox prepares the outbox of the mailbox root dir: it creates
// outbox/ (with a README.txt for agents), .processing/, sent/ and
// failed/, and removes temporary files a crash left in sent/ and failed/.
// Files already waiting are taken by [Outbox.Run].
//
// Only outbox/ is writable by the mailbox group, and it is sticky: meshd's
// working state (.processing/, sent/, failed/ and their sidecars) lives
// beside it in the mailbox root, where members can neither rename nor
// replace it. A .processing/ an older version left inside outbox/ is
// emptied into the new one only if it is still a folder of meshd's user;
// anything else there (a link, a member's folder) is left alone, never
// followed.
func OpenOutbox(dir string, cfg OutboxConfig) (*Outbox, error) {
	def := DefaultOutboxConfig()
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = def.ScanInterval
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = def.MaxFileSize
	}
	o := &Outbox{cfg: cfg, log: cfg.Logger, now: cfg.Now,
		out:    filepath.Join(dir, OutboxDir),
		sent:   filepath.Join(dir, SentDir),
		failed: filepath.Join(dir, FailedDir),
	}
	o.proc = filepath.Join(dir, processingDir)
	o.readmeAt = filepath.Join(o.out, readmeName)
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.now == nil {
		o.now = time.Now
	}
	o.stats.FailedByReason = map[string]uint64{}
	acc := cfg.Access
	for _, d := range []string{o.out, o.proc, o.sent, o.failed} {
		mode := acc.DirMode()
		if d == o.out {
			mode = acc.outboxMode()
		}
		if err := acc.mkdirAllMode(d, mode); err != nil {
			return nil, fmt.Errorf("mailbox: outbox: %w", err)
		}
	}
	o.adoptLegacyProcessing(filepath.Join(o.out, processingDir))
	for _, d := range []string{o.sent, o.failed, o.out} {
		if n, err := removeTempsIn(d); err != nil {
			return nil, fmt.Errorf("mailbox: outbox: %w", err)
		} else if n > 0 {
			o.log.Info("mailbox: removed temporary files left by an interrupted write", "dir", d, "count", n)
		}
	}
	if old, err := readNoFollow(o.readmeAt, int64(len(readme))+1); err != nil || string(old) != readme {
		if err := fsutil.WriteAtomic(o.readmeAt, []byte(readme), acc.fileMode()); err != nil {
			return nil, fmt.Errorf("mailbox: outbox: %w", err)
		}
	}
	return o, nil
}

// Stats returns the counters.
func (o *Outbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.FailedByReason = maps.Clone(o.stats.FailedByReason)
	return s
}

// Run takes outbox files and calls send for each, one at a time, until ctx
// is cancelled or [Outbox.Close] is called; then it returns nil. Files
// left in .processing by an interrupted run are processed first. send
// signs and sends the message and returns the envelope id; an error moves
// the file to failed/ with the error as the reason (see [SendError] and
// [HintError]). If ctx is cancelled while send runs and send fails, the
// file goes back to outbox/ instead. Only one Run may be active at a time.
func (o *Outbox) Run(ctx context.Context, send func(*OutgoingMessage) (Result, error)) error {
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		return ErrClosed
	case o.running:
		o.mu.Unlock()
		return errors.New("mailbox: outbox is already running")
	}
	o.caller = ctx
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	o.running, o.cancel, o.done = true, cancel, done
	o.mu.Unlock()
	defer func() {
		cancel()
		o.mu.Lock()
		o.running = false
		o.mu.Unlock()
		close(done)
	}()

	// Watch before the first scan, so no file falls between the two.
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	every := o.cfg.ScanInterval
	if !o.cfg.NoNotify {
		w, err := newWatcher()
		if err == nil {
			err = w.Add(o.out)
			if err != nil {
				w.Close()
			}
		}
		if err != nil {
			// Scan often instead, and say why: on a host running many
			// nodes, the per-user inotify instances (128 by default on
			// Linux) run out.
			every = min(every, ScanOnlyInterval)
			attrs := []any{"every", every, "err", err}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENOSPC) {
				attrs = append(attrs, "hint", "the user's inotify instances or watches are used up: raise the sysctls fs.inotify.max_user_instances and fs.inotify.max_user_watches")
			}
			o.log.Warn("mailbox: outbox: cannot watch for new files; scanning instead", attrs...)
			o.mu.Lock()
			o.stats.ScanOnly = true
			o.mu.Unlock()
		} else {
			defer w.Close()
			events, watchErrs = w.Events, w.Errors
		}
	}

	o.recover(ctx, send)
	o.scan(ctx, send)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create) && eligible(filepath.Base(ev.Name)) {
				o.scan(ctx, send)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			// An overflow loses events; the scan finds their files.
			o.log.Warn("mailbox: outbox: fsnotify", "err", err)
			o.scan(ctx, send)
		case <-tick.C:
			o.scan(ctx, send)
		}
	}
}

// Close stops a running [Outbox.Run] and waits for it to return. Later
// calls of Run fail with [ErrClosed]. Close is idempotent.
func (o *Outbox) Close() error {
	o.mu.Lock()
	o.closed = true
	running, cancel, done := o.running, o.cancel, o.done
	o.mu.Unlock()
	if running {
		cancel()
		<-done
	}
	return nil
}

// stopping reports whether Run is to stop: ctx, the context Run works
// under, is cancelled (by Close, or by the caller's), or the caller's
// context is. The second test is needed: a cancellation reaches a derived
// context just after the parent's Done is closed, so a send that watched
// the caller's context can fail, and the next file be claimed, while ctx
// still looks live.
func (o *Outbox) stopping(ctx context.Context) bool {
	return ctx.Err() != nil || o.caller.Err() != nil
}

// eligible reports whether an outbox entry is a file to send: a ".txt"
// name that does not start with "." and is not the README.
func eligible(name string) bool {
	return strings.HasSuffix(name, ".txt") && !strings.HasPrefix(name, ".") && name != readmeName
}

// recover processes the files an interrupted run left in .processing.
func (o *Outbox) recover(ctx context.Context, send func(*OutgoingMessage) (Result, error)) {
	es, err := os.ReadDir(o.proc)
	if err != nil {
		o.log.Error("mailbox: outbox: recovery", "err", err)
		return
	}
	for _, e := range es {
		if o.stopping(ctx) {
			return
		}
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		o.log.Warn("mailbox: outbox: processing again a file an interrupted run left; it may have been sent already",
			"file", name)
		o.count(func(s *OutboxStats) { s.Picked++; s.Recovered++ })
		o.process(ctx, name, filepath.Join(o.proc, name), send)
	}
}

// scan processes the eligible files in the outbox, in name order.
func (o *Outbox) scan(ctx context.Context, send func(*OutgoingMessage) (Result, error)) {
	es, err := os.ReadDir(o.out)
	if err != nil {
		o.log.Error("mailbox: outbox: scan", "err", err)
		return
	}
	for _, e := range es { // ReadDir sorts by name
		if o.stopping(ctx) {
			return
		}
		name := e.Name()
		if !eligible(name) {
			continue
		}
		claimed, err := freeName(o.proc, strings.TrimSuffix(name, ".txt"), ".txt", "")
		if err == nil {
			err = os.Rename(filepath.Join(o.out, name), claimed)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // taken by someone else, or withdrawn
		}
		if err != nil {
			o.claimFailed(name, err)
			continue
		}
		o.count(func(s *OutboxStats) { s.Picked++ })
		o.process(ctx, name, claimed, send)
	}
}

// claimFailed logs, once per name, an entry the scan could not claim: a
// folder another user made in a shared outbox cannot be moved by meshd's
// user (moving a folder needs write access to it), and would otherwise
// be logged at every scan.
func (o *Outbox) claimFailed(name string, err error) {
	if o.unclaimable == nil || len(o.unclaimable) >= maxUnclaimable {
		o.unclaimable = map[string]bool{}
	}
	if o.unclaimable[name] {
		return
	}
	o.unclaimable[name] = true
	o.log.Error("mailbox: outbox: cannot take this entry; remove it", "file", name, "err", err)
}

// maxUnclaimable bounds the names claimFailed remembers.
const maxUnclaimable = 1024

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

// read reads a claimed file, refusing anything but a regular file of at
// most MaxFileSize bytes.
func (o *Outbox) read(path string) ([]byte, string, error) {
	// Only a regular file is read. Lstat names what else it is; the open
	// neither follows a link nor waits for a FIFO's writer (or a device),
	// and the fstat after it catches a swap in between.
	li, err := os.Lstat(path)
	if err != nil {
		return nil, ReasonUnreadable, fmt.Errorf("cannot open: %w", err)
	}
	if !li.Mode().IsRegular() {
		return nil, ReasonUnreadable, fmt.Errorf("%w (%s)", errNotRegular, kindOf(li.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollowNoBlock, 0)
	if err != nil {
		return nil, ReasonUnreadable, fmt.Errorf("cannot open: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ReasonUnreadable, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(li, fi) {
		return nil, ReasonUnreadable, fmt.Errorf("%w (%s, replaced while opened)", errNotRegular, kindOf(fi.Mode()))
	}
	// A hard link is a name for a file that may live anywhere on the disk,
	// the node's key included where the kernel lets a user link files it
	// cannot read (fs.protected_hardlinks=0). Nothing of it is read, so
	// nothing of it can reach failed/ or the wire.
	if n, ok := linkCount(fi); ok && n > 1 {
		return nil, ReasonUnreadable, WithHint(fmt.Errorf("%w (a hard link: the file has %d names)", errNotRegular, n),
			"write a new file and rename it into the outbox; a link to another file is never read")
	}
	b, err := io.ReadAll(io.LimitReader(f, o.cfg.MaxFileSize+1))
	if err != nil {
		return nil, ReasonUnreadable, err
	}
	if int64(len(b)) > o.cfg.MaxFileSize {
		return nil, ReasonTooLarge, WithHint(fmt.Errorf("file exceeds %d bytes", o.cfg.MaxFileSize),
			"a message body is at most 256 KiB (262144 bytes): split it into several files, or send a path or URL to the data")
	}
	return b, "", nil
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

func (o *Outbox) count(f func(*OutboxStats)) {
	o.mu.Lock()
	f(&o.stats)
	o.mu.Unlock()
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

// readme is the README.txt of the outbox: the convention, for agents.
var readme = `This is the outbox of a meshd node. Drop a file here to send a message.

1. Write the file under a name that starts with "." (like .draft-123) or
   ends in ".tmp".
2. Rename it to a name that ends in ".txt" (like note-123.txt).

Only names that end in ".txt" and do not start with "." are picked up, so a
half-written file is never read. A file written directly under a ".txt"
name may be read before it is complete, and fail. (This README is never
sent.)

A file is headers, a line "---", then the body:

    To: #general
    ---
    Hello, everyone.

Headers (names are case-insensitive; any other header is refused):

    To: #channel | @name | name | ed25519:<key> | <fingerprint>   (required)
    Kind: message | request | response        (default: message)
    In-Reply-To: <message id>                 (message, optional)
    Intent: run-tests                         (request, required)
    Reply-To: <request id>                    (request: follow-up of that request)
    Request-ID: <request id>                  (response, required)
    Status: accepted | rejected | completed | failed   (response, required)
    Attach: /absolute/path/of/a/file          (any kind, optional; one line per
                                              file, at most 16: meshd copies each
                                              and the message lists it, signed)

The body is the message text; for a request, its params as one JSON value;
for a response, its result as one JSON value. Both may be empty. One final
newline is dropped.

To mark inbox items read (their files move from inbox/ to read/), drop a
file with the one header "Kind: read" and, as body, the Message-ID of each
item, one a line (at most 1000). NAME.sent then lists them as "Read:" lines.

    Kind: read
    ---
    01a1fe40-8b6f-7607-895e-1540d393bec2

When the file is sent it moves to ../sent/, next to NAME.sent with its
Message-ID (and Request-ID for a request). If it cannot be sent it moves to
../failed/, next to NAME.error, which says why. A file in ../.processing/
is being sent. If meshd stops in the middle of a send, the file is sent again
when meshd restarts, so in rare cases a message arrives twice.
`

// errNotRegular is the reason an outbox entry that is not a regular file
// (a FIFO, a link, a folder, a device, a hard link) goes to failed/.
var errNotRegular = errors.New("not a regular file")

// kindOf names a file type for the .error file.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "type " + m.Type().String()
}

// readNoFollow reads the regular file at path, at most limit bytes,
// without following a link or waiting for a FIFO's writer.
func readNoFollow(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollowNoBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

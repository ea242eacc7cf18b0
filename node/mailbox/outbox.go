package mailbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/clockgrid"
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
	// Scans fall on multiples of every on the clock, where the node's
	// other idle timers fall (internal/clockgrid): one wake-up, not one
	// more per interval at the phase of the node's start.
	tick := time.NewTimer(clockgrid.Next(time.Now(), every))
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
		case now := <-tick.C:
			tick.Reset(clockgrid.Next(now, every))
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

func (o *Outbox) count(f func(*OutboxStats)) {
	o.mu.Lock()
	f(&o.stats)
	o.mu.Unlock()
}

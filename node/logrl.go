package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshd/meshd/transport/logrl"
)

// rateLog writes repetitive log lines at most once per interval per
// (peer, reason), so a peer that floods us with bad input cannot flood
// the log: the first line is written, later ones are counted, and the
// next line written carries "suppressed", the count. Counters still count
// every event.
type rateLog struct{ l *logrl.Limiter }

func newRateLog() rateLog { return rateLog{l: logrl.New(0, 0)} }

// log writes msg at Info level unless (peer, reason) logged recently.
func (r rateLog) log(lg *slog.Logger, msg, peer, reason string, args ...any) {
	r.logAt(lg, slog.LevelInfo, msg, peer, reason, args...)
}

// warn is log at Warn level.
func (r rateLog) warn(lg *slog.Logger, msg, peer, reason string, args ...any) {
	r.logAt(lg, slog.LevelWarn, msg, peer, reason, args...)
}

// debug is log at Debug level.
func (r rateLog) debug(lg *slog.Logger, msg, peer, reason string, args ...any) {
	r.logAt(lg, slog.LevelDebug, msg, peer, reason, args...)
}

func (r rateLog) logAt(lg *slog.Logger, lvl slog.Level, msg, peer, reason string, args ...any) {
	ok, suppressed := r.allow(lg, lvl, peer, reason)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	lg.Log(context.Background(), lvl, msg, args...)
}

// allow reports whether a line of (peer, reason) at lvl is to be written
// now, and how many were suppressed since the last one: for a caller
// that has work to do (a lookup) only for a line that is written.
func (r rateLog) allow(lg *slog.Logger, lvl slog.Level, peer, reason string) (ok bool, suppressed uint64) {
	if r.l == nil || !lg.Enabled(context.Background(), lvl) {
		return false, 0
	}
	return r.l.Allow(peer+"|"+reason, time.Now())
}

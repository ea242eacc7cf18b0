package join

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshd/meshd/transport/logrl"
)

// rateLog writes a line at lvl unless (peer, reason) logged lately (see
// transport/logrl); the next line written carries "suppressed", the count
// of those left out.
func rateLog(rl *logrl.Limiter, lg *slog.Logger, lvl slog.Level, msg, peer, reason string, args ...any) {
	if !lg.Enabled(context.Background(), lvl) {
		return
	}
	ok, suppressed := rl.Allow(peer+"|"+reason, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	lg.Log(context.Background(), lvl, msg, args...)
}

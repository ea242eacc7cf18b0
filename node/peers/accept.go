package peers

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/meshd/meshd/transport"
)

// Accept hands each link ln admits to add, until ctx is done or ln is
// closed. Failed handshakes are logged and counted by the transport;
// an error here is the listener itself failing: it is logged, and
// accepting resumes after 100 ms.
func Accept(ctx context.Context, ln *transport.Listener, log *slog.Logger, add func(*transport.Link)) {
	for {
		l, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return
			}
			log.Warn("accept", "addr", ln.Addr().String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		add(l)
	}
}

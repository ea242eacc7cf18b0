package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/presence"
)

// openState opens what the message plane keeps on disk: the history store
// (envelopes, dedupe, inbox state, send counters, offline queues), the
// channel policies and the subscriptions.
func (n *Node) openState() error {
	hc := history.DefaultConfig()
	hc.Logger = n.log.With("component", "history")
	st, err := history.Open(n.home.DBPath(), hc)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	n.store = st
	if n.counter, err = history.OpenSendCounter(st); err != nil {
		return err
	}
	if n.counter.Fresh() {
		n.log.Info("new sender epoch", "epoch", n.counter.Epoch())
	}
	n.channels = channel.NewSet()
	dir := n.channelsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("channels: %w", err)
	}
	if err := n.channels.Load(dir); err != nil {
		// Files that fail to parse are reported and skipped; the rest load.
		n.log.Warn("some channel policies did not load", "err", err)
		n.metrics.Inc("policy.load_failed")
	}
	if dropped, stale := n.channels.Revalidate(n.roster); len(dropped)+len(stale) > 0 {
		n.log.Warn("channel policies no longer valid under the roster", "dropped", len(dropped), "stale", len(stale))
	}
	if n.subs, err = channel.OpenSubscriptions(filepath.Join(n.cfg.Home, "subscriptions.json")); err != nil {
		return err
	}
	n.presence = presence.NewTable(n.cfg.PresenceTTL)
	n.pub = presence.NewPublisher(0)
	n.inbox = newInboxNotifier()
	n.events = newBroadcaster()
	n.hsync = newSyncState()
	n.requests = newRequestBook()
	return n.openMailbox()
}

func (n *Node) channelsDir() string { return filepath.Join(n.cfg.Home, "channels") }

func (n *Node) closeState() error {
	var errs []error
	if n.outbox != nil {
		errs = append(errs, n.outbox.Close())
	}
	if n.counter != nil {
		errs = append(errs, n.counter.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famPolicyLoad     = newFamily("meshd_policy_load_failures_total", "Starts at which some channel policies did not load.")
	famStoreCompacted = newFamily("meshd_store_compactions_total", "History store compactions at start, by result.", "result")

	cPolicyLoadFailed   = newCounter("policy.load_failed", famPolicyLoad)
	cStoreCompactFailed = newCounter("store.compact_failed", famStoreCompacted, "failed")
	cStoreCompacted     = newCounter("store.compacted", famStoreCompacted, "ok")
)

// openState opens what the message plane keeps on disk: the history store
// (envelopes, dedupe, inbox state, send counters, offline queues), the
// channel policies and the subscriptions.
func (n *Node) openState(hooks *testHooks) error {
	hc := history.DefaultConfig()
	hc.Logger = n.log.With("component", "history")
	hc.MaxSenderBytes, hc.MaxSenderEnvelopes = n.cfg.SenderStoreBytes, n.cfg.SenderStoreEnvelopes
	hc.Self = n.id.Pub
	hc.InboxPruned = func(items []history.PrunedItem) {
		if n.mail != nil {
			n.mail.Loop.RemovePruned(items)
		}
	}
	st, err := history.Open(n.home.DBPath(), hc)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	if st, err = n.compactAtStart(st, hc); err != nil {
		return err
	}
	n.store = st
	if n.roster.Switched() {
		// A new key starts its streams afresh (PROTOCOL.md §4.4).
		if err := st.SaveCounters(proto.NewEpoch(), nil); err != nil {
			return fmt.Errorf("new sender epoch for the new key: %w", err)
		}
	}
	counter, err := history.OpenSendCounter(st)
	if err != nil {
		return err
	}
	if counter.Fresh() {
		n.log.Info("new sender epoch", "epoch", counter.Epoch())
	}
	n.out = newOutbound(n, counter, hooks.queueObserver())
	st.OnDeliveryFailed(n.out.OnDeliveryFailed)
	set := channel.NewSet()
	dir := n.channelsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("channels: %w", err)
	}
	if err := set.Load(dir); err != nil {
		// Files that fail to parse are reported and skipped; the rest load.
		n.log.Warn("some channel policies did not load", "err", err,
			"fix", "remove each file named; a linked peer that holds the channel sends its policy again")
		n.metrics.inc(cPolicyLoadFailed)
	}
	if dropped, stale := set.Revalidate(n.Roster()); len(dropped)+len(stale) > 0 {
		n.log.Warn("channel policies no longer valid under the roster", "dropped", len(dropped), "stale", len(stale))
	}
	subs, err := channel.OpenSubscriptions(filepath.Join(n.cfg.Home, "subscriptions.json"))
	if err != nil {
		return fmt.Errorf("%w (fix the file, or remove it and subscribe again: meshctl subscribe NAME)", err)
	}
	if n.chans, err = newChanAdmin(n, set, subs); err != nil {
		return err
	}
	if err := n.openAttachments(); err != nil {
		return err
	}
	n.own = newOwnPresence(n)
	n.q = newInboxq(n)
	if err := (mailboxHost{n}).open(); err != nil {
		return err
	}
	n.rx = newRx(n, hooks.deliverObserver(), hooks.roundObserver())
	return nil
}

// compactAtStart compacts the history store when at least half of a file
// of Config.CompactAtStart bytes or more is free pages (retention frees
// pages, but bbolt never shrinks the file, and the whole file is mapped).
// The home lock is held and nothing else uses the store yet. A failed
// compaction is logged and the store used as it is.
func (n *Node) compactAtStart(st *history.Store, hc history.Config) (*history.Store, error) {
	if n.cfg.CompactAtStart <= 0 {
		return st, nil
	}
	free, size, err := st.Reclaimable()
	if err != nil || size < n.cfg.CompactAtStart || free*2 < size {
		return st, nil
	}
	path := n.home.DBPath()
	n.log.Info("compacting the history store: half of it is free pages", "path", path, "size", size, "free", free)
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("close history before compacting: %w", err)
	}
	start := time.Now()
	before, after, cerr := history.CompactFile(path, hc)
	if cerr != nil {
		n.metrics.inc(cStoreCompactFailed)
		n.log.Error("compacting the history store failed; using it as it is", "err", cerr)
	} else {
		n.metrics.inc(cStoreCompacted)
		n.log.Info("compacted the history store", "before", before, "after", after, "took", time.Since(start).Round(time.Millisecond))
	}
	if st, err = history.Open(path, hc); err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	return st, nil
}

func (n *Node) channelsDir() string { return filepath.Join(n.cfg.Home, "channels") }

func (n *Node) closeState() error {
	var errs []error
	if n.mail != nil {
		errs = append(errs, n.mail.Close())
	}
	if n.out != nil {
		errs = append(errs, n.out.Counter().Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

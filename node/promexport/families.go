package promexport

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshd/meshd/proto"
)

// family is one exported metric family: its descriptor, type and label
// names. Every metric of a family carries the same label names.
type family struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	labels []string
}

func newFamily(typ prometheus.ValueType, name, help string, labels ...string) *family {
	return &family{desc: prometheus.NewDesc(name, help, labels, nil), typ: typ, labels: labels}
}

func counter(name, help string, labels ...string) *family {
	return newFamily(prometheus.CounterValue, name, help, labels...)
}

func gauge(name, help string, labels ...string) *family {
	return newFamily(prometheus.GaugeValue, name, help, labels...)
}

// Counter families fed from the node's dotted counters that the node does
// not define yet (see [node.RegisteredCounters]). The rules below say
// which dotted name feeds which family; the package doc has the table.
var (
	famDeliveryFailed = counter("meshd_deliveries_failed_total", "Kept DMs, requests and responses of this node that will never be delivered (its sender got a delivery_failed item), by state.", "state")
	famHandshakes     = counter("meshd_handshakes_total", "Inbound handshakes on the listeners, by result.", "result")
	famHsRejected     = counter("meshd_handshakes_rejected_total", "Handshakes refused by admission, either direction, by reason.", "reason")
	famSeedsSkipped   = counter("meshd_seeds_skipped_total", "Static seeds not dialled: a seeds-file Unix socket not on this host, or a seed that reached a removed member.", "reason")
	famMDNSFailed     = counter("meshd_mdns_start_failures_total", "Times mDNS discovery could not start.")
	famCardRejected   = counter("meshd_cards_rejected_total", "Agent cards from peers refused, by reason.", "reason")
	famPolicyLoad     = counter("meshd_policy_load_failures_total", "Starts at which some channel policies did not load.")
	famPresenceChg    = counter("meshd_presence_changes_total", "Changes of this node's own presence that its agent's activity (or presence set) caused, by the new state.", "state")
	famSubagent       = counter("meshd_subagent_results_total", "Subagent results posted to this node's own inbox (local only, never sent).")
	famAddrEvicted    = counter("meshd_addresses_evicted_total", "Gossiped addresses dropped after failed dials.")
	famHsShed         = counter("meshd_handshakes_shed_total", "Unauthenticated connections closed to keep the listener open to members, by reason.", "reason")
	famAdoptRefused   = counter("meshd_adopt_refused_total", "Rosters of another org that listed this node but were not adopted, by reason.", "reason")
	famRosterRefused  = counter("meshd_roster_pushes_refused_total", "Rosters sent to a refused former member before the goodbye, so it learns of its removal.")
	famRecvThrottled  = counter("meshd_link_receive_throttled_total", "Times a link stopped reading its peer to keep to the per-link receive rate.")
	famQueueFull      = counter("meshd_link_send_queue_full_total", "Frames refused by a full link send queue (frames or bytes).")
	famRehomed        = counter("meshd_link_frames_rehomed_total", "Frames still queued on the losing link of a duplicate pair that were sent on the winner instead.")
	famStoreCompacted = counter("meshd_store_compactions_total", "History store compactions at start, by result.", "result")
	famMirrorPruned   = counter("meshd_mirror_files_pruned_total", "Mailbox files removed because retention removed their envelope.")
	famMirrorPaused   = counter("meshd_mirror_pauses_total", "Times the mailbox mirror paused at its quota or free-space watermark, by reason.", "reason")
	famMirrorHeld     = counter("meshd_mirror_files_held_back_total", "Mailbox files held back while the mirror was paused; written from the store once there is room.")
	famOutboxPicked   = counter("meshd_outbox_files_picked_total", "Outbox files taken for processing.")
	famOutboxRecov    = counter("meshd_outbox_files_recovered_total", "Outbox files found half-processed at start.")
	famOutboxSent     = counter("meshd_outbox_files_sent_total", "Outbox files sent.")
	famOutboxFailed   = counter("meshd_outbox_files_failed_total", "Outbox files that failed.")
	famOutboxFailures = counter("meshd_outbox_failures_total", "Outbox files that failed, by reason.", "reason")
	famOutboxBad      = counter("meshd_outbox_files_malformed_total", "Outbox files that did not parse.")
	famOutboxRead     = counter("meshd_outbox_items_read_total", "Inbox items marked read by Kind: read outbox files.")
	famClaims         = counter("meshd_inbox_claims_total", "Inbox claims by workers of a pool, by result.", "result")
	famMirrorMoved    = counter("meshd_mirror_files_moved_read_total", "Mailbox files moved from inbox/ to read/ when their item was read.")
)

// Gauge families read from the node's state at scrape time.
var (
	famLinks         = gauge("meshd_links", "Admitted links, by network and direction.", "network", "direction")
	famQueueLen      = gauge("meshd_queue_length", "Items waiting in an internal queue.", "queue")
	famQueueCap      = gauge("meshd_queue_capacity", "Capacity of an internal queue.", "queue")
	famHistoryBytes  = gauge("meshd_history_db_bytes", "Size of the history database file.")
	famHistoryEnvs   = gauge("meshd_history_envelopes", "Envelopes in the history store.")
	famHistoryQueued = gauge("meshd_history_queued_envelopes", "Envelopes kept for peers until they acknowledge them.")
	famPresence      = gauge("meshd_presence_members", "Roster members, this node included, by presence state.", "state")
	famRosterVersion = gauge("meshd_roster_version", "Version of the current roster.")
	famRosterMembers = gauge("meshd_roster_members", "Members of the current roster.")
	famUptime        = gauge("meshd_uptime_seconds", "Seconds since the node started.")
)

// rule maps one dotted counter name, or a family of them, to a family.
// A name ending in "." is a prefix: the rest of the dotted name, which
// must be non-empty and contain no dot, becomes the family's last label
// value, and accept (if set) must allow it. values holds the label values
// fixed by the rule (for a prefix, all but the last).
type rule struct {
	name   string
	fam    *family
	values []string
	accept func(rest string) bool
}

// rules is the mapping table of the names the node does not define, and
// the prefixes that catch names built at run time; doc.go renders it
// with [registeredRules] for readers. Keep both in step.
var rules = []rule{
	{name: "rx.delivered.", fam: nodeFamily("meshd_envelopes_delivered_total")},
	{name: "drop.", fam: nodeFamily("meshd_envelopes_dropped_total")},
	{name: "tx.", fam: nodeFamily("meshd_envelopes_sent_total"), accept: isKind},
	{name: "tx.dropped.", fam: nodeFamily("meshd_envelopes_send_dropped_total")},
	{name: "tx.refused.", fam: nodeFamily("meshd_sends_refused_total")},
	{name: "tx.failed.", fam: famDeliveryFailed},
	{name: "send.dropped.", fam: nodeFamily("meshd_frames_send_dropped_total")},
	{name: "frame.", fam: nodeFamily("meshd_frames_invalid_total")},

	{name: "link.rejected.", fam: nodeFamily("meshd_links_rejected_total")},
	{name: "handshake.accepted", fam: famHandshakes, values: []string{"accepted"}},
	{name: "handshake.failed", fam: famHandshakes, values: []string{"failed"}},
	{name: "handshake.rejected.", fam: famHsRejected},
	{name: "seeds.skipped.", fam: famSeedsSkipped},
	{name: "mdns.ignored.", fam: nodeFamily("meshd_mdns_ignored_total")},
	{name: "mdns.start_failed", fam: famMDNSFailed},
	{name: "peers.ignored.", fam: nodeFamily("meshd_peer_exchange_ignored_total")},
	{name: "addr.evicted", fam: famAddrEvicted},
	{name: "handshake.shed.", fam: famHsShed},
	{name: "handshake.first_message_timeout", fam: famHsShed, values: []string{"first_message_timeout"}},
	{name: "roster.pushed_refused", fam: famRosterRefused},
	{name: "adopt.refused.", fam: famAdoptRefused},
	{name: "link.closed_slow", fam: nodeFamily("meshd_link_events_total"), values: []string{"closed_slow"}},
	{name: "link.refused_slow", fam: nodeFamily("meshd_link_events_total"), values: []string{"refused_slow"}},
	{name: "link.recv_throttled", fam: famRecvThrottled},
	{name: "link.send_queue_full", fam: famQueueFull},
	{name: "link.rehomed_frames", fam: famRehomed},
	{name: "link.move.", fam: nodeFamily("meshd_link_moves_total")},

	{name: "roster.rejected.", fam: nodeFamily("meshd_roster_updates_rejected_total")},
	{name: "policy.rejected.", fam: nodeFamily("meshd_policy_updates_rejected_total")},
	{name: "policy.load_failed", fam: famPolicyLoad},
	{name: "presence.changed.", fam: famPresenceChg},
	{name: "inbox.subagent_results", fam: famSubagent},
	{name: "card.rejected.", fam: famCardRejected},

	{name: "store.compacted", fam: famStoreCompacted, values: []string{"ok"}},
	{name: "store.compact_failed", fam: famStoreCompacted, values: []string{"failed"}},
	{name: "mirror.prune_failed", fam: nodeFamily("meshd_mirror_failures_total"), values: []string{"prune"}},
	{name: "mirror.pruned", fam: famMirrorPruned},
	{name: "mirror.paused.", fam: famMirrorPaused},
	{name: "mirror.held_back", fam: famMirrorHeld},
	{name: "outbox.picked", fam: famOutboxPicked},
	{name: "outbox.recovered", fam: famOutboxRecov},
	{name: "outbox.files_sent", fam: famOutboxSent},
	{name: "outbox.files_failed", fam: famOutboxFailed},
	{name: "outbox.failed.", fam: famOutboxFailures},
	{name: "outbox.malformed", fam: famOutboxBad},
	{name: "outbox.read", fam: famOutboxRead},
	{name: "claim.taken", fam: famClaims, values: []string{"taken"}},
	{name: "claim.conflict", fam: famClaims, values: []string{"conflict"}},
	{name: "claim.released", fam: famClaims, values: []string{"released"}},
	{name: "mirror.moved_read", fam: famMirrorMoved},
	{name: "mirror.read_move_failed", fam: nodeFamily("meshd_mirror_failures_total"), values: []string{"read_move"}},

	{name: "retention.pruned.", fam: nodeFamily("meshd_retention_pruned_total")},
	{name: "sync.refused.", fam: nodeFamily("meshd_sync_refused_total")},
	{name: "history.refused.", fam: nodeFamily("meshd_history_requests_refused_total")},
}

// kindNames are the envelope kinds proto knows, for the "tx." rule, which
// would otherwise swallow every future "tx.something" counter.
var kindNames = func() map[string]bool {
	m := map[string]bool{}
	for k := proto.Kind(1); k != 0; k++ {
		if s := k.String(); !strings.HasPrefix(s, "kind(") {
			m[s] = true
		}
	}
	return m
}()

func isKind(rest string) bool { return kindNames[rest] }

// gaugeFamilies lists the gauge families, for Describe.
var gaugeFamilies = []*family{
	famLinks, famQueueLen, famQueueCap, famHistoryBytes, famHistoryEnvs, famHistoryQueued,
	famPresence, famRosterVersion, famRosterMembers, famUptime,
}

// mapper resolves dotted names with the rules: an exact name first, else
// the longest matching prefix, else [famEvents].
type mapper struct {
	exact    map[string]rule
	prefixes []rule // longest first
}

func newMapper(rs []rule) *mapper {
	m := &mapper{exact: map[string]rule{}}
	for _, r := range rs {
		if strings.HasSuffix(r.name, ".") {
			m.prefixes = append(m.prefixes, r)
		} else {
			m.exact[r.name] = r
		}
	}
	// Longest prefix first, so "tx.dropped." wins over "tx.".
	slices.SortStableFunc(m.prefixes, func(a, b rule) int { return len(b.name) - len(a.name) })
	return m
}

// resolve returns the family and label values for the dotted name.
func (m *mapper) resolve(name string) (*family, []string) {
	if r, ok := m.exact[name]; ok {
		return r.fam, r.values
	}
	for _, r := range m.prefixes {
		rest, ok := strings.CutPrefix(name, r.name)
		if !ok || rest == "" || strings.Contains(rest, ".") || (r.accept != nil && !r.accept(rest)) {
			continue
		}
		return r.fam, append(append([]string(nil), r.values...), rest)
	}
	return famEvents, []string{name}
}

// allFamilies returns every family the rules and gauges can produce, each once.
func allFamilies() []*family {
	seen := map[*family]bool{}
	var out []*family
	add := func(f *family) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, r := range allRules() {
		add(r.fam)
	}
	add(famEvents)
	for _, f := range gaugeFamilies {
		add(f)
	}
	return out
}

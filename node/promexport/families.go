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
	famHandshakes     = counter("meshd_handshakes_total", "Inbound handshakes on the listeners, by result.", "result")
	famCardRejected   = counter("meshd_cards_rejected_total", "Agent cards from peers refused, by reason.", "reason")
	famHsShed         = counter("meshd_handshakes_shed_total", "Unauthenticated connections closed to keep the listener open to members, by reason.", "reason")
	famAdoptRefused   = counter("meshd_adopt_refused_total", "Rosters of another org that listed this node but were not adopted, by reason.", "reason")
	famMirrorPaused   = counter("meshd_mirror_pauses_total", "Times the mailbox mirror paused at its quota or free-space watermark, by reason.", "reason")
	famOutboxPicked   = counter("meshd_outbox_files_picked_total", "Outbox files taken for processing.")
	famOutboxRecov    = counter("meshd_outbox_files_recovered_total", "Outbox files found half-processed at start.")
	famOutboxSent     = counter("meshd_outbox_files_sent_total", "Outbox files sent.")
	famOutboxFailed   = counter("meshd_outbox_files_failed_total", "Outbox files that failed.")
	famOutboxFailures = counter("meshd_outbox_failures_total", "Outbox files that failed, by reason.", "reason")
	famOutboxBad      = counter("meshd_outbox_files_malformed_total", "Outbox files that did not parse.")
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
	{name: "tx.failed.", fam: nodeFamily("meshd_deliveries_failed_total")},
	{name: "send.dropped.", fam: nodeFamily("meshd_frames_send_dropped_total")},
	{name: "frame.", fam: nodeFamily("meshd_frames_invalid_total")},

	{name: "link.rejected.", fam: nodeFamily("meshd_links_rejected_total")},
	{name: "handshake.accepted", fam: famHandshakes, values: []string{"accepted"}},
	{name: "handshake.failed", fam: famHandshakes, values: []string{"failed"}},
	{name: "handshake.rejected.", fam: nodeFamily("meshd_handshakes_rejected_total")},
	{name: "seeds.skipped.", fam: nodeFamily("meshd_seeds_skipped_total")},
	{name: "mdns.ignored.", fam: nodeFamily("meshd_mdns_ignored_total")},
	{name: "peers.ignored.", fam: nodeFamily("meshd_peer_exchange_ignored_total")},
	{name: "handshake.shed.", fam: famHsShed},
	{name: "handshake.first_message_timeout", fam: famHsShed, values: []string{"first_message_timeout"}},
	{name: "adopt.refused.", fam: famAdoptRefused},
	{name: "link.move.", fam: nodeFamily("meshd_link_moves_total")},

	{name: "roster.rejected.", fam: nodeFamily("meshd_roster_updates_rejected_total")},
	{name: "policy.rejected.", fam: nodeFamily("meshd_policy_updates_rejected_total")},
	{name: "presence.changed.", fam: nodeFamily("meshd_presence_changes_total")},
	{name: "card.rejected.", fam: famCardRejected},

	{name: "mirror.paused.", fam: famMirrorPaused},
	{name: "outbox.picked", fam: famOutboxPicked},
	{name: "outbox.recovered", fam: famOutboxRecov},
	{name: "outbox.files_sent", fam: famOutboxSent},
	{name: "outbox.files_failed", fam: famOutboxFailed},
	{name: "outbox.failed.", fam: famOutboxFailures},
	{name: "outbox.malformed", fam: famOutboxBad},

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

// Package promexport serves a meshd node's metrics in the Prometheus text
// format at GET /metrics.
//
// It is off by default; `meshd --metrics 127.0.0.1:9464` turns it on.
// The endpoint has no authentication, so [Serve] refuses an address that
// is not loopback unless [Config.AllowRemote] is set (meshd's
// --metrics-allow-remote), and without it answers only requests whose Host
// names loopback (403 otherwise), so a web page cannot read the counters
// through DNS rebinding (the check is [localhttp.HostGuard], shared with
// the status page). It uses a private registry, never the global
// default one, holding a [Collector] for the node plus the standard
// process_* and go_* collectors.
//
// # How the node's counters become families
//
// The node counts events under dotted names ("drop.bad_signature",
// "rx.delivered.message"; see [node.Metrics]). Most of the per-envelope
// ones are defined in the node with their family and label values
// ([node.RegisteredCounters]); the families of those come from there,
// and each is exported from the start, at zero before its first event.
// The [Collector] keeps no state: at each scrape it reads
// [status.Reporter.Counters] and maps every name with the table below. A name
// is matched exactly first (a defined counter, or an exact row), then by
// the longest prefix (rows ending in "."), whose dot-free rest becomes
// the last label value. A name no row matches is exported as
// meshd_events_total{name="<dotted name>"}, so a new counter is never
// hidden. Exact rows are exported at zero before their first event;
// names that only a prefix row matches appear with their first event.
// All are counters. Tests hold this table to the node's definitions.
//
//	dotted name               family                                   labels
//	rx.envelopes              meshd_envelopes_received_total
//	rx.delivered.<kind>       meshd_envelopes_delivered_total          kind
//	rx.presence               meshd_envelopes_delivered_total          kind="presence"
//	rx.presence_bytes         meshd_events_total                       name="rx.presence_bytes"
//	rx.commits                meshd_rx_commits_total
//	inbox.items               meshd_inbox_items_total
//	drop.<reason>             meshd_envelopes_dropped_total            reason
//	tx.<kind>                 meshd_envelopes_sent_total               kind (a known envelope kind only)
//	tx.envelopes              meshd_envelope_copies_sent_total
//	tx.forwarded              meshd_envelopes_forwarded_total
//	tx.queued                 meshd_envelopes_kept_total
//	tx.acked                  meshd_envelopes_acked_total
//	tx.dropped.<reason>       meshd_envelopes_send_dropped_total       reason
//	tx.refused.<reason>       meshd_sends_refused_total                reason
//	tx.failed.<state>         meshd_deliveries_failed_total            state (expired or refused)
//	tx.store_failed           meshd_sends_not_kept_total
//	respond.refused.ambiguous meshd_events_total                       name="respond.refused.ambiguous"
//	ack.malformed             meshd_acks_malformed_total
//	ack.reader_uncounted      meshd_channel_acks_uncounted_total
//	send.dropped.<frame>      meshd_frames_send_dropped_total          frame
//	frame.<reason>            meshd_frames_invalid_total               reason
//	link.up                   meshd_link_events_total                  event="up"
//	link.down                 meshd_link_events_total                  event="down"
//	link.down.<why>           meshd_events_total                       name="link.down.<why>" (closed, slow_reader, timeout, error)
//	link.duplicate            meshd_link_events_total                  event="duplicate"
//	link.removed_member       meshd_link_events_total                  event="removed_member"
//	link.retired_key          meshd_link_events_total                  event="retired_key"
//	link.rejected.<reason>    meshd_links_rejected_total               reason
//	handshake.accepted        meshd_handshakes_total                   result="accepted"
//	handshake.failed          meshd_handshakes_total                   result="failed"
//	handshake.rejected.<r>    meshd_handshakes_rejected_total          reason
//	dial.attempt              meshd_dials_total
//	dial.failed               meshd_dial_failures_total
//	dial.seed_failed          meshd_seed_dial_failures_total
//	seeds.skipped.<reason>    meshd_seeds_skipped_total                reason
//	mdns.seen                 meshd_mdns_seen_total
//	mdns.ignored.<reason>     meshd_mdns_ignored_total                 reason
//	mdns.start_failed         meshd_mdns_start_failures_total
//	peers.ignored.<reason>    meshd_peer_exchange_ignored_total        reason
//	peers.malformed           meshd_peer_exchange_ignored_total        reason="malformed"
//	addr.ignored              meshd_addresses_ignored_total
//	addr.evicted              meshd_addresses_evicted_total
//	handshake.shed.<r>        meshd_handshakes_shed_total              reason
//	handshake.first_message_timeout meshd_handshakes_shed_total        reason="first_message_timeout"
//	dial.refused              meshd_dials_refused_total
//	roster.pushed_refused     meshd_roster_pushes_refused_total
//	knock.sent                meshd_knocks_total                       event="sent"
//	knock.unanswered          meshd_knocks_total                       event="unanswered"
//	knock.received            meshd_knocks_total                       event="received"
//	knock.roster_sent         meshd_knocks_total                       event="roster_sent"
//	adopt.confirmed           meshd_knocks_total                       event="confirmed"
//	adopt.adopted             meshd_knocks_total                       event="adopted"
//	adopt.refused.<reason>    meshd_adopt_refused_total                reason
//	history.serve_no_room     meshd_history_requests_no_room_total
//	link.closed_slow          meshd_link_events_total                  event="closed_slow"
//	link.refused_slow         meshd_link_events_total                  event="refused_slow"
//	link.recv_throttled       meshd_link_receive_throttled_total
//	link.send_queue_full      meshd_link_send_queue_full_total
//	link.rehomed_frames       meshd_link_frames_rehomed_total
//	link.moved                meshd_link_events_total                  event="moved_unix"
//	link.move.<step>          meshd_link_moves_total                   step (asked, agreed, ignored, failed, late, malformed)
//	roster.accepted           meshd_roster_updates_accepted_total
//	roster.rejected.<reason>  meshd_roster_updates_rejected_total      reason
//	roster.pushed             meshd_roster_pushes_total
//	roster.persist_failed     meshd_persist_failures_total             what="roster"
//	policy.accepted           meshd_policy_updates_accepted_total
//	policy.rejected.<reason>  meshd_policy_updates_rejected_total      reason
//	policy.digest_malformed   meshd_policy_digests_malformed_total
//	policy.persist_failed     meshd_persist_failures_total             what="policy"
//	policy.load_failed        meshd_policy_load_failures_total
//	presence.expired          meshd_presence_expired_total
//	presence.changed.<state>  meshd_presence_changes_total             state
//	inbox.subagent_results    meshd_subagent_results_total
//	card.accepted             meshd_cards_accepted_total
//	card.rejected.<reason>    meshd_cards_rejected_total               reason
//	card.persist_failed       meshd_persist_failures_total             what="card"
//	card.paced                meshd_cards_held_back_total
//	card.load_failed          meshd_card_load_failures_total
//	rekey.member              meshd_key_rotations_total                event="member"
//	rekey.switched            meshd_key_rotations_total                event="switched"
//	rekey.restart_needed      meshd_key_rotations_total                event="restart_needed"
//	mirror.files              meshd_mirror_files_written_total
//	mirror.batches            meshd_mirror_batches_total
//	mirror.failed             meshd_mirror_failures_total              reason="error"
//	mirror.disk_full          meshd_mirror_failures_total              reason="disk_full"
//	mirror.files_failed       meshd_mirror_files_failed_total
//	mirror.retries            meshd_mirror_retries_total
//	mirror.reconciled         meshd_mirror_reconciled_files_total
//	mirror.torn_rewritten     meshd_mirror_torn_files_rewritten_total
//	mirror.reindexed          meshd_mirror_index_lines_restored_total
//	store.compacted           meshd_store_compactions_total            result="ok"
//	store.compact_failed      meshd_store_compactions_total            result="failed"
//	mirror.checkpoints        meshd_mirror_checkpoints_total
//	mirror.sync_failed        meshd_mirror_failures_total              reason="sync"
//	mirror.prune_failed       meshd_mirror_failures_total              reason="prune"
//	mirror.pruned             meshd_mirror_files_pruned_total
//	mirror.paused.<reason>    meshd_mirror_pauses_total                reason
//	mirror.held_back          meshd_mirror_files_held_back_total
//	outbox.picked             meshd_outbox_files_picked_total
//	outbox.recovered          meshd_outbox_files_recovered_total
//	outbox.files_sent         meshd_outbox_files_sent_total
//	outbox.files_failed       meshd_outbox_files_failed_total
//	outbox.failed.<reason>    meshd_outbox_failures_total              reason
//	outbox.malformed          meshd_outbox_files_malformed_total
//	blob.<event>              meshd_attachment_events_total            event
//	outbox.sent               meshd_outbox_sends_total                 result="sent"
//	outbox.refused            meshd_outbox_sends_total                 result="refused"
//	outbox.read               meshd_outbox_items_read_total
//	claim.taken               meshd_inbox_claims_total                 result="taken"
//	claim.conflict            meshd_inbox_claims_total                 result="conflict"
//	claim.released            meshd_inbox_claims_total                 result="released"
//	mirror.moved_read         meshd_mirror_files_moved_read_total
//	mirror.read_move_failed   meshd_mirror_failures_total              reason="read_move"
//	retention.runs            meshd_retention_runs_total
//	retention.failed          meshd_retention_failures_total
//	retention.pruned.<what>   meshd_retention_pruned_total             what
//	retention.expired.queued  meshd_retention_pruned_total             what="queued"
//	sync.rounds               meshd_sync_rounds_total
//	sync.envelopes            meshd_sync_envelopes_received_total
//	sync.pages                meshd_sync_pages_total
//	sync.already_held         meshd_sync_envelopes_already_held_total
//	sync.requests             meshd_sync_requests_total
//	sync.responses            meshd_sync_responses_total
//	sync.timeouts             meshd_sync_timeouts_total
//	sync.gaps_forgotten       meshd_sync_gaps_forgotten_total
//	sync.late_pages           meshd_sync_late_pages_total
//	sync.resumed              meshd_sync_resumed_total
//	sync.paused               meshd_sync_paused_total
//	sync.stalled              meshd_sync_stalled_total
//	sync.refused.<status>     meshd_sync_refused_total                 status
//	history.served            meshd_history_requests_served_total
//	history.served.envelopes  meshd_history_served_envelopes_total
//	history.serve_failed      meshd_history_serve_failures_total
//	history.serve_paced       meshd_history_serve_paced_total
//	history.refused.<status>  meshd_history_requests_refused_total     status
//	reply.refused             meshd_events_total                       name="reply.refused"
//	reply.sent                meshd_events_total                       name="reply.sent"
//	search.runs               meshd_events_total                       name="search.runs"
//	clock.skew_warned         meshd_events_total                       name="clock.skew_warned"
//	read.refused.ambiguous    meshd_events_total                       name="read.refused.ambiguous"
//	inbox.refused.filter      meshd_events_total                       name="inbox.refused.filter"
//	invite.created            meshd_events_total                       name="invite.created"
//	invite.revoked            meshd_events_total                       name="invite.revoked"
//	invite.used               meshd_events_total                       name="invite.used"
//	invite.awaiting_signatures meshd_events_total                       name="invite.awaiting_signatures"
//	invite.claimed_name_refused meshd_events_total                       name="invite.claimed_name_refused"
//	peers.updates             meshd_events_total                       name="peers.updates"
//	peers.resync_asked        meshd_events_total                       name="peers.resync_asked"
//	peers.digest_mismatch     meshd_events_total                       name="peers.digest_mismatch"
//	roster.self_not_member    meshd_events_total                       name="roster.self_not_member"
//	mirror.reconciled_sent    meshd_events_total                       name="mirror.reconciled_sent"
//	respond.refused.twice     meshd_events_total                       name="respond.refused.twice"
//	link.recv_throttled_ms    meshd_events_total                       name="link.recv_throttled_ms"
//	link.recv_credited_bytes  meshd_events_total                       name="link.recv_credited_bytes"
//	inbox.subagent_refused    meshd_events_total                       name="inbox.subagent_refused"
//	anything else             meshd_events_total                       name="<dotted name>"
//
// Two names that land on the same series are summed. handshake.accepted
// and handshake.failed are the listeners' tallies of inbound handshakes;
// handshake.rejected.* counts admission refusals in both directions, so
// an inbound refusal is also a failed handshake.
//
// # Gauges read from the node's state
//
//	family                            labels               source
//	meshd_links                       network, direction   [status.Reporter.LinkCounts]; tcp and unix, inbound and outbound always present
//	meshd_queue_length                queue                [status.Reporter.QueueDepths]: rx_commit, mirror, link_send (all links summed)
//	meshd_queue_capacity              queue                [status.Reporter.QueueDepths]
//	meshd_history_db_bytes                                 [status.Reporter.HistoryStats] FileSize
//	meshd_history_envelopes                                [status.Reporter.HistoryStats] Envelopes
//	meshd_history_queued_envelopes                         [status.Reporter.HistoryStats] Queues, summed over peers
//	meshd_presence_members            state                [status.Reporter.PresenceCounts]; online, away, offline always present
//	meshd_roster_version                                   [node.Node.Roster]
//	meshd_roster_members                                   [node.Node.Roster]
//	meshd_uptime_seconds                                   [status.Reporter.Started]
package promexport

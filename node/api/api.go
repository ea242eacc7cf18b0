// Package api defines the control API that meshd serves on the owner-only
// Unix socket in its home directory (HTTP/JSON, so `curl --unix-socket`
// works), and a small client for it that meshctl uses.
//
// Endpoints (all JSON; errors are {"error": "...", "hint": "..."} with a
// 4xx or 5xx status):
//
//	GET  /v1/status   this node, its org, roster version, listeners, counters
//	GET  /v1/peers    linked peers
//	GET  /v1/roster   the current roster, summarised
//	POST /v1/roster   publish a signed roster (body: its CBOR bytes)
package api

import (
	"time"

	"github.com/meshd/meshd/proto"
)

// Status is the answer to GET /v1/status.
type Status struct {
	Key           proto.PubKey      `json:"key"`
	Fingerprint   string            `json:"fingerprint"`
	NodeID        string            `json:"node_id"`
	Name          string            `json:"name,omitempty"`
	Role          string            `json:"role"`
	Org           string            `json:"org"`
	RosterVersion uint64            `json:"roster_version"`
	RosterMembers int               `json:"roster_members"`
	Member        bool              `json:"member"` // false: this node is not in its roster (removed by the roster named by RosterVersion)
	Listen        []string          `json:"listen"`
	Advertised    []string          `json:"advertised"`
	Home          string            `json:"home"`
	Started       time.Time         `json:"started"`
	UptimeSeconds float64           `json:"uptime_seconds"`
	Links         int               `json:"links"`
	MDNS          bool              `json:"mdns"`
	Seeds         []string          `json:"seeds,omitempty"`
	Counters      map[string]uint64 `json:"counters"`

	// LinksByNet counts the links by transport ("tcp", "unix"): a link
	// to a peer on this host moves to its Unix socket (PROTOCOL.md §14.12).
	LinksByNet map[string]int `json:"links_by_network"`

	// ClockSkewSeconds is the largest recent clock difference to a
	// peer (its clock minus ours), when it exceeds 10 s; else omitted.
	ClockSkewSeconds float64 `json:"clock_skew_seconds,omitempty"`

	// Removed is set when this node applied a roster update that removed
	// it: every member refuses it, so it redials each member and seed
	// only every RetrySeconds.
	Removed      bool    `json:"removed,omitempty"`
	RetrySeconds float64 `json:"retry_seconds,omitempty"`

	// Mailbox is the mailbox mirror's use of its limits.
	Mailbox *MailboxStatus `json:"mailbox,omitempty"`
	// QuotaRefused lists the members whose channel Messages this node
	// refused past their channel quota since it started, most first.
	QuotaRefused []QuotaRefusal `json:"quota_refused,omitempty"`
	// Blocked lists the members this node blocks (meshctl block).
	Blocked []Block `json:"blocked,omitempty"`
}

// MailboxStatus is the mailbox mirror's files against its limits. A limit
// of 0 or less is off; FreeBytes is -1 when not measured.
type MailboxStatus struct {
	Files        int   `json:"files"`
	Bytes        int64 `json:"bytes"`
	MaxFiles     int   `json:"max_files"`
	MaxBytes     int64 `json:"max_bytes"`
	FreeBytes    int64 `json:"free_bytes"`
	MinFreeBytes int64 `json:"min_free_bytes"`
	// Paused is why the mirror is not writing ("files", "bytes",
	// "free_space"), empty while it writes.
	Paused      string    `json:"paused,omitempty"`
	PausedSince time.Time `json:"paused_since,omitzero"`
}

// QuotaRefusal is one member's channel Messages refused by its quota.
type QuotaRefusal struct {
	Key         proto.PubKey `json:"key"`
	Fingerprint string       `json:"fingerprint"`
	Name        string       `json:"name,omitempty"`
	Refused     uint64       `json:"refused"`
}

// Peer is one linked peer in GET /v1/peers.
type Peer struct {
	Key         proto.PubKey `json:"key"`
	Fingerprint string       `json:"fingerprint"`
	// Name is the peer's roster name; ClaimedName the name its handshake
	// gave when that differs (a peer chooses it: never take it for a
	// roster name). NameAmbiguous: another member's name looks like Name.
	Name           string    `json:"name,omitempty"`
	ClaimedName    string    `json:"claimed_name,omitempty"`
	NameAmbiguous  bool      `json:"name_ambiguous,omitempty"`
	Role           string    `json:"role"`
	Address        string    `json:"address"`
	Network        string    `json:"network"`
	Direction      string    `json:"direction"`
	Established    time.Time `json:"established"`
	LinkAgeSeconds float64   `json:"link_age_seconds"`
	LastSeen       time.Time `json:"last_seen"`
	RosterVersion  uint64    `json:"roster_version"`
	Listen         []string  `json:"listen,omitempty"`
}

// Peers is the answer to GET /v1/peers.
type Peers struct {
	Peers []Peer `json:"peers"`
}

// Member is one roster member in a [Roster].
type Member struct {
	Key         proto.PubKey `json:"key"`
	Fingerprint string       `json:"fingerprint"`
	Name        string       `json:"name,omitempty"`
	Role        string       `json:"role"`
	Archive     bool         `json:"archive,omitempty"`
}

// Roster summarises a roster (GET and POST /v1/roster).
type Roster struct {
	Org       string         `json:"org"`
	Version   uint64         `json:"version"`
	Timestamp time.Time      `json:"timestamp"`
	Quorum    int            `json:"quorum"`
	Members   []Member       `json:"members"`
	Signers   []proto.PubKey `json:"signers"`
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/meshd/meshd/node"
	"github.com/meshd/meshd/transport"
	"github.com/pelletier/go-toml/v2"
)

// fileConfig holds meshd's configuration once resolved: the values of the
// keys of [configKeys], where each key is registered. Its fields carry no
// names; the table gives them. Precedence: file < env < flags.
type fileConfig struct {
	Home          string
	Name          string
	Org           string
	Roster        string
	Listen        []string
	NoUnix        bool
	Seeds         []string
	NoMDNS        bool
	MDNSInterface string
	// MailboxGroup names a group whose members may read the mailbox
	// (folders 0750 setgid, files 0640); empty: the owner alone.
	MailboxGroup string
	PresenceTTL  string
	// PresenceAwayAfter and PresenceOfflineAfter: with no local client
	// seen for this long, the agent is announced away, then offline.
	PresenceAwayAfter    string
	PresenceOfflineAfter string
	// ReplyDepthMax is the deepest reply this node sends (0: no limit).
	ReplyDepthMax int
	// Link timers: a link idle for Keepalive sends a ping; one that hears
	// nothing for IdleTimeout is closed and redialled.
	Keepalive   string
	IdleTimeout string
	// PeerExchangeInterval: the period of the peer-exchange round, which
	// also re-sends what a linked peer has not acknowledged.
	PeerExchangeInterval string
	// Unauthenticated connections: at most HandshakesPerSource in
	// handshake per remote IPv4 address or IPv6 /64, at most MaxHandshakes in all.
	HandshakesPerSource int
	MaxHandshakes       int
	// Per-link limits: the bytes a link's send queue holds, and the
	// bytes a second it reads from its peer (0: no limit).
	LinkSendQueueMiB int
	LinkRecvRateMiB  int
	// History: how long an archive node keeps channel history at least,
	// how often retention runs, how many peers a catch-up round asks.
	ArchiveRetention  string
	RetentionInterval string
	SyncPeers         int
	// SyncTimeout bounds the wait for one history page before a round
	// moves on (a later answer is still used).
	SyncTimeout string
	// CompactAtStartMiB: a history store of at least this many MiB that is
	// at least half free pages is compacted at start; 0 never.
	CompactAtStartMiB int
	// SenderStoreMiB and SenderStoreEnvelopes bound the DMs, Requests
	// and Responses one member may have stored here.
	SenderStoreMiB       int
	SenderStoreEnvelopes int
	// ChannelSenderRate (a minute), ChannelSenderBurst and
	// ChannelSenderMiBPerHour bound the channel Messages one member may
	// have this node take.
	ChannelSenderRate       int
	ChannelSenderBurst      int
	ChannelSenderMiBPerHour int
	// MailboxMaxFiles, MailboxMaxMiB and MailboxMinFreeMiB: the mailbox
	// mirror pauses past them.
	MailboxMaxFiles   int
	MailboxMaxMiB     int
	MailboxMinFreeMiB int
	// AttachmentMaxMiB bounds the attachments this node sends and
	// fetches; AttachmentEagerMaxMiB and AttachmentChannelEagerMaxKiB
	// are the sizes fetched as they arrive (DMs, channels).
	AttachmentMaxMiB             int
	AttachmentEagerMaxMiB        int
	AttachmentChannelEagerMaxKiB int
	AttachmentSenderMaxMiB       int
	AttachmentFetchRateMiB       int
	// DeliveryWindow is the life of a DM, Request or Response this node
	// signs (kept and re-sent until acknowledged); EnvelopeTTL that of
	// every other envelope it signs.
	DeliveryWindow string
	EnvelopeTTL    string
	LogLevel       string
	LogFormat      string
	// HTTP is the address of the read-only status page (HOST:PORT, empty:
	// none); beyond loopback only with HTTPAllowRemote.
	HTTP            string
	HTTPAllowRemote bool
	// Metrics is the address of the Prometheus endpoint (HOST:PORT,
	// empty: none); beyond loopback only with MetricsAllowRemote.
	Metrics            string
	MetricsAllowRemote bool
}

// DefaultListen is the TCP address a node listens on when none is given.
const DefaultListen = "tcp://0.0.0.0:7437"

// configKey is one configuration key: everything the config file, the
// environment, the flags, --print-config and docs/meshd.toml know of it.
type configKey struct {
	key  string // in the TOML file and --print-config; the env var is MESH_ and the key in capitals
	flag string // the flag's name if not the key with '-' for '_'
	// field points to the key's value in a config: a *string, *[]string,
	// *bool or *int. A list is an array in the file, comma-separated in
	// the environment, and a repeated flag.
	field func(c *fileConfig) any
	// fromNode reads the key's value, in the field's type and the key's
	// units, from a node.Config. It gives the key's default, read from
	// node.DefaultConfig, so that a default is written once; and apply
	// undoes it: fromNode of what apply set is the value (a test checks
	// both). nil for keys the node has no default for: they give def.
	fromNode func(nc *node.Config) any
	def      any    // the default, of the field's type (set from fromNode when there is one)
	help     string // the flag's help
	// defText says what an empty default means, for the flag's help.
	defText string
	// apply sets the key's part of node.Config, checking its value; nil
	// for keys that main reads itself (the logger, the status page, the
	// metrics endpoint). Keys apply in table order.
	apply func(c *fileConfig, nc *node.Config) error
}

// configKeys is the table of meshd's configuration keys, in the order of
// docs/meshd.toml and --print-config. To add a key, add a field to
// fileConfig and one entry here, whose fromNode reads its default from
// node.DefaultConfig; the file, the environment, the flags and
// --print-config follow, and cmd/meshd's tests ask for its documentation
// in docs/meshd.toml and check that it round-trips into node.Config.
//
// A single table rather than peterbourgon/ff: ff takes a config file's
// keys to be the flags' names, so the file's no_unix and seeds (flags
// --no-unix and --seed) would break every existing meshd.toml; it names
// no line for an unknown key, and applying the values to node.Config and
// --print-config would still be ours to write.
var configKeys = []configKey{
	{key: "home", field: func(c *fileConfig) any { return &c.Home }, fromNode: func(nc *node.Config) any { return nc.Home },
		help: "home directory", defText: "~/.meshd",
		apply: func(c *fileConfig, nc *node.Config) error { nc.Home = c.Home; return nil }},
	{key: "name", field: func(c *fileConfig) any { return &c.Name }, fromNode: func(nc *node.Config) any { return nc.Name },
		help:  "display name used when creating the identity or a one-node org",
		apply: func(c *fileConfig, nc *node.Config) error { nc.Name = c.Name; return nil }},
	{key: "org", field: func(c *fileConfig) any { return &c.Org }, fromNode: func(nc *node.Config) any { return nc.Org },
		help: "org id for a new one-node org", defText: "org-<fingerprint>",
		apply: func(c *fileConfig, nc *node.Config) error { nc.Org = c.Org; return nil }},
	{key: "roster", field: func(c *fileConfig) any { return &c.Roster }, fromNode: func(nc *node.Config) any { return nc.RosterFile },
		help:  "pinned roster file",
		apply: func(c *fileConfig, nc *node.Config) error { nc.RosterFile = c.Roster; return nil }},
	{key: "listen", field: func(c *fileConfig) any { return &c.Listen }, def: []string{DefaultListen},
		help: "listen address tcp://HOST:PORT or unix:///PATH",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.Listen, err = parseAddrs("--listen", c.Listen)
			return err
		}},
	{key: "no_unix", field: func(c *fileConfig) any { return &c.NoUnix }, fromNode: func(nc *node.Config) any { return nc.NoUnixListener },
		help:  "do not listen on the link socket in the home",
		apply: func(c *fileConfig, nc *node.Config) error { nc.NoUnixListener = c.NoUnix; return nil }},
	{key: "seeds", flag: "seed", field: func(c *fileConfig) any { return &c.Seeds }, fromNode: func(nc *node.Config) any { return addrTexts(nc.Seeds) },
		help: "static seed peer tcp://HOST:PORT or unix:///PATH",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.Seeds, err = parseAddrs("--seed", c.Seeds)
			return err
		}},
	{key: "no_mdns", field: func(c *fileConfig) any { return &c.NoMDNS }, fromNode: func(nc *node.Config) any { return !nc.MDNS },
		help:  "disable mDNS discovery",
		apply: func(c *fileConfig, nc *node.Config) error { nc.MDNS = !c.NoMDNS; return nil }},
	{key: "mdns_interface", field: func(c *fileConfig) any { return &c.MDNSInterface }, fromNode: func(nc *node.Config) any { return nc.MDNSInterface },
		help: "network interface for mDNS", defText: "the first multicast interface",
		apply: func(c *fileConfig, nc *node.Config) error { nc.MDNSInterface = c.MDNSInterface; return nil }},
	{key: "mailbox_group", field: func(c *fileConfig) any { return &c.MailboxGroup }, def: "",
		help: "group (name or gid) whose members may read the mailbox, for an agent running as another user", defText: "owner only",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.MailboxAccess, err = mailboxAccess(c.MailboxGroup)
			return err
		}},
	{key: "presence_ttl", field: func(c *fileConfig) any { return &c.PresenceTTL }, fromNode: func(nc *node.Config) any { return durText(nc.PresenceTTL) },
		help: "silence after which a peer is shown offline",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.PresenceTTL, err = parseDuration("presence ttl", c.PresenceTTL, time.Second, "at least 1s, like 5m")
			return err
		}},
	{key: "presence_away_after", field: func(c *fileConfig) any { return &c.PresenceAwayAfter }, fromNode: func(nc *node.Config) any { return durText(nc.PresenceAwayAfter) },
		help: "announce the agent away once no local client has called meshd for this long (0: never)",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.PresenceAwayAfter, err = parseDuration("presence away after", c.PresenceAwayAfter, 0, "0 (never) or more, like 10m")
			return err
		}},
	{key: "presence_offline_after", field: func(c *fileConfig) any { return &c.PresenceOfflineAfter }, fromNode: func(nc *node.Config) any { return durText(nc.PresenceOfflineAfter) },
		help: "announce the agent offline once no local client has called meshd for this long (0: never)",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.PresenceOfflineAfter, err = parseDuration("presence offline after", c.PresenceOfflineAfter, 0, "0 (never) or more, like 1h")
			return err
		}},
	{key: "reply_depth_max", field: func(c *fileConfig) any { return &c.ReplyDepthMax }, fromNode: func(nc *node.Config) any { return nc.MaxReplyDepth },
		help: "the deepest reply (an answer to an answer, along in_reply_to) this node sends; 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.ReplyDepthMax < 0 || c.ReplyDepthMax > 1000 {
				return fmt.Errorf("reply depth max %d: want 0 (no limit) to 1000", c.ReplyDepthMax)
			}
			nc.MaxReplyDepth = c.ReplyDepthMax
			return nil
		}},
	{key: "keepalive", field: func(c *fileConfig) any { return &c.Keepalive }, fromNode: func(nc *node.Config) any { return durText(nc.Transport.KeepaliveInterval) },
		help: "ping a link after this long without receiving on it",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.Transport.KeepaliveInterval, err = parseDuration("keepalive", c.Keepalive, 100*time.Millisecond, "at least 100ms, like 5s")
			return err
		}},
	{key: "idle_timeout", field: func(c *fileConfig) any { return &c.IdleTimeout }, fromNode: func(nc *node.Config) any { return durText(nc.Transport.IdleTimeout) },
		help: "close a link that has heard nothing for this long, at least twice --keepalive",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			ka := nc.Transport.KeepaliveInterval // keepalive applies first
			nc.Transport.IdleTimeout, err = parseDuration("idle timeout", c.IdleTimeout, 2*ka,
				fmt.Sprintf("at least twice the keepalive (%v), like 45s", ka))
			return err
		}},
	{key: "peer_exchange_interval", field: func(c *fileConfig) any { return &c.PeerExchangeInterval }, fromNode: func(nc *node.Config) any { return durText(nc.PeerExchangeInterval) },
		help: "how often linked peers exchange their peer lists and this node re-sends what a linked peer has not acknowledged",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.PeerExchangeInterval, err = parseDuration("peer exchange interval", c.PeerExchangeInterval, time.Second, "at least 1s, like 30s")
			return err
		}},
	{key: "handshakes_per_source", field: func(c *fileConfig) any { return &c.HandshakesPerSource }, fromNode: func(nc *node.Config) any { return nc.Transport.MaxHandshakesPerSource },
		help: "most unauthenticated connections one remote IPv4 address or IPv6 /64 may have in handshake",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.HandshakesPerSource < 1 || c.HandshakesPerSource > 1024 {
				return fmt.Errorf("handshakes per source %d: want 1 to 1024", c.HandshakesPerSource)
			}
			nc.Transport.MaxHandshakesPerSource = c.HandshakesPerSource
			return nil
		}},
	{key: "max_handshakes", field: func(c *fileConfig) any { return &c.MaxHandshakes }, fromNode: func(nc *node.Config) any { return nc.Transport.MaxHandshakes },
		help: "most unauthenticated connections held in all; the oldest idle one is closed to make room",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.MaxHandshakes < 1 || c.MaxHandshakes > 65536 {
				return fmt.Errorf("max handshakes %d: want 1 to 65536", c.MaxHandshakes)
			}
			nc.Transport.MaxHandshakes = c.MaxHandshakes
			return nil
		}},
	{key: "link_send_queue_mib", field: func(c *fileConfig) any { return &c.LinkSendQueueMiB }, fromNode: func(nc *node.Config) any { return nc.Transport.SendQueueBytes >> 20 },
		help: "MiB of frames a link's send queue holds; a peer that does not read costs at most this",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.LinkSendQueueMiB < 1 || c.LinkSendQueueMiB > 1024 {
				return fmt.Errorf("link send queue %d MiB: want 1 to 1024", c.LinkSendQueueMiB)
			}
			nc.Transport.SendQueueBytes = c.LinkSendQueueMiB << 20
			return nil
		}},
	{key: "link_recv_rate_mib", field: func(c *fileConfig) any { return &c.LinkRecvRateMiB }, fromNode: func(nc *node.Config) any { return mibOrOff(int64(nc.Transport.RecvRate)) },
		help: "MiB a second a link reads from its peer; past it the link stops reading until the rate allows; 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			switch {
			case c.LinkRecvRateMiB < 0:
				return fmt.Errorf("link receive rate %d MiB/s: want 0 (no limit) or more", c.LinkRecvRateMiB)
			case c.LinkRecvRateMiB == 0:
				nc.Transport.RecvRate = -1
			default:
				nc.Transport.RecvRate = float64(c.LinkRecvRateMiB) * (1 << 20)
			}
			return nil
		}},
	{key: "archive_retention", field: func(c *fileConfig) any { return &c.ArchiveRetention }, fromNode: func(nc *node.Config) any { return durText(nc.ArchiveRetention) },
		help: "how long an archive node (roster archive flag) keeps channel history at least",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.ArchiveRetention, err = parseDuration("archive retention", c.ArchiveRetention, time.Hour, "at least 1h, like 720h")
			return err
		}},
	{key: "retention_interval", field: func(c *fileConfig) any { return &c.RetentionInterval }, fromNode: func(nc *node.Config) any { return durText(nc.RetentionInterval) },
		help: "how often history retention runs",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.RetentionInterval, err = parseDuration("retention interval", c.RetentionInterval, time.Second, "at least 1s, like 1m")
			return err
		}},
	{key: "sync_peers", field: func(c *fileConfig) any { return &c.SyncPeers }, fromNode: func(nc *node.Config) any { return nc.SyncPeers },
		help: "how many linked readers a history catch-up asks per channel",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.SyncPeers < 1 || c.SyncPeers > 16 {
				return fmt.Errorf("sync peers %d: want 1 to 16", c.SyncPeers)
			}
			nc.SyncPeers = c.SyncPeers
			return nil
		}},
	{key: "sync_timeout", field: func(c *fileConfig) any { return &c.SyncTimeout }, fromNode: func(nc *node.Config) any { return durText(nc.SyncTimeout) },
		help: "how long a history catch-up waits for a page before it asks the next peer; a later page is still used",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.SyncTimeout, err = parseDuration("sync timeout", c.SyncTimeout, time.Millisecond, "at least 1ms, like 10s")
			return err
		}},
	{key: "compact_at_start_mib", field: func(c *fileConfig) any { return &c.CompactAtStartMiB }, fromNode: func(nc *node.Config) any { return mibOrOff(nc.CompactAtStart) },
		help: "compact a history store of at least this many MiB that is half free pages at start; 0 never",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.CompactAtStartMiB < 0 {
				return fmt.Errorf("compact at start %d MiB: want 0 (never) or more", c.CompactAtStartMiB)
			}
			nc.CompactAtStart = int64(c.CompactAtStartMiB) << 20
			return nil
		}},
	{key: "sender_store_mib", field: func(c *fileConfig) any { return &c.SenderStoreMiB }, fromNode: func(nc *node.Config) any { return int(nc.SenderStoreBytes >> 20) },
		help: "MiB of DMs, requests and responses one member may have stored here; more are refused unacknowledged (drop.quota) until retention makes room",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.SenderStoreMiB < 1 || c.SenderStoreMiB > 1<<20 {
				return fmt.Errorf("sender store %d MiB: want 1 to 1048576", c.SenderStoreMiB)
			}
			nc.SenderStoreBytes = int64(c.SenderStoreMiB) << 20
			return nil
		}},
	{key: "sender_store_envelopes", field: func(c *fileConfig) any { return &c.SenderStoreEnvelopes }, fromNode: func(nc *node.Config) any { return nc.SenderStoreEnvelopes },
		help: "DMs, requests and responses one member may have stored here; more are refused unacknowledged (drop.quota)",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.SenderStoreEnvelopes < 1 {
				return fmt.Errorf("sender store envelopes %d: want 1 or more", c.SenderStoreEnvelopes)
			}
			nc.SenderStoreEnvelopes = c.SenderStoreEnvelopes
			return nil
		}},
	{key: "channel_sender_rate", field: func(c *fileConfig) any { return &c.ChannelSenderRate }, fromNode: func(nc *node.Config) any { return max(nc.ChannelSenderRate, 0) },
		help: "channel messages a minute one member may have this node take, after a burst of channel_sender_burst; more are refused (drop.quota); 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			switch {
			case c.ChannelSenderRate < 0:
				return fmt.Errorf("channel sender rate %d a minute: want 0 (no limit) or more", c.ChannelSenderRate)
			case c.ChannelSenderRate == 0:
				nc.ChannelSenderRate = -1
			default:
				nc.ChannelSenderRate = c.ChannelSenderRate
			}
			return nil
		}},
	{key: "channel_sender_burst", field: func(c *fileConfig) any { return &c.ChannelSenderBurst }, fromNode: func(nc *node.Config) any { return nc.ChannelSenderBurst },
		help: "channel messages one member may send this node at once (five times as many by history catch-up) before channel_sender_rate holds it",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.ChannelSenderBurst < 1 {
				return fmt.Errorf("channel sender burst %d: want 1 or more", c.ChannelSenderBurst)
			}
			nc.ChannelSenderBurst = c.ChannelSenderBurst
			return nil
		}},
	{key: "channel_sender_mib_per_hour", field: func(c *fileConfig) any { return &c.ChannelSenderMiBPerHour }, fromNode: func(nc *node.Config) any { return mibOrOff(nc.ChannelSenderBytesPerHour) },
		help: "MiB of channel messages an hour one member may have this node take (and as many at once); more are refused (drop.quota); 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			switch {
			case c.ChannelSenderMiBPerHour < 0 || c.ChannelSenderMiBPerHour > 1<<20:
				return fmt.Errorf("channel sender budget %d MiB an hour: want 0 (no limit) to 1048576", c.ChannelSenderMiBPerHour)
			case c.ChannelSenderMiBPerHour == 0:
				nc.ChannelSenderBytesPerHour = -1
			default:
				nc.ChannelSenderBytesPerHour = int64(c.ChannelSenderMiBPerHour) << 20
			}
			return nil
		}},
	{key: "mailbox_max_files", field: func(c *fileConfig) any { return &c.MailboxMaxFiles }, fromNode: func(nc *node.Config) any { return max(nc.MailboxMaxFiles, 0) },
		help: "inbox files the mailbox holds; past it the mirror pauses until retention or an agent removes some; 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.MailboxMaxFiles < 0 {
				return fmt.Errorf("mailbox max files %d: want 0 (no limit) or more", c.MailboxMaxFiles)
			}
			nc.MailboxMaxFiles = c.MailboxMaxFiles
			if c.MailboxMaxFiles == 0 {
				nc.MailboxMaxFiles = -1
			}
			return nil
		}},
	{key: "mailbox_max_mib", field: func(c *fileConfig) any { return &c.MailboxMaxMiB }, fromNode: func(nc *node.Config) any { return mibOrOff(nc.MailboxMaxBytes) },
		help: "MiB of inbox files the mailbox holds; past it the mirror pauses; 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.MailboxMaxMiB < 0 || c.MailboxMaxMiB > 1<<30 {
				return fmt.Errorf("mailbox max %d MiB: want 0 (no limit) to 1073741824", c.MailboxMaxMiB)
			}
			nc.MailboxMaxBytes = int64(c.MailboxMaxMiB) << 20
			if c.MailboxMaxMiB == 0 {
				nc.MailboxMaxBytes = -1
			}
			return nil
		}},
	{key: "mailbox_min_free_mib", field: func(c *fileConfig) any { return &c.MailboxMinFreeMiB }, fromNode: func(nc *node.Config) any { return mibOrOff(nc.MailboxMinFree) },
		help: "MiB free on the mailbox's file system below which the mirror pauses, and resumes once there is more; 0 never",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.MailboxMinFreeMiB < 0 || c.MailboxMinFreeMiB > 1<<30 {
				return fmt.Errorf("mailbox min free %d MiB: want 0 (never pause) to 1073741824", c.MailboxMinFreeMiB)
			}
			nc.MailboxMinFree = int64(c.MailboxMinFreeMiB) << 20
			if c.MailboxMinFreeMiB == 0 {
				nc.MailboxMinFree = -1
			}
			return nil
		}},
	{key: "attachment_max_mib", field: func(c *fileConfig) any { return &c.AttachmentMaxMiB }, fromNode: func(nc *node.Config) any { return int(nc.AttachmentMax >> 20) },
		help: "MiB of the largest attachment this node sends or fetches",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.AttachmentMaxMiB < 1 || c.AttachmentMaxMiB > 1024 {
				return fmt.Errorf("attachment max %d MiB: want 1 to 1024 (the protocol's limit)", c.AttachmentMaxMiB)
			}
			nc.AttachmentMax = int64(c.AttachmentMaxMiB) << 20
			return nil
		}},
	{key: "attachment_eager_max_mib", field: func(c *fileConfig) any { return &c.AttachmentEagerMaxMiB }, fromNode: func(nc *node.Config) any { return int(nc.AttachmentEagerMax >> 20) },
		help: "MiB up to which a DM's, request's or response's attachments are fetched as they arrive; larger ones wait for meshctl fetch",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.AttachmentEagerMaxMiB < 1 || c.AttachmentEagerMaxMiB > 1024 {
				return fmt.Errorf("attachment eager max %d MiB: want 1 to 1024", c.AttachmentEagerMaxMiB)
			}
			nc.AttachmentEagerMax = int64(c.AttachmentEagerMaxMiB) << 20
			return nil
		}},
	{key: "attachment_channel_eager_max_kib", field: func(c *fileConfig) any { return &c.AttachmentChannelEagerMaxKiB }, fromNode: func(nc *node.Config) any { return int(nc.AttachmentChannelEagerMax >> 10) },
		help: "KiB below which a channel message's attachments are fetched as they arrive; larger ones wait for meshctl fetch; 0 never",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.AttachmentChannelEagerMaxKiB < 0 || c.AttachmentChannelEagerMaxKiB > 1<<20 {
				return fmt.Errorf("attachment channel eager max %d KiB: want 0 (never) to 1048576", c.AttachmentChannelEagerMaxKiB)
			}
			nc.AttachmentChannelEagerMax = int64(c.AttachmentChannelEagerMaxKiB) << 10
			return nil
		}},
	{key: "attachment_sender_max_mib", field: func(c *fileConfig) any { return &c.AttachmentSenderMaxMiB }, fromNode: func(nc *node.Config) any { return int(nc.AttachmentSenderMax >> 20) },
		help: "MiB of attachments one member's kept messages may list here; a message that would pass it is refused unacknowledged (drop.quota) until retention makes room",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.AttachmentSenderMaxMiB < 1 || c.AttachmentSenderMaxMiB > 1<<20 {
				return fmt.Errorf("attachment sender max %d MiB: want 1 to 1048576", c.AttachmentSenderMaxMiB)
			}
			nc.AttachmentSenderMax = int64(c.AttachmentSenderMaxMiB) << 20
			return nil
		}},
	{key: "attachment_fetch_rate_mib", field: func(c *fileConfig) any { return &c.AttachmentFetchRateMiB }, fromNode: func(nc *node.Config) any { return int(nc.AttachmentFetchRate >> 20) },
		help: "MiB a second of attachment chunks this node asks its peers for, over all fetches; 0 no limit",
		apply: func(c *fileConfig, nc *node.Config) error {
			if c.AttachmentFetchRateMiB < 0 || c.AttachmentFetchRateMiB > 1<<20 {
				return fmt.Errorf("attachment fetch rate %d MiB/s: want 0 (no limit) to 1048576", c.AttachmentFetchRateMiB)
			}
			nc.AttachmentFetchRate = int64(c.AttachmentFetchRateMiB) << 20
			return nil
		}},
	{key: "delivery_window", field: func(c *fileConfig) any { return &c.DeliveryWindow }, fromNode: func(nc *node.Config) any { return durText(nc.OfflineWindow) },
		help: "how long a DM, request or response is kept and re-sent until its recipient acknowledges it; its sender is told if it expires",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.OfflineWindow, err = parseTTL("delivery window", c.DeliveryWindow)
			return err
		}},
	{key: "envelope_ttl", field: func(c *fileConfig) any { return &c.EnvelopeTTL }, fromNode: func(nc *node.Config) any { return durText(nc.EnvelopeTTL) },
		help: "life of the channel messages, presence and history requests this node signs",
		apply: func(c *fileConfig, nc *node.Config) (err error) {
			nc.EnvelopeTTL, err = parseTTL("envelope ttl", c.EnvelopeTTL)
			return err
		}},
	{key: "log_level", field: func(c *fileConfig) any { return &c.LogLevel }, def: "info",
		help: "debug, info, warn or error"}, // the logger: see nodeConfig
	{key: "log_format", field: func(c *fileConfig) any { return &c.LogFormat }, def: "text",
		help: "text or json"},
	{key: "http", field: func(c *fileConfig) any { return &c.HTTP }, def: "",
		help: "serve the read-only status page on HOST:PORT, loopback only; open it with meshctl ui"}, // main serves it
	{key: "http_allow_remote", field: func(c *fileConfig) any { return &c.HTTPAllowRemote }, def: false,
		help: "let --http listen beyond loopback: the token and the messages cross the network in plain HTTP"},
	{key: "metrics", field: func(c *fileConfig) any { return &c.Metrics }, def: "",
		help: "serve Prometheus metrics at http://HOST:PORT/metrics, loopback only"}, // main serves it
	{key: "metrics_allow_remote", field: func(c *fileConfig) any { return &c.MetricsAllowRemote }, def: false,
		help: "let --metrics listen beyond loopback: the endpoint has no authentication"},
}

// Each key that reads its default from the node takes it here.
func init() {
	nd := node.DefaultConfig()
	for i := range configKeys {
		if k := &configKeys[i]; k.fromNode != nil {
			k.def = k.fromNode(&nd)
		}
	}
}

// durText writes d as a config file does: "5m", "720h", "1h30m", "45s".
func durText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// mibOrOff gives bytes in whole MiB, and a limit turned off (negative) as
// 0, as the MiB keys take them.
func mibOrOff(bytes int64) int { return int(max(bytes, 0) >> 20) }

// addrTexts gives addresses as a list key takes them.
func addrTexts(as []transport.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

// envName is the key's environment variable.
func (k *configKey) envName() string { return "MESH_" + strings.ToUpper(k.key) }

// flagName is the key's flag, without dashes.
func (k *configKey) flagName() string {
	if k.flag != "" {
		return k.flag
	}
	return strings.ReplaceAll(k.key, "_", "-")
}

// flagHelp is the flag's help, with its env var and default.
func (k *configKey) flagHelp() string {
	env := "env " + k.envName()
	if _, ok := k.def.([]string); ok {
		env = "repeatable; " + env
	}
	def := k.defText
	if def == "" {
		switch v := k.def.(type) {
		case string:
			def = v
		case []string:
			def = strings.Join(v, ",")
		case int:
			def = strconv.Itoa(v)
		}
	}
	if def == "" {
		return fmt.Sprintf("%s (%s)", k.help, env)
	}
	return fmt.Sprintf("%s (%s; default %s)", k.help, env, def)
}

// setValue stores v, of the field's type, in the key's field of c.
func (k *configKey) setValue(c *fileConfig, v any) {
	reflect.ValueOf(k.field(c)).Elem().Set(reflect.ValueOf(v))
}

// value returns the key's value in c.
func (k *configKey) value(c *fileConfig) any { return reflect.ValueOf(k.field(c)).Elem().Interface() }

func defaultFileConfig() fileConfig {
	var c fileConfig
	for i := range configKeys {
		k := &configKeys[i]
		k.setValue(&c, k.def)
	}
	return c
}

// fileType is the struct the TOML file decodes into: one pointer field a
// key, tagged with its name, so that the decoder refuses unknown keys and
// says which keys the file sets.
var fileType = func() reflect.Type {
	var fields []reflect.StructField
	var c fileConfig
	for i := range configKeys {
		k := &configKeys[i]
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("K%d", i),
			Type: reflect.PointerTo(reflect.TypeOf(k.field(&c)).Elem()),
			Tag:  reflect.StructTag(fmt.Sprintf(`toml:%q json:%q`, k.key, k.key)),
		})
	}
	return reflect.StructOf(fields)
}()

// loadFile reads a TOML config; an unknown key or a value of the wrong
// type is an error naming the key and line (see decodeError).
func loadFile(path string, c *fileConfig) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	file := reflect.New(fileType)
	if err := dec.Decode(file.Interface()); err != nil {
		return decodeError(path, b, err)
	}
	for i := range configKeys {
		if v := file.Elem().Field(i); !v.IsNil() {
			configKeys[i].setValue(c, v.Elem().Interface())
		}
	}
	return nil
}

// applyEnv overrides c from MESH_* variables.
func applyEnv(c *fileConfig, getenv func(string) string) error {
	for i := range configKeys {
		k := &configKeys[i]
		v := getenv(k.envName())
		if v == "" {
			continue
		}
		switch p := k.field(c).(type) {
		case *string:
			*p = v
		case *[]string:
			*p = splitList(v)
		case *bool:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want true or false", k.envName(), v)
			}
			*p = b
		case *int:
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want a number", k.envName(), v)
			}
			*p = n
		}
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// flagValues holds parsed flags: cfg the values of the configuration
// flags that were given, and the flags of meshd itself.
type flagValues struct {
	fs          *flag.FlagSet
	cfg         fileConfig
	configPath  string
	printConfig bool
	showVersion bool
}

func newFlags() *flagValues {
	f := &flagValues{fs: flag.NewFlagSet("meshd", flag.ContinueOnError)}
	fs := f.fs
	for i := range configKeys {
		k := &configKeys[i]
		switch p := k.field(&f.cfg).(type) {
		case *string:
			fs.StringVar(p, k.flagName(), "", k.flagHelp())
		case *[]string:
			fs.Var((*listFlag)(p), k.flagName(), k.flagHelp())
		case *bool:
			fs.BoolVar(p, k.flagName(), false, k.flagHelp())
		case *int:
			fs.IntVar(p, k.flagName(), 0, k.flagHelp())
		default:
			panic(fmt.Sprintf("config key %s: field of type %T", k.key, p))
		}
	}
	fs.StringVar(&f.configPath, "config", "", "TOML config file (env MESH_CONFIG; default <home>/meshd.toml if present)")
	fs.BoolVar(&f.printConfig, "print-config", false, "check the configuration as meshd would, print it as JSON and exit (exit 2, naming the error, if meshd would refuse it)")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	return f
}

// applyFlags overrides c with the flags that were given.
func (f *flagValues) applyFlags(c *fileConfig) {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for i := range configKeys {
		if k := &configKeys[i]; given[k.flagName()] {
			k.setValue(c, k.value(&f.cfg))
		}
	}
}

// printConfig writes c as JSON, one member a key in table order, as
// --print-config does.
func printConfig(c fileConfig) ([]byte, error) {
	out := reflect.New(fileType).Elem()
	for i := range configKeys {
		v := reflect.ValueOf(configKeys[i].field(&c))
		if v.Elem().Kind() == reflect.Slice && v.Elem().IsNil() {
			continue // null, as before: a nil pointer prints as null too
		}
		out.Field(i).Set(v)
	}
	return json.MarshalIndent(out.Interface(), "", "  ")
}

// parseAddrs parses the addresses of a list key.
func parseAddrs(what string, list []string) ([]transport.Addr, error) {
	var out []transport.Addr
	for _, s := range list {
		a, err := transport.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseDuration parses a duration key that must be at least min.
func parseDuration(what, s string, min time.Duration, want string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < min {
		return 0, fmt.Errorf("%s %q: want a duration of %s", what, s, want)
	}
	return d, nil
}

// parseTTL parses the life of envelopes this node signs: whole seconds
// from 1s up to the dedupe horizon (144h), beyond which receivers drop
// them (PROTOCOL §4.3).
func parseTTL(what, v string) (time.Duration, error) {
	d, err := parseDuration(what, v, time.Second, "at least 1s, like 5m")
	if err != nil {
		return 0, err
	}
	if d > 144*time.Hour {
		return 0, fmt.Errorf("%s %s: at most 144h, beyond which receivers drop the envelopes (ttl_too_long)", what, v)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("%s %s: whole seconds, like 90s", what, v)
	}
	return d, nil
}

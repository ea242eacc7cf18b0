package node

import (
	"log/slog"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Config configures a [Node]. It is read-only once passed to [New].
type Config struct {
	// Home is the node's home directory (identity, roster, sockets, lock).
	Home string
	// Name is this node's display name, used when it bootstraps an org.
	Name string
	// RosterFile, if set, is a roster pinned by the operator. It is used
	// when the home holds no roster yet, or when it is a valid update of
	// the one the home holds.
	RosterFile string
	// Org names the one-node org a node bootstraps when it has no roster.
	// Empty means "org-<fingerprint>".
	Org string
	// Listen are extra listen addresses (tcp://host:port, unix:///path).
	Listen []transport.Addr
	// NoUnixListener disables the default link socket in the home.
	NoUnixListener bool
	// Seeds are static peers dialled and redialled for the node's life.
	Seeds []transport.Addr
	// MDNS enables LAN discovery over mDNS.
	MDNS bool
	// MDNSInterface names the interface mDNS uses; empty picks one.
	MDNSInterface string
	// MailboxAccess says who may read the mailbox besides the node's
	// user: nobody (the zero value), or one group (mailbox_group).
	MailboxAccess mailbox.Access
	// OutboxNoNotify leaves the outbox to its periodic scan, without an
	// fsnotify watch: for tests in a synctest bubble, where a goroutine
	// blocked reading the inotify descriptor would hold the clock.
	OutboxNoNotify bool

	// DialBackoffMin and DialBackoffMax bound reconnect backoff. The delay
	// doubles per failure between them and is then drawn from its upper
	// half, so a fleet that restarts together does not redial in lockstep
	// and no wait exceeds DialBackoffMax.
	DialBackoffMin time.Duration
	DialBackoffMax time.Duration
	// DialTimeout bounds one dial including its handshake.
	DialTimeout time.Duration
	// PeerExchangeInterval is how often linked peers are told about the
	// other members we hold links to (the digest of the list, to peers
	// that take changes; the whole list to older ones).
	PeerExchangeInterval time.Duration

	// EnvelopeTTL is the lifetime given to the envelopes we send that are
	// not kept for store-and-forward: channel Messages, Presence and
	// history sync (the protocol's DefaultTTL, 300 s).
	EnvelopeTTL time.Duration
	// OfflineWindow is the store-and-forward window: the lifetime given to
	// every DM, Request and Response we send, linked or not. It is kept
	// and re-sent until the peer acknowledges it, for up to this long,
	// and its sender is told if it expires (PROTOCOL §16.1).
	OfflineWindow time.Duration
	// PresenceTTL is the silence after which a peer is shown offline
	// (300 s, the protocol's presence_ttl). Our own presence is refreshed
	// every third of it.
	PresenceTTL time.Duration
	// PresenceAwayAfter and PresenceOfflineAfter: with no local client
	// (meshctl, the MCP server, the control API) seen for this long, the
	// node announces its agent away, then offline. Zero or less never.
	PresenceAwayAfter    time.Duration
	PresenceOfflineAfter time.Duration
	// MaxReplyDepth is the deepest reply (a message with in_reply_to,
	// counted along its chain) this node sends; zero or less, no limit.
	MaxReplyDepth int
	// CompactAtStart: a history store file of at least this many bytes
	// that is at least half free pages is compacted when the node starts.
	// Zero or less never compacts.
	CompactAtStart int64

	// SyncPeers is how many linked readers of a channel one catch-up round
	// asks for history (the history sync design asks 2–3). Further
	// readers are asked only while gaps remain.
	SyncPeers int
	// SyncTimeout bounds the wait for one HistoryResponse; a peer that
	// does not answer in time is passed over for the next.
	SyncTimeout time.Duration
	// SyncDelay is how long a catch-up round waits after what triggered
	// it (a link coming up, a channel joined), so that the links of a
	// restarting node, which come up together, share one round.
	SyncDelay time.Duration
	// SyncInterval is how often every readable channel gets a catch-up
	// round even without a trigger, to fill gaps left by live envelopes
	// that were lost on the way. Zero or less disables it.
	SyncInterval time.Duration
	// SyncPageMessages and SyncPageBytes are the max_messages and
	// max_bytes of our HistoryRequests: the size of one page.
	SyncPageMessages int
	SyncPageBytes    int
	// HistoryServeConcurrency caps the HistoryRequests of one peer served
	// at once; more are dropped (drop.history_busy).
	HistoryServeConcurrency int
	// HistoryServeRate and HistoryServeBurst bound the history pages served
	// to one peer: a token bucket of HistoryServeBurst pages refilled at
	// HistoryServeRate pages per second. A request beyond it waits for a
	// token, holding one of the peer's concurrent slots.
	HistoryServeRate  float64
	HistoryServeBurst int

	// RetentionInterval is how often the background pruner applies
	// retention: channel policies, DirectRetention, the dedupe set and
	// the store-and-forward queues.
	RetentionInterval time.Duration
	// ArchiveRetention is how long an archive node (roster archive: true)
	// keeps channel history at least, whatever the channel policy says.
	ArchiveRetention time.Duration
	// ArchiveRetentionMessages is how many messages per channel an archive
	// node keeps at least.
	ArchiveRetentionMessages int
	// DirectRetention is how long DMs, Requests and Responses are kept in
	// the store (and the inbox).
	DirectRetention time.Duration
	// SenderStoreBytes and SenderStoreEnvelopes bound the DMs, Requests
	// and Responses one sender may have stored here (and so mirrored in
	// the mailbox), in wire bytes and in envelopes. Past either, its
	// envelopes are refused without an ack (drop.quota): the sender keeps
	// them and re-sends them once retention has made room.
	SenderStoreBytes     int64
	SenderStoreEnvelopes int
	// ChannelSenderRate, ChannelSenderBurst and ChannelSenderBytesPerHour
	// bound the channel Messages one member may have this node take, live
	// or by history sync: a token bucket of ChannelSenderBurst messages
	// refilled at ChannelSenderRate a minute, and one of
	// ChannelSenderBytesPerHour wire bytes refilled over an hour. Past
	// either, its Messages are refused (drop.quota). A negative rate or
	// byte budget turns that bucket off.
	ChannelSenderRate         int
	ChannelSenderBurst        int
	ChannelSenderBytesPerHour int64
	// MailboxMaxFiles and MailboxMaxBytes bound the mailbox's inbox
	// files; MailboxMinFree is the free space (bytes) on its file system
	// below which the mirror pauses. Past any, the mirror stops writing,
	// warns, and writes what it missed once there is room again (see
	// mirrorGate). Negative turns a limit off.
	MailboxMaxFiles int
	MailboxMaxBytes int64
	MailboxMinFree  int64

	// AttachmentMax is the largest attachment this node sends or fetches
	// (bytes). AttachmentEagerMax: a DM's, Request's or Response's
	// attachments up to it are fetched as they arrive;
	// AttachmentChannelEagerMax: a channel Message's attachments below it
	// are. Larger ones are fetched on demand (meshctl fetch).
	AttachmentMax             int64
	AttachmentEagerMax        int64
	AttachmentChannelEagerMax int64
	// AttachmentSenderMax bounds the bytes of attachments (each at most
	// AttachmentMax) that one sender's kept envelopes in the inbox may
	// list; an envelope that would pass it is refused at commit
	// (drop.quota, blob.quota) until retention removes older ones.
	AttachmentSenderMax int64
	// AttachmentFetchRate bounds the bytes a second this node asks its
	// peers for as attachment chunks, over all fetches; 0 no limit.
	AttachmentFetchRate int64

	// Transport holds link settings; Identity, Org, Admit and Payload are
	// filled in by the node.
	Transport transport.Config

	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, each chosen for a LAN fleet.
func DefaultConfig() Config {
	return Config{
		MDNS: true,
		// 250 ms first retry: a peer that restarts is back within a second.
		DialBackoffMin: 250 * time.Millisecond,
		// 5 s cap: a member that comes back (restart, healed partition)
		// is relinked and resynced within seconds; an absent LAN peer
		// costs one connection attempt per 2.5–5 s.
		DialBackoffMax: 5 * time.Second,
		// 5 s: a handshake is under 1 ms on a LAN; a dial this slow is to a
		// host that is gone or cut off, and the next try comes soon.
		DialTimeout: 5 * time.Second,
		// 30 s: new members spread within one interval of any link.
		PeerExchangeInterval: 30 * time.Second,
		EnvelopeTTL:          proto.DefaultTTL * time.Second,
		// 24 h: an agent's host that is down for a night still gets its DMs.
		OfflineWindow: 24 * time.Hour,
		PresenceTTL:   presence.DefaultTTL,
		// 10 min and 1 h: a model turn (or a test run it waits for) rarely
		// keeps an agent from meshd longer than ten minutes; an hour
		// without any call means nobody is there.
		PresenceAwayAfter:    10 * time.Minute,
		PresenceOfflineAfter: time.Hour,
		// 16: a conversation rarely runs to sixteen answers to answers,
		// while two loops that answer each other stop within seconds.
		MaxReplyDepth: 16,
		// 64 MiB: below it a compaction saves little; above it, a file
		// that is half free pages wastes disk and maps dead pages.
		CompactAtStart: 64 << 20,
		// 3: the upper end of the design's 2–3 peers; a message is missed only
		// when three peers were all away when it was sent.
		SyncPeers: 3,
		// 10 s: a 1 MiB page is served in milliseconds on a LAN; a peer
		// silent this long is gone or overloaded, so ask the next.
		SyncTimeout: 10 * time.Second,
		// 200 ms: a restarting node links to its peers within a fraction
		// of a second, and one round then serves all of them.
		SyncDelay: 200 * time.Millisecond,
		// 5 min: gaps from lost live envelopes are filled within minutes,
		// while a caught-up round costs only SyncPeers small exchanges
		// per channel.
		SyncInterval: 5 * time.Minute,
		// 100 messages and 1 MiB per page: the protocol's default
		// max_messages and its max_bytes cap.
		SyncPageMessages: proto.DefaultHistoryMessages,
		SyncPageBytes:    proto.MaxHistoryBytes,
		// 2: a requester pages through one channel at a time and waits
		// for each answer, so it needs one slot; the second is slack. A
		// peer firing requests in parallel cannot pin our cores.
		HistoryServeConcurrency: 2,
		// 20 pages/s after a burst of 200: a full default channel (10,000
		// messages, 100 pages) is served to a rejoining peer at once,
		// while a peer asking in a loop reads at most 20 pages per second.
		HistoryServeRate:  20,
		HistoryServeBurst: 200,
		// 1 min: history outlives its retention by at most a minute, and
		// a pass with nothing due costs a few index seeks.
		RetentionInterval: time.Minute,
		// 30 days: the design's archive nodes keep 30–90 days; the low end
		// keeps busy channels within the store's 1 GiB quota.
		ArchiveRetention: 30 * 24 * time.Hour,
		// 300,000: 30 days of a channel at 10,000 messages a day, about
		// 300 MiB of 1 KiB messages, within the store's quota.
		ArchiveRetentionMessages: 300_000,
		// 72 h: DMs, Requests and Responses are kept as long as channel
		// history is by default (the protocol's DefaultRetentionHours).
		DirectRetention: 72 * time.Hour,
		// 256 MiB and 50,000 envelopes: a quarter of the store's 1 GiB, so
		// one member flooding DMs cannot fill it, and far above what an
		// agent sends in the 72 h DMs are kept.
		SenderStoreBytes:     history.DefaultConfig().MaxSenderBytes,
		SenderStoreEnvelopes: history.DefaultConfig().MaxSenderEnvelopes,
		// 600 a minute after a burst of 2,000, and 256 MiB an hour: far
		// above an agent's chatter (a message every few seconds) and a
		// catch-up after a day away, while one member's flood fills at most
		// a fifth of a default channel's 10,000 before the rate holds it.
		ChannelSenderRate:         600,
		ChannelSenderBurst:        2000,
		ChannelSenderBytesPerHour: 256 << 20,
		// 200,000 files and 2 GiB, and a pause below 256 MiB free: the
		// files of twenty full channels, and room left on the disk for the
		// store to prune and for everything else.
		MailboxMaxFiles: 200_000,
		MailboxMaxBytes: 2 << 30,
		MailboxMinFree:  256 << 20,
		// 64 MiB, all of it eager for DMs, 1 MiB eager for channels: a
		// patch, a log or a dataset sample arrives with its message; a
		// channel's readers fetch a large file only when they want it.
		AttachmentMax:             64 << 20,
		AttachmentEagerMax:        64 << 20,
		AttachmentChannelEagerMax: 1 << 20,
		// 1 GiB: sixteen full-size attachments from one member, a small
		// part of a disk, while another member's still come.
		AttachmentSenderMax: 1 << 30,
		Transport:           transport.DefaultConfig(),
	}
}

// withDefaults returns c with each zero (or out of range) field of history
// sync, serving, retention and the envelope TTL replaced by its default,
// so that a Config built by hand works too. [New] applies it once; the
// rest of the node reads the result.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.AttachmentMax <= 0 || c.AttachmentMax > proto.MaxAttachmentSize {
		c.AttachmentMax = d.AttachmentMax
	}
	if c.AttachmentSenderMax <= 0 {
		c.AttachmentSenderMax = d.AttachmentSenderMax
	}
	if c.AttachmentEagerMax <= 0 {
		c.AttachmentEagerMax = d.AttachmentEagerMax
	}
	if c.AttachmentChannelEagerMax < 0 {
		c.AttachmentChannelEagerMax = d.AttachmentChannelEagerMax
	}
	if c.EnvelopeTTL <= 0 {
		c.EnvelopeTTL = d.EnvelopeTTL
	}
	if c.OfflineWindow <= 0 {
		c.OfflineWindow = d.OfflineWindow
	}
	if c.SyncPeers <= 0 {
		c.SyncPeers = d.SyncPeers
	}
	if c.SyncTimeout <= 0 {
		c.SyncTimeout = d.SyncTimeout
	}
	if c.SyncDelay <= 0 {
		c.SyncDelay = d.SyncDelay
	}
	if c.SyncPageMessages <= 0 || c.SyncPageMessages > proto.MaxHistoryMessages {
		c.SyncPageMessages = d.SyncPageMessages
	}
	if c.SyncPageBytes <= 0 || c.SyncPageBytes > proto.MaxHistoryBytes {
		c.SyncPageBytes = d.SyncPageBytes
	}
	if c.HistoryServeConcurrency <= 0 {
		c.HistoryServeConcurrency = d.HistoryServeConcurrency
	}
	if c.HistoryServeRate <= 0 {
		c.HistoryServeRate = d.HistoryServeRate
	}
	if c.HistoryServeBurst <= 0 {
		c.HistoryServeBurst = d.HistoryServeBurst
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = d.RetentionInterval
	}
	if c.ArchiveRetention <= 0 {
		c.ArchiveRetention = d.ArchiveRetention
	}
	if c.ArchiveRetentionMessages <= 0 {
		c.ArchiveRetentionMessages = d.ArchiveRetentionMessages
	}
	if c.DirectRetention <= 0 {
		c.DirectRetention = d.DirectRetention
	}
	if c.ChannelSenderRate == 0 {
		c.ChannelSenderRate = d.ChannelSenderRate
	}
	if c.ChannelSenderBurst <= 0 {
		c.ChannelSenderBurst = d.ChannelSenderBurst
	}
	if c.ChannelSenderBytesPerHour == 0 {
		c.ChannelSenderBytesPerHour = d.ChannelSenderBytesPerHour
	}
	if c.MailboxMaxFiles == 0 {
		c.MailboxMaxFiles = d.MailboxMaxFiles
	}
	if c.MailboxMaxBytes == 0 {
		c.MailboxMaxBytes = d.MailboxMaxBytes
	}
	if c.MailboxMinFree == 0 {
		c.MailboxMinFree = d.MailboxMinFree
	}
	if c.SenderStoreBytes <= 0 {
		c.SenderStoreBytes = d.SenderStoreBytes
	}
	if c.SenderStoreEnvelopes <= 0 {
		c.SenderStoreEnvelopes = d.SenderStoreEnvelopes
	}
	return c
}

// retention returns how long and how many messages of a channel a node
// keeps: the policy's retention, raised to ArchiveRetention and
// ArchiveRetentionMessages on an archive node.
func (c *Config) retention(p *channel.Policy, archive bool) (time.Duration, int) {
	age, count := p.EffectiveRetention()
	if archive {
		age = max(age, c.ArchiveRetention)
		count = max(count, c.ArchiveRetentionMessages)
	}
	return age, count
}

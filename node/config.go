package node

import (
	"log/slog"
	"time"

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

	// DialBackoffMin and DialBackoffMax bound reconnect backoff. The delay
	// doubles per failure between them with ±50% jitter, so a fleet that
	// restarts together does not redial in lockstep.
	DialBackoffMin time.Duration
	DialBackoffMax time.Duration
	// DialTimeout bounds one dial including its handshake.
	DialTimeout time.Duration
	// PeerExchangeInterval is how often linked peers are told about the
	// other members we hold links to.
	PeerExchangeInterval time.Duration

	// EnvelopeTTL is the lifetime given to envelopes we send (seed 004: 300 s).
	EnvelopeTTL time.Duration
	// OfflineWindow is the lifetime given to a DM, Request or Response for
	// a peer that is offline when it is sent: it is kept and delivered
	// when the peer links again, for up to this long.
	OfflineWindow time.Duration
	// PresenceTTL is the silence after which a peer is shown offline
	// (seed 004: 300 s). Our own presence is refreshed every third of it.
	PresenceTTL time.Duration

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
		// 30 s cap: an absent peer costs one dial per 30 s at most.
		DialBackoffMax: 30 * time.Second,
		// 10 s: a handshake is under 1 ms on a LAN; anything this slow is gone.
		DialTimeout: 10 * time.Second,
		// 30 s: new members spread within one interval of any link.
		PeerExchangeInterval: 30 * time.Second,
		EnvelopeTTL:          proto.DefaultTTL * time.Second,
		// 24 h: an agent's host that is down for a night still gets its DMs.
		OfflineWindow: 24 * time.Hour,
		PresenceTTL:   presence.DefaultTTL,
		Transport:     transport.DefaultConfig(),
	}
}

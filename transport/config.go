package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/proto"
)

// Config configures [Listen], [Dial], [Server] and [Client]. Those copy it
// and fill zero fields from [DefaultConfig]; do not change a Config (or
// what its fields point to) while a listener or link made from it runs.
type Config struct {
	// Identity is this node's Ed25519 identity key. Required.
	Identity ed25519.PrivateKey
	// Org is the org id. Required. It is part of the Noise prologue and
	// must equal the peer's payload Org.
	Org string
	// NoiseKey is the X25519 static key. Nil means [Listen] generates one
	// for the listener and each [Dial] one for its link. Share one key
	// across calls to sign the identity binding only once.
	NoiseKey *StaticKey

	// Admit decides whether a peer may connect, given its verified
	// payload. It runs on the initiator after message 2 (before message 3
	// is sent) and on the responder after message 3. A non-nil error
	// aborts the handshake; the error returned by Dial or logged by the
	// listener wraps [ErrNotAdmitted] and it. Nil admits everyone with a
	// valid binding in the same org. A listener calls it from several
	// goroutines at once.
	Admit func(p *proto.HandshakePayload) error
	// Payload supplies our handshake payload (roster version, listen
	// addresses, policy digest, name) at handshake time. The transport
	// fills Version, Identity, StaticSig and Org. Nil sends only those.
	// Like Admit, it may be called concurrently.
	Payload func() proto.HandshakePayload

	// Knock makes [Dial] and [Client] knock (PROTOCOL.md §14.11): the
	// handshake uses [proto.KnockPrologue], so it completes with a node
	// of any org, and the payloads both sides see have Knock set. Admit
	// sees the peer's org, which need not be Org. A knock link carries
	// only what the responder says before closing it.
	Knock bool
	// AnswerKnocks lets a [Listener] or [Server] complete knocks as well
	// as ordinary handshakes. Admit sees the knocking peer's payload with
	// Knock set, and should refuse it: Refused then tells it what it may
	// know.
	AnswerKnocks bool

	// HandshakeTimeout bounds each handshake step (connect, each message
	// read or write). Default 5s: a LAN handshake takes about a
	// millisecond, so 5s tolerates a loaded or distant peer while a peer
	// that stalls holds a handshake slot only briefly.
	HandshakeTimeout time.Duration
	// KeepaliveInterval is how long a link may go without receiving
	// anything before it sends a ping, which the peer answers with a
	// pong; a peer that receives the ping has heard from us and does not
	// ping in turn, so an idle link carries one ping and one pong per
	// interval. A link that has sent nothing for two intervals pings
	// too. Default 15s: a third of IdleTimeout, so two pings can be
	// lost before the peer gives up on us. A dead TCP peer is found
	// sooner, by the kernel's keepalive probes (see tcpalive.go); these
	// pings are for a peer process that is alive but silent, and for
	// Unix-socket links. Every ping and pong wakes both ends, so they are
	// kept rare: a node with 200 idle links pays 27 wake-ups a second at
	// 15 s, 80 at 5 s.
	KeepaliveInterval time.Duration
	// IdleTimeout closes a link that has received nothing for this long
	// (up to an eighth longer: the deadline is moved lazily, and the
	// reader looks once more before giving up, in case this process was
	// stalled with the peer's messages waiting). It also bounds one
	// blocked write. Default 45s: three keepalive intervals. A TCP peer
	// that is gone or cut off is found within about 15 s by the kernel
	// (tcpDeadAfter), and the link ends then, so the node redials and
	// resyncs as soon as the path is back instead of waiting out TCP's
	// retransmission backoff on a link that looks alive.
	IdleTimeout time.Duration
	// SendQueue is the capacity of each link's send queue, in frames.
	// Default 1024: about a second of fan-out at a busy node's envelope
	// rate, while a stuck peer costs at most that many queued frames.
	SendQueue int
	// SendQueueBytes bounds the frame bytes waiting in each link's send
	// queue. Default 8 MiB: a history page is up to 1 MiB and a channel
	// message up to proto.MaxFrameSize, so frames alone bound nothing (a
	// thousand 1 MiB pages is a gigabyte); 8 MiB holds about a second of a
	// busy link's traffic, eight history pages, and costs at most that
	// per peer that stops reading. A frame always fits an empty queue, so
	// a value below proto.MaxFrameSize still lets every frame through.
	SendQueueBytes int
	// RecvRate bounds the bytes a link reads from its peer per second, as
	// a token bucket holding RecvBurst bytes: past it the reader stops
	// reading the socket until tokens are back, so TCP flow control slows
	// the sender down; nothing is dropped. Zero means [DefaultConfig]'s;
	// negative means no limit. Default 32 MiB/s: a quarter of a gigabit
	// link, above the node's own ceiling of about 10,000 envelopes a
	// second of small messages (see docs/BENCHMARKS.md), while one member
	// can no longer push 200 MB a second at a node.
	RecvRate float64
	// RecvBurst is the token bucket's depth in bytes. Default 4 MiB:
	// history pages (up to 1 MiB) and bursts of large messages arrive at
	// full speed. It is raised to at least one record (64 KiB).
	RecvBurst int
	// Refused, if set, runs on a responder whose Admit refused a peer
	// that completed the handshake. The link is authenticated but not
	// started: frames sent on it with [Link.Send] (say, what the peer
	// needs to learn why) are written before the connection closes, for
	// at most a second. It must not Start or Close the link. err wraps
	// [ErrNotAdmitted] and Admit's error.
	Refused func(l *Link, err error)

	// MaxHandshakes bounds the unauthenticated connections a [Listener]
	// holds: in handshake, or linked and waiting for Accept. When it is
	// reached, the oldest connection that has sent nothing is closed to
	// make room, else the oldest handshake running for over a second,
	// else the new connection. Default 128:
	// a LAN of a few hundred members linking at once fits, and the file
	// descriptors a flood can hold stay well under the usual 1,024 limit.
	MaxHandshakes int
	// MaxHandshakesPerSource bounds the handshakes in progress from one
	// remote IPv4 address or IPv6 /64; further connections from it are
	// closed at once. Unix socket peers (this user's processes) are not
	// limited per source.
	// Default 8: a host dials each member once, so even a host running
	// several nodes that restart together stays under it, while one
	// hostile host holds at most 8 of the MaxHandshakes places.
	MaxHandshakesPerSource int
	// FirstMessageTimeout bounds the wait for handshake message 1 after a
	// connection is accepted. Default 3s: an initiator sends it with its
	// first packet, one round trip after connecting, while a connection
	// that says nothing frees its place sooner than HandshakeTimeout.
	FirstMessageTimeout time.Duration
	// Logger receives handshake failures and link teardowns. Default: a
	// logger that discards, since a library must not print unless asked.
	Logger *slog.Logger
	// Net opens the listeners and connections of [Listen] and [Dial].
	// Nil is the host's TCP and Unix sockets; tests put in an in-memory
	// network (transport/memnet) to run nodes inside a synctest bubble.
	Net Network
}

// DefaultConfig returns a Config with every default set and no identity.
func DefaultConfig() Config {
	return Config{
		HandshakeTimeout:       5 * time.Second,
		KeepaliveInterval:      15 * time.Second,
		IdleTimeout:            45 * time.Second,
		SendQueue:              1024,
		SendQueueBytes:         8 << 20,
		RecvRate:               32 << 20,
		RecvBurst:              4 << 20,
		MaxHandshakes:          128,
		MaxHandshakesPerSource: 8,
		FirstMessageTimeout:    3 * time.Second,
		Logger:                 slog.New(slog.DiscardHandler),
	}
}

// withDefaults returns a copy of c with zero fields defaulted, or an error
// if a required field is missing.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if len(c.Identity) != ed25519.PrivateKeySize {
		return c, errors.New("config: Identity must be an ed25519 private key")
	}
	if c.Org == "" || len(c.Org) > proto.MaxOrgLen {
		return c, fmt.Errorf("config: Org must be 1..%d bytes", proto.MaxOrgLen)
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = d.KeepaliveInterval
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.SendQueue <= 0 {
		c.SendQueue = d.SendQueue
	}
	if c.SendQueueBytes <= 0 {
		c.SendQueueBytes = d.SendQueueBytes
	}
	if c.RecvRate == 0 {
		c.RecvRate = d.RecvRate
	}
	if c.RecvBurst <= 0 {
		c.RecvBurst = d.RecvBurst
	}
	c.RecvBurst = max(c.RecvBurst, 2+maxRecord) // one record and its length
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = d.MaxHandshakes
	}
	if c.MaxHandshakesPerSource <= 0 {
		c.MaxHandshakesPerSource = d.MaxHandshakesPerSource
	}
	if c.FirstMessageTimeout <= 0 {
		c.FirstMessageTimeout = d.FirstMessageTimeout
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c, nil
}

// cipherSuite is the only suite meshd speaks.
var cipherSuite = noise.NewCipherSuite(noise.DH25519, noise.CipherChaChaPoly, noise.HashSHA256)

// StaticKey is a Noise X25519 static key pair. It is not an identity: the
// handshake payload binds it to the Ed25519 identity with a signature,
// which the key caches so that reusing it skips the signing.
type StaticKey struct {
	dh noise.DHKey

	// mu guards the cached binding signature.
	mu       sync.Mutex
	sigOwner proto.PubKey
	sig      proto.Signature
}

// NewStaticKey generates a static key from crypto/rand.
func NewStaticKey() (*StaticKey, error) {
	dh, err := cipherSuite.GenerateKeypair(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate noise static key: %w", err)
	}
	return &StaticKey{dh: dh}, nil
}

// Public returns a copy of the X25519 public key.
func (k *StaticKey) Public() []byte { return append([]byte(nil), k.dh.Public...) }

// binding returns the StaticSig of identity over k's public key.
func (k *StaticKey) binding(identity ed25519.PrivateKey) (proto.PubKey, proto.Signature) {
	id := proto.PubKeyOf(identity)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sigOwner.IsZero() || !k.sigOwner.Equal(id) {
		k.sig = proto.Sign(identity, proto.DomainNoiseStatic, k.dh.Public)
		k.sigOwner = id
	}
	return id, k.sig
}

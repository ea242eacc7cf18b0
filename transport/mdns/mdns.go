package mdns

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/mdns"
	"github.com/miekg/dns"

	"github.com/meshd/meshd/proto"
)

const (
	// entriesBuffer holds one query's answers. The library drops answers
	// when it is full, and they are read only after the query ends, so it
	// is sized for a large LAN.
	entriesBuffer = 512
	// peersBuffer is the depth of the Peers channel.
	peersBuffer = 64
	// maxTracked bounds the peers remembered for deduplication, so a
	// flood of forged answers cannot grow memory without limit.
	maxTracked = 1024
	// retryMin is the first delay after a failed query.
	retryMin = time.Second
)

// The mDNS groups. Joining them without an interface is what the library's
// querier does; probing the same call tells whether its query would work.
var (
	groupV4 = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}
	groupV6 = &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353}
)

// family is the IP family queries are sent in.
type family int

const (
	familyNone family = iota
	familyV4
	familyV6
)

func (f family) String() string {
	switch f {
	case familyV4:
		return "IPv4"
	case familyV6:
		return "IPv6"
	}
	return "none"
}

// MDNS advertises this node and browses for peers with hashicorp/mdns. It
// implements [Advertiser].
type MDNS struct {
	cfg    Config
	log    *slog.Logger
	libLog *log.Logger // the library's messages, at debug level
	zone   *zone
	server *mdns.Server
	peers  chan Peer

	cancel context.CancelFunc
	wg     sync.WaitGroup // the browse loop

	mu     sync.Mutex // guards closed and serialises SetRosterVersion
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// New starts advertising this node on cfg.Interface and browsing for
// peers. It fails with [ErrNoInterface] when no interface fits and with
// [ErrNoMulticast] when the mDNS group cannot be joined at all; callers
// should then carry on with static seeds only.
func New(cfg Config) (*MDNS, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &MDNS{
		cfg:   cfg,
		log:   cfg.Logger.With("iface", cfg.Interface.Name),
		peers: make(chan Peer, peersBuffer),
	}
	m.libLog = slog.NewLogLogger(cfg.Logger.With("lib", "hashicorp/mdns").Handler(), slog.LevelDebug)

	f := m.probeFamily()
	switch f {
	case familyNone:
		return nil, fmt.Errorf("%w on %s: no route covers 224.0.0.251 and IPv6 is unusable; add one with \"ip route add 224.0.0.0/4 dev %s\"",
			ErrNoMulticast, cfg.Interface.Name, cfg.Interface.Name)
	case familyV6:
		m.log.Info("mdns: no route covers 224.0.0.251, querying over IPv6", "hint", "ip route add 224.0.0.0/4 dev "+cfg.Interface.Name)
	}

	svc, err := m.service(cfg.RosterVersion)
	if err != nil {
		return nil, err
	}
	m.zone = &zone{svc: svc}
	// The responder joins the group on cfg.Interface by its address, so it
	// needs no route. It tolerates failing to bind one family.
	m.server, err = mdns.NewServer(&mdns.Config{Zone: m.zone, Iface: cfg.Interface, Logger: m.libLog})
	if err != nil {
		return nil, fmt.Errorf("mdns: advertising on %s: %w", cfg.Interface.Name, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go m.browse(ctx, f)
	return m, nil
}

// Peers implements [Discovery].
func (m *MDNS) Peers() <-chan Peer { return m.peers }

// Interface returns the interface advertised and queried on.
func (m *MDNS) Interface() *net.Interface { return m.cfg.Interface }

// SetRosterVersion re-registers the TXT record with roster version v.
// Peers see it at their next query (the library cannot announce).
func (m *MDNS) SetRosterVersion(v uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	svc, err := m.service(v)
	if err != nil {
		return err
	}
	m.zone.set(svc)
	return nil
}

// Close stops browsing and advertising and closes the Peers channel. It
// waits for the query in flight, at most [Config.QueryTimeout].
func (m *MDNS) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.cancel()
		m.wg.Wait()
		m.closeErr = m.server.Shutdown()
	})
	return m.closeErr
}

// service builds the records advertised for roster version rv. Host name
// and IPs are always given, so the library neither reads os.Hostname nor
// calls net.LookupIP.
func (m *MDNS) service(rv uint64) (*mdns.MDNSService, error) {
	txt := encodeTXT(txtRecord{Key: m.cfg.Key, Org: m.cfg.Org, RosterVersion: rv, ProtoVersion: proto.ProtocolVersion})
	svc, err := mdns.NewMDNSService(m.cfg.Instance, m.cfg.Service, m.cfg.Domain, m.cfg.HostName, m.cfg.Port, m.cfg.IPs, txt)
	if err != nil {
		return nil, fmt.Errorf("mdns: service record: %w", err)
	}
	return svc, nil
}

// browse queries at once, then every QueryInterval, until ctx ends. It owns
// the deduplication state and sends on, then closes, the Peers channel.
// last is the query family New found.
func (m *MDNS) browse(ctx context.Context, last family) {
	defer m.wg.Done()
	defer close(m.peers)
	tr := newTracker(uint64(m.cfg.RefreshEvery), maxTracked)
	retry := retryMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// Routes and addresses may change while we run, so probe each time.
		f := m.probeFamily()
		if f != last {
			m.log.Info("mdns: query family changed", "from", last, "to", f)
			last = f
		}
		var err error
		if f == familyNone {
			err = fmt.Errorf("%w on %s", ErrNoMulticast, m.cfg.Interface.Name)
		} else {
			err = m.query(ctx, f, tr)
		}
		if ctx.Err() != nil {
			return
		}
		next := jitter(m.cfg.QueryInterval)
		if err != nil {
			// Retry sooner: the usual cause is transient, such as IPv6
			// sends failing until duplicate address detection is done.
			m.log.Debug("mdns: query failed", "family", f, "err", err, "retry", retry)
			next, retry = min(retry, next), min(2*retry, m.cfg.QueryInterval)
		} else {
			retry = retryMin
		}
		timer.Reset(next)
	}
}

// jitter spreads d by ±10% so that nodes started together do not query in
// lockstep.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

// probeFamily finds the family whose query can work, by trying the group
// join the library's querier will make. IPv4 wins when it works: a failed
// IPv6 send aborts the library's whole query, IPv4 half included.
func (m *MDNS) probeFamily() family {
	if canJoin("udp4", groupV4) {
		return familyV4
	}
	if hasIPv6(m.cfg.Interface) && canJoin("udp6", groupV6) {
		return familyV6
	}
	return familyNone
}

func canJoin(network string, group *net.UDPAddr) bool {
	c, err := net.ListenMulticastUDP(network, nil, group)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// query runs one library query in family f and reports its answers.
func (m *MDNS) query(ctx context.Context, f family, tr *tracker) error {
	entries := make(chan *mdns.ServiceEntry, entriesBuffer)
	params := &mdns.QueryParam{
		Service:     m.cfg.Service,
		Domain:      m.cfg.Domain,
		Timeout:     m.cfg.QueryTimeout,
		Interface:   m.cfg.Interface, // send on it explicitly: IP_MULTICAST_IF needs no route
		Entries:     entries,
		DisableIPv4: f != familyV4,
		DisableIPv6: f != familyV6,
		Logger:      m.libLog,
	}
	err := mdns.QueryContext(ctx, params)
	// Read only now: the library keeps writing to an entry after sending
	// it when later packets name the same instance. Only a query that went
	// out counts as a round for refreshes and forgetting.
	if err == nil {
		tr.nextRound()
	}
	now := time.Now()
	for {
		select {
		case e := <-entries:
			m.handle(e, now, tr)
		default:
			return err
		}
	}
}

// handle turns one answer into a report, or skips it.
func (m *MDNS) handle(e *mdns.ServiceEntry, now time.Time, tr *tracker) {
	p, err := peerFromEntry(e, now)
	if err != nil {
		m.log.Debug("mdns: skipping answer", "name", bounded(e.Name), "err", err)
		return
	}
	if p.Key.Equal(m.cfg.Key) {
		return
	}
	if !m.cfg.AllOrgs && p.Org != m.cfg.Org {
		m.log.Debug("mdns: skipping peer of another org", "peer", p.Key.Fingerprint(), "org", p.Org)
		return
	}
	if !tr.observe(p) {
		return
	}
	select {
	case m.peers <- p:
		m.log.Debug("mdns: peer", "peer", p.Key.Fingerprint(), "addrs", p.Addrs, "rv", p.RosterVersion)
	default:
		// Forget it, so that the next query reports it again.
		tr.forget(p.Key)
		m.log.Debug("mdns: Peers channel full, dropped report", "peer", p.Key.Fingerprint())
	}
}

// bounded shortens peer-supplied text for logs.
func bounded(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// peerFromEntry validates an answer and converts it.
func peerFromEntry(e *mdns.ServiceEntry, now time.Time) (Peer, error) {
	r, err := parseTXT(e.InfoFields)
	if err != nil {
		return Peer{}, err
	}
	if e.Port < 1 || e.Port > 65535 {
		return Peer{}, fmt.Errorf("port %d out of range", e.Port)
	}
	port := strconv.Itoa(e.Port)
	var addrs []string
	if ip := e.AddrV4.To4(); ip != nil && usable(ip) {
		addrs = append(addrs, "tcp://"+net.JoinHostPort(ip.String(), port))
	}
	if a := e.AddrV6IPAddr; a != nil && a.IP.To4() == nil && a.IP.To16() != nil && usable(a.IP) {
		// A link-local address is usable only with the zone the library
		// takes from the answer's source; over IPv4 there is none.
		if !a.IP.IsLinkLocalUnicast() || a.Zone != "" {
			addrs = append(addrs, "tcp://"+net.JoinHostPort(a.String(), port))
		}
	}
	if len(addrs) == 0 {
		return Peer{}, fmt.Errorf("no usable address")
	}
	host := e.Host
	if len(host) > 255 {
		host = ""
	}
	return Peer{
		Key:           r.Key,
		Org:           r.Org,
		RosterVersion: r.RosterVersion,
		ProtoVersion:  r.ProtoVersion,
		Addrs:         addrs,
		Host:          host,
		Seen:          now,
	}, nil
}

func usable(ip net.IP) bool {
	return !ip.IsUnspecified() && !ip.IsMulticast()
}

// zone serves the current records. SetRosterVersion swaps in a new
// service; the library's responder goroutine reads it concurrently.
type zone struct {
	mu  sync.RWMutex
	svc *mdns.MDNSService // guarded by mu; replaced whole, never modified
}

// Records implements mdns.Zone.
func (z *zone) Records(q dns.Question) []dns.RR {
	z.mu.RLock()
	svc := z.svc
	z.mu.RUnlock()
	return svc.Records(q)
}

func (z *zone) set(svc *mdns.MDNSService) {
	z.mu.Lock()
	z.svc = svc
	z.mu.Unlock()
}

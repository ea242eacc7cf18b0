package mdns

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/meshd/meshd/proto"
)

// Config configures [New]. Key, Org and Port are required; zero values
// elsewhere take the defaults of [DefaultConfig]. The config is read-only
// once New has it.
type Config struct {
	// Key is this node's identity. It is advertised in TXT "key", and
	// answers carrying it are ours and never reported.
	Key proto.PubKey
	// Org is this node's org id, advertised in TXT "org". Answers from
	// other orgs are dropped unless AllOrgs is set.
	Org string
	// AllOrgs reports peers of every org, for diagnostics. The handshake
	// refuses other orgs anyway (the org is in the Noise prologue).
	AllOrgs bool
	// RosterVersion is the roster version advertised at start, in TXT
	// "rv". Change it later with [MDNS.SetRosterVersion].
	RosterVersion uint64
	// Port is the TCP port of this node's link listener, advertised in SRV.
	Port int

	// Service is the DNS-SD service type. Default "_meshd._tcp".
	Service string
	// Domain is the mDNS domain. Default "local.".
	Domain string
	// Instance is the DNS-SD instance label. Default: the key's
	// fingerprint, so that it is unique per node without coordination.
	Instance string
	// HostName is the name the A and AAAA records are published under.
	// Default "<Instance>.<Domain>": our own name, so that it never
	// collides with the machine's name that avahi may publish.
	HostName string

	// Interface is where to advertise and query. Default: the first
	// interface that is up, multicast-capable, not loopback and has an
	// IPv4 address (see [DefaultInterface]). Loopback is used only when set
	// here.
	Interface *net.Interface
	// IPs are the addresses to advertise. Default: Interface's IPv4
	// addresses and its global IPv6 ones (link-local IPv6 is useless to a
	// peer without the zone, which the records cannot carry). They are
	// always passed to hashicorp/mdns explicitly; left to itself it would
	// resolve the host name with net.LookupIP.
	IPs []net.IP

	// QueryInterval is the time between queries. Default 10s: the library
	// never announces, so this bounds how long existing nodes take to see a
	// newcomer (the newcomer finds them at once and dials). Every node
	// sends one multicast query and receives one unicast answer per peer
	// each interval, a few packets per second even on a LAN of 50 nodes.
	QueryInterval time.Duration
	// QueryTimeout is how long each query collects answers. Default 1s:
	// responders answer in well under 100 ms on a LAN, and Close waits for
	// the query in flight, so this also bounds Close.
	QueryTimeout time.Duration
	// RefreshEvery makes a peer that has not changed be reported again
	// every this many queries. Default 6 (a minute at the default
	// interval), so a consumer that dropped or forgot a peer relearns it
	// without being flooded every query.
	RefreshEvery int

	// Logger receives debug logs about answers skipped and the library's
	// own messages, and info logs when the query family changes. Default:
	// discard.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in except those
// that depend on the node (Key, Org, Port, Instance, HostName, Interface
// and IPs, which [New] derives).
func DefaultConfig() Config {
	return Config{
		Service:       "_meshd._tcp",
		Domain:        "local.",
		QueryInterval: 10 * time.Second,
		QueryTimeout:  time.Second,
		RefreshEvery:  6,
	}
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.Key.IsZero() {
		return c, fmt.Errorf("mdns: config: no key")
	}
	if !validOrg(c.Org) {
		return c, fmt.Errorf("mdns: config: org id must be 1..%d bytes of printable UTF-8", proto.MaxOrgLen)
	}
	if c.Port < 1 || c.Port > 65535 {
		return c, fmt.Errorf("mdns: config: port %d out of range", c.Port)
	}
	if c.Service == "" {
		c.Service = d.Service
	}
	if c.Domain == "" {
		c.Domain = d.Domain
	}
	if !strings.HasSuffix(c.Domain, ".") {
		c.Domain += "."
	}
	if c.Instance == "" {
		c.Instance = c.Key.Fingerprint()
	}
	if len(c.Instance) > 63 || strings.ContainsAny(c.Instance, ". ") {
		return c, fmt.Errorf("mdns: config: instance %q must be one DNS label of at most 63 bytes", c.Instance)
	}
	if c.HostName == "" {
		c.HostName = c.Instance + "." + c.Domain
	}
	if !strings.HasSuffix(c.HostName, ".") {
		c.HostName += "."
	}
	if c.QueryInterval <= 0 {
		c.QueryInterval = d.QueryInterval
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = d.QueryTimeout
	}
	if c.QueryTimeout >= c.QueryInterval {
		return c, fmt.Errorf("mdns: config: query timeout %v must be shorter than the interval %v", c.QueryTimeout, c.QueryInterval)
	}
	if c.RefreshEvery <= 0 {
		c.RefreshEvery = d.RefreshEvery
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Interface == nil {
		ifi, err := DefaultInterface()
		if err != nil {
			return c, err
		}
		c.Interface = ifi
	}
	if len(c.IPs) == 0 {
		ips, err := interfaceIPs(c.Interface)
		if err != nil {
			return c, err
		}
		c.IPs = ips
	} else {
		c.IPs = append([]net.IP(nil), c.IPs...)
	}
	for _, ip := range c.IPs {
		if ip.To16() == nil || ip.IsUnspecified() || ip.IsMulticast() {
			return c, fmt.Errorf("mdns: config: cannot advertise address %v", ip)
		}
	}
	return c, nil
}

// DefaultInterface returns the interface [New] uses when none is
// configured: the first (by index) that is up, multicast-capable, not
// loopback and has an IPv4 address.
func DefaultInterface() (*net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("mdns: listing interfaces: %w", err)
	}
	for i := range ifs {
		ifi := &ifs[i]
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ifi, nil
			}
		}
	}
	return nil, ErrNoInterface
}

// interfaceIPs returns what to advertise for ifi: its IPv4 addresses and
// its global IPv6 ones.
func interfaceIPs(ifi *net.Interface) ([]net.IP, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("mdns: addresses of %s: %w", ifi.Name, err)
	}
	var ips []net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil {
			ips = append(ips, ip4)
		} else if ipn.IP.IsGlobalUnicast() {
			ips = append(ips, ipn.IP)
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("mdns: interface %s has no address to advertise", ifi.Name)
	}
	return ips, nil
}

// hasIPv6 reports whether ifi has any IPv6 address, link-local included:
// without one it cannot send IPv6 queries.
func hasIPv6(ifi *net.Interface) bool {
	addrs, err := ifi.Addrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() == nil && ipn.IP.To16() != nil {
			return true
		}
	}
	return false
}

package mdns

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meshd/meshd/proto"
)

// loopback is given explicitly so these tests never look at, or send on,
// the machine's real interfaces. Nothing here opens a socket.
func loopback(t *testing.T) *net.Interface {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for i := range ifs {
		if ifs[i].Flags&net.FlagLoopback != 0 {
			return &ifs[i]
		}
	}
	t.Skip("no loopback interface")
	return nil
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	lo := loopback(t)
	k := testKey(1)
	c, err := Config{Key: k, Org: "acme", Port: 7000, Interface: lo}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if c.Service != "_meshd._tcp" || c.Domain != "local." || c.QueryInterval != d.QueryInterval ||
		c.QueryTimeout != d.QueryTimeout || c.RefreshEvery != d.RefreshEvery || c.Logger == nil {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.Instance != k.Fingerprint() || c.HostName != k.Fingerprint()+".local." {
		t.Errorf("instance %q host %q, want derived from the fingerprint", c.Instance, c.HostName)
	}
	if !slices.ContainsFunc(c.IPs, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) {
		t.Errorf("IPs %v lack the interface's 127.0.0.1", c.IPs)
	}
	for _, ip := range c.IPs {
		if ip.To4() == nil && !ip.IsGlobalUnicast() {
			t.Errorf("advertising non-global IPv6 %v", ip)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	t.Parallel()
	lo := loopback(t)
	good := Config{Key: testKey(1), Org: "acme", Port: 7000, Interface: lo}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no key", func(c *Config) { c.Key = proto.PubKey{} }},
		{"no org", func(c *Config) { c.Org = "" }},
		{"org too long", func(c *Config) { c.Org = strings.Repeat("o", proto.MaxOrgLen+1) }},
		{"org with newline", func(c *Config) { c.Org = "a\nb" }},
		{"no port", func(c *Config) { c.Port = 0 }},
		{"port too big", func(c *Config) { c.Port = 65536 }},
		{"instance with dot", func(c *Config) { c.Instance = "a.b" }},
		{"instance too long", func(c *Config) { c.Instance = strings.Repeat("i", 64) }},
		{"timeout not below interval", func(c *Config) { c.QueryInterval, c.QueryTimeout = time.Second, time.Second }},
		{"unspecified IP", func(c *Config) { c.IPs = []net.IP{net.IPv4zero} }},
		{"multicast IP", func(c *Config) { c.IPs = []net.IP{net.IPv4(224, 0, 0, 251)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			if _, err := c.withDefaults(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := good.withDefaults(); err != nil {
		t.Fatalf("good config rejected: %v", err)
	}
}

func TestDefaultInterfaceSkipsLoopback(t *testing.T) {
	t.Parallel()
	ifi, err := DefaultInterface()
	if err != nil {
		t.Skipf("no candidate interface here: %v", err)
	}
	if ifi.Flags&net.FlagLoopback != 0 || ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 {
		t.Fatalf("chose %s with flags %v", ifi.Name, ifi.Flags)
	}
}

// TestServiceRecords checks what is advertised, and that SetRosterVersion
// re-registers the TXT, without any network: the zone is asked directly.
func TestServiceRecords(t *testing.T) {
	t.Parallel()
	lo := loopback(t)
	cfg, err := Config{Key: testKey(1), Org: "acme", Port: 7000, RosterVersion: 3, Interface: lo,
		IPs: []net.IP{net.IPv4(10, 0, 0, 1), net.ParseIP("2001:db8::1")}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	m := &MDNS{cfg: cfg}
	svc, err := m.service(cfg.RosterVersion)
	if err != nil {
		t.Fatal(err)
	}
	m.zone = &zone{svc: svc}
	instance := cfg.Instance + "._meshd._tcp.local."

	rrs := m.zone.Records(dns.Question{Name: "_meshd._tcp.local.", Qtype: dns.TypePTR, Qclass: dns.ClassINET})
	var ptr, srv, a, aaaa, txt int
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.PTR:
			ptr++
			if rr.Ptr != instance {
				t.Errorf("PTR to %q, want %q", rr.Ptr, instance)
			}
		case *dns.SRV:
			srv++
			if rr.Port != 7000 || rr.Target != cfg.HostName {
				t.Errorf("SRV %v", rr)
			}
		case *dns.A:
			a++
		case *dns.AAAA:
			aaaa++
		case *dns.TXT:
			txt++
			r, err := parseTXT(rr.Txt)
			if err != nil || !r.Key.Equal(testKey(1)) || r.Org != "acme" || r.RosterVersion != 3 || r.ProtoVersion != proto.ProtocolVersion {
				t.Errorf("TXT %q: %+v, %v", rr.Txt, r, err)
			}
		}
	}
	if ptr != 1 || srv != 1 || a != 1 || aaaa != 1 || txt != 1 {
		t.Fatalf("answer has %d PTR, %d SRV, %d A, %d AAAA, %d TXT; want one of each", ptr, srv, a, aaaa, txt)
	}

	if err := m.SetRosterVersion(12); err != nil {
		t.Fatal(err)
	}
	rrs = m.zone.Records(dns.Question{Name: instance, Qtype: dns.TypeTXT, Qclass: dns.ClassINET})
	if len(rrs) != 1 {
		t.Fatalf("%d TXT records", len(rrs))
	}
	if r, err := parseTXT(rrs[0].(*dns.TXT).Txt); err != nil || r.RosterVersion != 12 {
		t.Fatalf("after SetRosterVersion(12): %+v, %v", r, err)
	}
	m.closed = true
	if err := m.SetRosterVersion(13); err != ErrClosed {
		t.Fatalf("SetRosterVersion after close: %v", err)
	}
}

package mdns

import (
	"crypto/ed25519"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/mdns"

	"github.com/meshd/meshd/proto"
)

// testKey returns a deterministic key for seed.
func testKey(seed byte) proto.PubKey {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	return proto.PubKeyOf(ed25519.NewKeyFromSeed(s))
}

func TestTXTRoundTrip(t *testing.T) {
	t.Parallel()
	want := txtRecord{Key: testKey(1), Org: "acme", RosterVersion: 1<<64 - 1, ProtoVersion: proto.ProtocolVersion}
	fields := encodeTXT(want)
	for _, f := range fields {
		if len(f) > maxTXTString {
			t.Errorf("TXT string of %d bytes: %q", len(f), f)
		}
	}
	got, err := parseTXT(fields)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// The longest org still fits one TXT string.
	long := txtRecord{Key: testKey(1), Org: strings.Repeat("o", proto.MaxOrgLen), ProtoVersion: 1}
	if got, err := parseTXT(encodeTXT(long)); err != nil || got != long {
		t.Fatalf("max-length org: %+v, %v", got, err)
	}
}

func TestParseTXT(t *testing.T) {
	t.Parallel()
	k1, k2 := testKey(1).String(), testKey(2).String()
	base := []string{"key=" + k1, "org=acme", "rv=7", "pv=1"}
	with := func(extra ...string) []string { return append(append([]string(nil), extra...), base...) }
	ok := txtRecord{Key: testKey(1), Org: "acme", RosterVersion: 7, ProtoVersion: 1}

	tests := []struct {
		name    string
		fields  []string
		want    txtRecord
		wantErr bool
	}{
		{"plain", base, ok, false},
		{"order does not matter", []string{"pv=1", "rv=7", "org=acme", "key=" + k1}, ok, false},
		{"names are case-insensitive", []string{"KEY=" + k1, "Org=acme", "RV=7", "pV=1"}, ok, false},
		{"first occurrence wins", with("key="+k2, "org=other", "rv=9"), txtRecord{Key: testKey(2), Org: "other", RosterVersion: 9, ProtoVersion: 1}, false},
		{"malformed first occurrence hides later ones", with("key=nonsense"), txtRecord{}, true},
		{"unknown attributes ignored", with("x=1", "addrs=tcp://1.2.3.4:5", "=empty", "flag"), ok, false},
		{"empty values of unknown names", with("zz="), ok, false},
		{"missing rv is 0", []string{"key=" + k1, "org=acme", "pv=1"}, txtRecord{Key: testKey(1), Org: "acme", ProtoVersion: 1}, false},
		{"malformed rv is 0", []string{"key=" + k1, "org=acme", "rv=-1", "pv=1"}, txtRecord{Key: testKey(1), Org: "acme", ProtoVersion: 1}, false},
		{"rv overflow is 0", []string{"key=" + k1, "org=acme", "rv=18446744073709551616", "pv=1"}, txtRecord{Key: testKey(1), Org: "acme", ProtoVersion: 1}, false},
		{"other protocol version is reported", []string{"key=" + k1, "org=acme", "pv=2"}, txtRecord{Key: testKey(1), Org: "acme", ProtoVersion: 2}, false},
		{"no key", []string{"org=acme", "pv=1"}, txtRecord{}, true},
		{"no org", []string{"key=" + k1, "pv=1"}, txtRecord{}, true},
		{"no pv", []string{"key=" + k1, "org=acme"}, txtRecord{}, true},
		{"padded key", []string{"key=" + k1 + "=", "org=acme", "pv=1"}, txtRecord{}, true},
		{"key without prefix", []string{"key=" + strings.TrimPrefix(k1, proto.KeyPrefix), "org=acme", "pv=1"}, txtRecord{}, true},
		{"overlong key", []string{"key=" + k1 + strings.Repeat("A", 200), "org=acme", "pv=1"}, txtRecord{}, true},
		{"zero key", []string{"key=" + proto.PubKey{}.String(), "org=acme", "pv=1"}, txtRecord{}, true},
		{"empty org", []string{"key=" + k1, "org=", "pv=1"}, txtRecord{}, true},
		{"overlong org", []string{"key=" + k1, "org=" + strings.Repeat("o", proto.MaxOrgLen+1), "pv=1"}, txtRecord{}, true},
		{"control character in org", []string{"key=" + k1, "org=ac\nme", "pv=1"}, txtRecord{}, true},
		{"invalid UTF-8 org", []string{"key=" + k1, "org=\xff", "pv=1"}, txtRecord{}, true},
		{"pv out of range", []string{"key=" + k1, "org=acme", "pv=65536"}, txtRecord{}, true},
		{"pv not a number", []string{"key=" + k1, "org=acme", "pv=one"}, txtRecord{}, true},
		{"oversized string skipped", with(strings.Repeat("k", 300) + "=v"), ok, false},
		{"oversized key string skipped, later one used", []string{"key=" + strings.Repeat("A", 300), "key=" + k1, "org=acme", "rv=7", "pv=1"}, ok, false},
		{"nothing", nil, txtRecord{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTXT(tt.fields)
			if tt.wantErr {
				if !errors.Is(err, errTXT) {
					t.Fatalf("got %+v, %v; want errTXT", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseTXTLooksAtBoundedStrings(t *testing.T) {
	t.Parallel()
	var fields []string
	for range maxTXTStrings {
		fields = append(fields, "junk=1")
	}
	fields = append(fields, "key="+testKey(1).String(), "org=acme", "pv=1")
	if _, err := parseTXT(fields); !errors.Is(err, errTXT) {
		t.Fatalf("attributes past string %d were read: %v", maxTXTStrings, err)
	}
}

func FuzzParseTXT(f *testing.F) {
	f.Add("key="+testKey(1).String(), "org=acme", "rv=1", "pv=1")
	f.Add("KEY=x", "org=", "rv=99999999999999999999999", "pv=")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		r, err := parseTXT([]string{a, b, c, d})
		if err != nil {
			return
		}
		if r.Key.IsZero() || !validOrg(r.Org) {
			t.Fatalf("accepted %+v", r)
		}
		// What we accept we can advertise again, and it reads back the same.
		if got, err := parseTXT(encodeTXT(r)); err != nil || got != r {
			t.Fatalf("re-encoding %+v gave %+v, %v", r, got, err)
		}
	})
}

func TestPeerFromEntry(t *testing.T) {
	t.Parallel()
	txt := encodeTXT(txtRecord{Key: testKey(3), Org: "acme", RosterVersion: 5, ProtoVersion: 1})
	now := time.Unix(1700000000, 0)
	tests := []struct {
		name    string
		entry   mdns.ServiceEntry
		want    []string
		wantErr bool
	}{
		{"ipv4", mdns.ServiceEntry{Host: "h.local.", AddrV4: net.IPv4(10, 0, 0, 2), Port: 7000, InfoFields: txt},
			[]string{"tcp://10.0.0.2:7000"}, false},
		{"ipv4 and global ipv6", mdns.ServiceEntry{AddrV4: net.IPv4(10, 0, 0, 2), AddrV6IPAddr: &net.IPAddr{IP: net.ParseIP("2001:db8::2")}, Port: 7000, InfoFields: txt},
			[]string{"tcp://10.0.0.2:7000", "tcp://[2001:db8::2]:7000"}, false},
		{"link-local ipv6 with zone", mdns.ServiceEntry{AddrV6IPAddr: &net.IPAddr{IP: net.ParseIP("fe80::2"), Zone: "eth0"}, Port: 7000, InfoFields: txt},
			[]string{"tcp://[fe80::2%eth0]:7000"}, false},
		{"link-local ipv6 without zone", mdns.ServiceEntry{AddrV6IPAddr: &net.IPAddr{IP: net.ParseIP("fe80::2")}, Port: 7000, InfoFields: txt}, nil, true},
		{"unspecified", mdns.ServiceEntry{AddrV4: net.IPv4zero, Port: 7000, InfoFields: txt}, nil, true},
		{"multicast", mdns.ServiceEntry{AddrV4: net.IPv4(224, 0, 0, 251), Port: 7000, InfoFields: txt}, nil, true},
		{"no port", mdns.ServiceEntry{AddrV4: net.IPv4(10, 0, 0, 2), InfoFields: txt}, nil, true},
		{"bad txt", mdns.ServiceEntry{AddrV4: net.IPv4(10, 0, 0, 2), Port: 7000, InfoFields: []string{"org=acme"}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := peerFromEntry(&tt.entry, now)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted: %+v", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Addrs, tt.want) {
				t.Fatalf("Addrs %q, want %q", p.Addrs, tt.want)
			}
			if !p.Key.Equal(testKey(3)) || p.Org != "acme" || p.RosterVersion != 5 || p.ProtoVersion != 1 || !p.Seen.Equal(now) || p.Host != tt.entry.Host {
				t.Fatalf("got %+v", p)
			}
		})
	}
}

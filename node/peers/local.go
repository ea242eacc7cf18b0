package peers

import (
	"net"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// OrderAddrs puts the addresses to try first first: a Unix socket when
// the peer is on this host (it advertises an address we also hold), then
// TCP addresses. Unix sockets of other hosts are skipped.
func OrderAddrs(addrs []transport.Addr) []transport.Addr {
	local := false
	var unix, tcp []transport.Addr
	for _, a := range addrs {
		switch a.Network {
		case "unix":
			unix = append(unix, a)
		case "tcp":
			tcp = append(tcp, a)
			if IsLocalHostPort(a.Address) {
				local = true
			}
		}
	}
	if !local && len(tcp) > 0 {
		return tcp
	}
	return append(unix, tcp...)
}

// SelfSource is the source of addresses a member claims for itself on
// l: local when the link runs on a Unix socket or comes from an address
// of this host.
func SelfSource(l *transport.Link) Source {
	if l.Network() == "unix" || IsLocalHostPort(l.RemoteAddr()) {
		return SelfLocal
	}
	return Self
}

// localIPs returns this host's interface addresses, listed again at
// most every 10 s. Links come up on many goroutines at once (accept
// loops, dials), hence the mutex.
var localIPs = func() func() map[string]bool {
	var mu sync.Mutex
	var cached map[string]bool
	var at time.Time
	return func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		if cached != nil && time.Since(at) < 10*time.Second {
			return cached
		}
		m := map[string]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					m[ipn.IP.String()] = true
				}
			}
		}
		cached, at = m, time.Now()
		return m
	}
}()

// IsLocalHostPort reports whether host:port hp names this host: a
// loopback address or one of its interfaces' addresses.
func IsLocalHostPort(hp string) bool {
	h, _, err := net.SplitHostPort(hp)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	return ip.IsLoopback() || localIPs()[ip.String()]
}

// Advertise turns bound listen addresses into what peers should dial:
// a wildcard TCP address becomes one address per non-loopback interface
// IP (loopback only when there is nothing else).
func Advertise(lns []*transport.Listener) []string {
	var out []string
	for _, ln := range lns {
		a := ln.Addr()
		if a.Network != "tcp" {
			out = append(out, a.String())
			continue
		}
		h, port, err := net.SplitHostPort(a.Address)
		if err != nil {
			continue
		}
		ip := net.ParseIP(h)
		if ip == nil || !ip.IsUnspecified() {
			out = append(out, a.String())
			continue
		}
		out = append(out, interfaceAddrs(ip.To4() != nil, port)...)
	}
	if len(out) > proto.MaxListenAddrs {
		out = out[:proto.MaxListenAddrs]
	}
	return out
}

// interfaceAddrs lists tcp:// addresses on port for this host's
// interfaces (IPv4 ones only when v4), the non-loopback ones, or the
// loopback ones when there are none.
func interfaceAddrs(v4 bool, port string) []string {
	var ext, lo []string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range addrs {
			ipn, ok := ia.(*net.IPNet)
			if !ok || ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			if v4 && ipn.IP.To4() == nil {
				continue
			}
			s := transport.Addr{Network: "tcp", Address: net.JoinHostPort(ipn.IP.String(), port)}.String()
			if ipn.IP.IsLoopback() {
				lo = append(lo, s)
			} else {
				ext = append(ext, s)
			}
		}
	}
	if len(ext) == 0 {
		return lo
	}
	return ext
}

package proto

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxListenAddrLen bounds one listen address in a handshake payload.
const MaxListenAddrLen = 256

// ErrListenAddr is wrapped by [CheckListenAddr] for an address outside
// the listen-address grammar. Receivers skip such an address; it never
// makes the payload or peer list that carries it malformed.
var ErrListenAddr = errors.New("unusable listen address")

// CheckListenAddr reports whether s is a listen address a peer can dial:
//
//	listen-addr = "tcp://" host ":" port / "unix://" path
//	host        = IPv4 dotted decimal (no leading zeros)
//	            / "[" IPv6 (RFC 4291 text form, no zone) "]"
//	            / DNS name (RFC 1123: dot-separated labels of 1..63
//	              letters, digits and hyphens, no hyphen first or last,
//	              at most 253 bytes, last label not all digits)
//	port        = decimal 1..65535 without leading zeros
//	path        = an absolute, clean path other than "/"
//
// The whole address is at most [MaxListenAddrLen] bytes of UTF-8 and
// holds no control character. An unspecified host (empty, 0.0.0.0 or ::) is not
// dialable and is refused.
func CheckListenAddr(s string) error {
	if err := checkListenAddr(s); err != nil {
		return fmt.Errorf("%w %q: %s", ErrListenAddr, truncate(s, 64), err)
	}
	return nil
}

func checkListenAddr(s string) error {
	if len(s) > MaxListenAddrLen {
		return fmt.Errorf("longer than %d bytes", MaxListenAddrLen)
	}
	if !utf8.ValidString(s) || !printable(s) {
		return errors.New("not UTF-8 text without control characters")
	}
	if p, ok := strings.CutPrefix(s, "unix://"); ok {
		if !strings.HasPrefix(p, "/") || p == "/" || path.Clean(p) != p {
			return errors.New("unix socket path must be absolute and clean and name a file")
		}
		return nil
	}
	hp, ok := strings.CutPrefix(s, "tcp://")
	if !ok {
		return errors.New("want tcp://host:port or unix:///path")
	}
	i := strings.LastIndexByte(hp, ':')
	if i < 0 {
		return errors.New("no port")
	}
	host, port := hp[:i], hp[i+1:]
	if !validPort(port) {
		return errors.New("port must be a decimal number from 1 to 65535")
	}
	if inner, ok := strings.CutPrefix(host, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		ip, err := netip.ParseAddr(inner)
		if !ok || err != nil || !ip.Is6() || ip.Zone() != "" || ip.IsUnspecified() {
			return errors.New("bad IPv6 host")
		}
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.Is4() || ip.IsUnspecified() {
			return errors.New("IPv6 host must be in brackets")
		}
		return nil
	}
	if !validHostName(host) {
		return errors.New("bad host")
	}
	return nil
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 || p[0] == '0' {
		return false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.ContainsFunc(last, func(r rune) bool { return !unicode.IsDigit(r) })
}

// filterListenAddrs returns the addresses of addrs that pass
// [CheckListenAddr] and how many it left out. It returns addrs itself
// when it leaves nothing out.
func filterListenAddrs(addrs []string) ([]string, int) {
	bad := 0
	for _, a := range addrs {
		if CheckListenAddr(a) != nil {
			bad++
		}
	}
	if bad == 0 {
		return addrs, 0
	}
	out := make([]string, 0, len(addrs)-bad)
	for _, a := range addrs {
		if CheckListenAddr(a) == nil {
			out = append(out, a)
		}
	}
	return out, bad
}

// truncate shortens s for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

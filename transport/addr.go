package transport

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
)

// Addr is a link address: a TCP host:port or the absolute path of a Unix
// stream socket. Its text form is "tcp://host:port" or "unix:///abs/path".
type Addr struct {
	// Network is "tcp" or "unix".
	Network string
	// Address is "host:port" for tcp (IPv6 hosts in brackets) and an
	// absolute path for unix.
	Address string
}

// ErrBadAddr reports an address that does not parse.
var ErrBadAddr = errors.New("invalid link address")

// ParseAddr parses "tcp://host:port" or "unix:///abs/path". The host may be
// empty (listen on every interface) and the port must be numeric; the
// path must be absolute and clean.
func ParseAddr(s string) (Addr, error) {
	switch {
	case strings.HasPrefix(s, "tcp://"):
		a := Addr{Network: "tcp", Address: strings.TrimPrefix(s, "tcp://")}
		return a, a.check()
	case strings.HasPrefix(s, "unix://"):
		a := Addr{Network: "unix", Address: strings.TrimPrefix(s, "unix://")}
		return a, a.check()
	}
	return Addr{}, fmt.Errorf("%w: %q: want tcp://host:port or unix:///abs/path", ErrBadAddr, s)
}

func (a Addr) check() error {
	switch a.Network {
	case "tcp":
		host, port, err := net.SplitHostPort(a.Address)
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrBadAddr, a.String(), err)
		}
		if strings.ContainsAny(host, "/?#@ ") {
			return fmt.Errorf("%w: %q: bad host", ErrBadAddr, a.String())
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
			return fmt.Errorf("%w: %q: port must be a number from 0 to 65535", ErrBadAddr, a.String())
		}
		return nil
	case "unix":
		if !strings.HasPrefix(a.Address, "/") {
			return fmt.Errorf("%w: %q: unix socket path must be absolute (unix:///path)", ErrBadAddr, a.String())
		}
		if path.Clean(a.Address) != a.Address || a.Address == "/" {
			return fmt.Errorf("%w: %q: unix socket path must be clean and name a file", ErrBadAddr, a.String())
		}
		if strings.ContainsRune(a.Address, 0) {
			return fmt.Errorf("%w: %q: NUL in path", ErrBadAddr, a.String())
		}
		return nil
	}
	return fmt.Errorf("%w: network %q: want tcp or unix", ErrBadAddr, a.Network)
}

// String returns the text form accepted by [ParseAddr].
func (a Addr) String() string { return a.Network + "://" + a.Address }

// MarshalText implements encoding.TextMarshaler.
func (a Addr) MarshalText() ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Addr) UnmarshalText(b []byte) error {
	p, err := ParseAddr(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}

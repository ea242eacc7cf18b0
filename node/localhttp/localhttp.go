// Package localhttp holds the checks meshd's loopback HTTP servers (the
// status page and the metrics endpoint) share: which listen addresses and
// which Host headers count as loopback.
//
// A server on 127.0.0.1 is reachable from a browser on the same host, and
// so from any web page that browser opens: DNS rebinding points a name the
// attacker controls at 127.0.0.1, and the browser then sends that page's
// requests, with the attacker's name in Host, to the local server. A
// server that answers only requests whose Host names loopback cannot be
// read that way.
package localhttp

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// IsLoopbackHost reports whether host (no port) is "localhost" or a
// loopback IP literal. Other names are refused: they could resolve to
// anything.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// LoopbackHostHeader reports whether a request's Host header (with or
// without a port, IPv6 in brackets) names loopback.
func LoopbackHostHeader(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return IsLoopbackHost(host)
}

// HostGuard wraps next: unless allowRemote, a request whose Host header
// does not name loopback gets 403 with a short text and never reaches
// next.
func HostGuard(next http.Handler, allowRemote bool, what string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !allowRemote && !LoopbackHostHeader(req.Host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, what+" answers only requests for a loopback host\n")
			return
		}
		next.ServeHTTP(w, req)
	})
}

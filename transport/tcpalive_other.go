//go:build !linux

package transport

import "syscall"

// setDeadAfter does nothing here: without TCP_USER_TIMEOUT, the keepalive
// probes (tcpProbeIdle + tcpProbeCount × tcpProbeInterval) find a silent
// peer, and IdleTimeout a link with data stuck in retransmission.
func setDeadAfter(string, string, syscall.RawConn) error { return nil }

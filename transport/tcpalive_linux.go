package transport

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setDeadAfter sets TCP_USER_TIMEOUT on a TCP socket before it connects
// or listens (accepted sockets inherit it): sent data or keepalive probes
// unacknowledged for tcpDeadAfter close the connection.
func setDeadAfter(network, _ string, c syscall.RawConn) error {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(tcpDeadAfter.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

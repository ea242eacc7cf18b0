package transport

import (
	"net"
	"time"
)

// Dead TCP peers are found by the kernel, not by keepalive messages. An
// idle link costs a ping and a pong per KeepaliveInterval, and each is a
// write, a read and a wake-up of the writer and reader goroutines at both
// ends: with hundreds of links per node, most of an idle node's CPU. The
// kernel's TCP keepalive probes the same path for free (no process wakes
// for a probe or its answer), so a TCP link's sockets are set to probe
// after tcpProbeIdle of silence and to give up when what they sent, data
// or probe, stays unanswered for tcpDeadAfter: a peer host that lost
// power, or a cut cable, ends the link within about tcpDeadAfter, with
// TCP's retransmission backoff cut short. KeepaliveInterval and
// IdleTimeout remain for what the kernel cannot see: a peer process that
// is alive but no longer speaks, and links on Unix sockets.
const (
	tcpProbeIdle     = 10 * time.Second
	tcpProbeInterval = time.Second
	tcpProbeCount    = 5
	tcpDeadAfter     = 15 * time.Second
)

// tcpKeepAlive is the keepalive of every TCP link socket.
var tcpKeepAlive = net.KeepAliveConfig{
	Enable:   true,
	Idle:     tcpProbeIdle,
	Interval: tcpProbeInterval,
	Count:    tcpProbeCount,
}

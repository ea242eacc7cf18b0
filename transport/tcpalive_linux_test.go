package transport

import (
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTCPLinkSocketsProbeDeadPeers: both ends of a TCP link, dialled and
// accepted, have the kernel's keepalive and TCP_USER_TIMEOUT set, so a
// dead peer ends the link within tcpDeadAfter without pings.
func TestTCPLinkSocketsProbeDeadPeers(t *testing.T) {
	t.Parallel()
	ln := listen(t, "tcp", testConfig(t, testOrg))
	out, in := pair(t, ln, testConfig(t, testOrg), nil)
	for name, l := range map[string]*Link{"dialled": out, "accepted": in} {
		tc, ok := l.conn.(*net.TCPConn)
		if !ok {
			t.Fatalf("%s: conn is %T", name, l.conn)
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			for opt, o := range map[string][2]int{
				"SO_KEEPALIVE":     {syscall.SOL_SOCKET, syscall.SO_KEEPALIVE},
				"TCP_KEEPIDLE":     {syscall.IPPROTO_TCP, unix.TCP_KEEPIDLE},
				"TCP_KEEPINTVL":    {syscall.IPPROTO_TCP, unix.TCP_KEEPINTVL},
				"TCP_KEEPCNT":      {syscall.IPPROTO_TCP, unix.TCP_KEEPCNT},
				"TCP_USER_TIMEOUT": {syscall.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
			} {
				v, err := unix.GetsockoptInt(int(fd), o[0], o[1])
				if err != nil {
					gerr = err
				}
				got[opt] = v
			}
		}); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		want := map[string]int{
			"SO_KEEPALIVE":     1,
			"TCP_KEEPIDLE":     int(tcpProbeIdle.Seconds()),
			"TCP_KEEPINTVL":    int(tcpProbeInterval.Seconds()),
			"TCP_KEEPCNT":      tcpProbeCount,
			"TCP_USER_TIMEOUT": int(tcpDeadAfter.Milliseconds()),
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s link: %s = %d, want %d", name, k, got[k], v)
			}
		}
	}
}

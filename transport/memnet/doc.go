// Package memnet is an in-memory network for links: listeners and
// connections that never touch a socket, for tests that build nodes, or
// a node/peers Service, on [transport.Config.Net], as wireguard-go's
// conn/bindtest does for its devices.
//
// Its point is testing/synctest: a goroutine blocked on a real socket
// is not durably blocked, so a bubble holding one never advances its
// clock. Every wait here (a read for bytes, a write for room, a
// deadline, an accept) is on channels and timers made inside the
// bubble, so a test can run minutes of dial backoff, keepalives and
// expiry in microseconds, and assert the instant each thing happens.
//
// A [Network] holds listeners by address; each node gets a [Host], its
// view with an IP of its own, which it listens and dials from. A TCP
// listener is at ip:port (port 0 takes a free one); a Unix socket path
// and the loopback addresses belong to the host that listens on them.
// A dial to an address nobody listens on is refused at once
// (ECONNREFUSED). Connections are buffered pipes, DefaultBuffer bytes
// each way like a loopback socket's buffers, with read and write
// deadlines: unlike net.Pipe, a write returns before the peer reads, so
// the link's writer and reader run as they do over TCP, and a reader
// that stops reading blocks its peer's writes only once the buffer is
// full. Close lets the peer read what was written, then EOF.
//
// Create the Network, or at least its listeners and connections, inside
// the bubble that uses them.
package memnet

// Package mdns finds meshd peers on the local link with multicast DNS
// service discovery (RFC 6762, RFC 6763), behind the small [Discovery]
// interface. [New] advertises this node and browses for others with
// github.com/hashicorp/mdns; [NewMemory] is an in-memory twin that lets
// other packages test discovery without multicast.
//
// mDNS is an unauthenticated hint. Anyone on the link can answer with any
// key, org or address; the link handshake decides who a peer really is and
// whether it belongs to the mesh. Static seed peers work without it.
//
// # Records
//
// Each node registers one instance of service "_meshd._tcp" in "local.":
//
//	<fingerprint>._meshd._tcp.local.  SRV  <port> <fingerprint>.local.
//	<fingerprint>.local.              A    <each IPv4 of the interface>
//	<fingerprint>.local.              AAAA <each global IPv6 of the interface>
//	<fingerprint>._meshd._tcp.local.  TXT  "key=ed25519:<base64url>" "org=<org id>" "rv=<roster version>" "pv=1"
//
// The fingerprint (the first 16 hex digits of SHA-256 of the key) only
// keeps instance and host names unique; peers are identified by the key in
// TXT. The host name is our own, not the machine's, so it never collides
// with the name avahi or another responder claims for the machine.
//
// TXT is parsed defensively: at most 32 strings of at most 255 bytes are
// looked at, key names are case-insensitive, only the first occurrence of
// a key counts (RFC 6763 §6.4), and unknown or malformed attributes are
// ignored. An answer without a valid key, org and pv is skipped. rv is 0
// when missing or malformed. A peer's addresses become "tcp://IP:port"
// strings in [Peer.Addrs].
//
// # Browsing
//
// hashicorp/mdns only answers queries and never announces, so a node sees
// a newcomer only when it next asks. [MDNS] queries once at start and then
// every [Config.QueryInterval] (with ±10% jitter), and retries failed
// queries sooner with backoff. The newcomer's own first query finds
// everyone at once, so in practice links form within a second; the
// interval bounds how long the others take to notice on their own.
//
// A peer is reported on [Discovery.Peers] when first seen, again when its
// address set, host, org, protocol version or roster version changes, and
// again every [Config.RefreshEvery] queries as a refresh. Our own answers
// and (unless [Config.AllOrgs]) other orgs' answers are dropped.
//
// # What hashicorp/mdns needs from the host
//
// Measured with Linux network namespaces on a bridge (see internal/netnstest):
//
//   - The library's querier joins 224.0.0.251 without naming an interface,
//     so the kernel picks one by route lookup. With no default route and no
//     route covering 224.0.0.0/4 the join fails with ENODEV and the library
//     drops IPv4 querying. [MDNS] probes for this before every query: if
//     IPv4 cannot join it queries over IPv6 instead (link-local ff02::fb
//     always has a route while IPv6 is enabled), and if neither works [New]
//     fails with [ErrNoMulticast]. Adding the route restores IPv4:
//     "ip route add 224.0.0.0/4 dev eth0".
//   - Queries are sent on [Config.Interface] explicitly (IP_MULTICAST_IF),
//     which needs no route. The responder joins the group on that interface
//     too, also without a route. Its answers go by unicast to the query's
//     source port, so the interface the querier's join landed on does not
//     matter.
//   - IPv6 querying is off whenever IPv4 works. A failed IPv6 send aborts
//     the library's whole query, IPv4 half included, and IPv6 sends fail
//     until duplicate address detection has finished (about 1.7 s after a
//     link comes up, measured) or everywhere IPv6 is disabled. Answers
//     carry A and AAAA records whichever family asked, so nothing is lost.
//   - The responder tolerates failing to bind IPv6; it needs one family.
//   - The library's results channel is written without blocking, and its
//     entries are still written after being sent, so [MDNS] reads them from
//     a large buffer only once the query has ended.
//   - Addresses are passed explicitly, so the library never calls
//     net.LookupIP on the host name. Its querier keeps only the last A and
//     the last AAAA record per instance, so a peer with several addresses
//     is seen with one of each; the handshake carries the full list.
//   - The library's goroutines stop within milliseconds of their sockets
//     being closed, but it gives no way to wait for them. [MDNS.Close]
//     closes the sockets and waits for its own goroutines, including the
//     query in flight, which takes up to [Config.QueryTimeout] to end.
package mdns

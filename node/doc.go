// Package node composes meshd: it owns the links to peers (connection
// manager, admission, one link per peer pair, reconnect with backoff, peer
// exchange), roster gossip, discovery hints, and the control API that
// meshctl talks to over the owner-only Unix socket in the home directory.
//
// Trust flows from one place: the admin-signed roster. A link is admitted
// only when the peer's identity (proved in the Noise handshake) is a
// member of the current roster; roster updates are accepted only under the
// rules of package roster, persisted, and pushed on to every linked peer,
// and members that an update removes are disconnected at once.
package node

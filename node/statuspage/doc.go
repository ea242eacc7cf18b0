// Package statuspage serves meshd's live status page over HTTP: one
// self-contained page (HTML, CSS and vanilla JavaScript embedded in the
// binary, no external assets) that shows the node, the roster, the linked
// peers with presence and link health, the channels, a live tail of
// delivered inbox items and a drawing of the mesh's link graph.
//
// The page is read-only. The server answers GET and HEAD only (405
// otherwise) and offers no action: the control socket stays the only way
// to act on the node. It listens on loopback unless told otherwise
// ([Config.AllowRemote]), and then also refuses requests whose Host names
// anything but a loopback address or "localhost", so a web page elsewhere
// cannot read it through DNS rebinding.
//
// Endpoints:
//
//	GET /             the page (text/html)
//	GET /app.js       its script
//	GET /style.css    its style sheet
//	GET /favicon.svg  its icon
//	GET /api/state    one [Snapshot] as JSON
//	GET /events       text/event-stream: "event: state" with a [Snapshot]
//	                  at once and every [Config.SnapshotInterval]; after
//	                  the first, the newest [Config.Backlog] inbox items,
//	                  oldest first, as "event: backlog"; then each item as
//	                  it is delivered, as "event: item" (data: one api.Item
//	                  as JSON); "event: lagged" when this reader fell
//	                  behind and items were skipped
//
// Everything a peer chose (names, message bodies, request parameters) is
// put into the page as text (textContent), never as markup.
package statuspage

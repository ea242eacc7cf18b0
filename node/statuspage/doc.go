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
// Only the node's owner may read it. Every request must show a token,
// made afresh at each start ([NewToken]), or it gets 401 and no data: as
// "Authorization: Bearer TOKEN", as the login cookie, or once in the
// query of the login URL ([Server.LoginURL], "?token=TOKEN"), which sets
// the cookie (HttpOnly, SameSite=Strict) and redirects to the same path
// without the token, so the page's links and its EventSource carry the
// cookie. Tokens are compared in constant time. meshd keeps the login URL
// in the home's [URLFile] (mode 0600 in the 0700 home) for `meshctl ui`
// and never logs it. docs/SECURITY.md says why a token rather than the
// owner-only control socket: a browser cannot speak HTTP over a Unix
// socket.
//
// Checks run in this order: Host (403), token (401), method (405).
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

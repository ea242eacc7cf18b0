// Package ownpresence is this node's own presence (docs/PROTOCOL.md
// §14.7, docs/AGENTS.md "Presence"): the state it announces follows what
// its local clients do ([Announcer.ClientSeen], [Announcer.ClientWaiting],
// [Announcer.Acted]) or what `presence set` holds ([Announcer.SetPresence]),
// with an optional status note. Its loop ([Announcer.Run]) announces the
// state again every third of the presence TTL, follows the activity as it
// changes, and ages out the peers that went silent; a link that comes up
// is told the current state ([Announcer.SendTo]); a shutdown says Offline
// ([Announcer.AnnounceOffline]).
//
// The presence table itself (package presence) is shared: the receive
// pipeline records the peers' announcements in it, and the announcer
// records its own and renders the table for the control API
// ([Announcer.PresenceTable]). The announcer sees the node through [Host];
// it imports proto, roster, presence, node/api, node/apierr and
// node/peers, never node.
package ownpresence

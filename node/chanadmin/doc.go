// Package chanadmin is what this node decides about channel traffic:
// which version of each channel's policy holds, who may pass, and what
// reaches its inbox.
//
// An [Admin] merges policies (PROTOCOL.md §11.3) from peers, local
// clients and this node's own edits into the channel set under the
// roster's rules, persists them, floods a new version to every other
// link and answers a peer's policy digest with the versions it lacks. It
// signs this node's edits as an admin (create, the next version, the
// tombstone, a draft for other admins to co-sign, the publication of a
// co-signed document), keeps the record of the versions accepted that
// meshctl channel show prints (<home>/channel-versions.json), holds the
// subscriptions' changes, the per-sender channel quota (token buckets,
// docs/SECURITY.md "Channel floods and the mailbox") and the local block
// list (<home>/blocks.json), which keeps a member's envelopes out of the
// inbox.
//
// It sees the node through [Host]: the roster, this node's key and
// signature, member lookup, the links and sending a frame, history
// sync's wake-up, and where it counts and logs. It imports channel,
// proto, roster, node/api, node/apierr and node/peers, never node.
package chanadmin

// Package inboxq answers what the control API and the status page ask of
// the inbox and the history store: inbox pages and the wait for work
// ([Queries.InboxPage]), marking read, search, the requests this node
// sent and their answers, conversations with one peer, channel history,
// replies and subagent results. It owns the inbox's wake-ups (the
// notifier that a wait watches), the event stream's subscribers (the
// broadcaster the commit stage publishes to, each subscriber rendering on
// its own goroutine).
//
// [Queries] reads the history store directly and sees the rest of the
// node through [Host]: names of members and destinations, the lookups of
// members and channels, the decorations of an item that other components
// own (a delivery's failure, attachments, a worker's claim), the agent's
// activity, sending and signing, and the counters. It imports history,
// channel, roster, proto, node/api, node/apierr and node/mailbox (the
// subagent body), never node.
package inboxq

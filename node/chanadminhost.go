package node

import (
	"crypto/ed25519"
	"log/slog"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/chanadmin"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters of node/chanadmin.
var (
	famPolicyAccepted = newFamily("meshd_policy_updates_accepted_total", "Channel policies accepted from peers.")
	famPolicyRejected = newFamily("meshd_policy_updates_rejected_total", "Channel policies rejected, by reason.", "reason")
	famPolicyDigest   = newFamily("meshd_policy_digests_malformed_total", "Policy digest frames that did not parse.")

	// chanAdminCounters maps each counter of node/chanadmin to its metric.
	chanAdminCounters = [chanadmin.NumCounters]counter{
		chanadmin.PolicyPersistFailed:   newCounter("policy.persist_failed", famPersistFailed, "policy"),
		chanadmin.PolicyAccepted:        newCounter("policy.accepted", famPolicyAccepted),
		chanadmin.PolicyMalformed:       newCounter("policy.rejected.malformed", famPolicyRejected, "malformed"),
		chanadmin.PolicyDigestMalformed: newCounter("policy.digest_malformed", famPolicyDigest),
	}
)

// chanAdminHost is the node as node/chanadmin sees it.
type chanAdminHost struct{ n *Node }

// newChanAdmin opens the channel administration over the node's channel
// set and subscriptions.
func newChanAdmin(n *Node, set *channel.Set, subs *channel.Subscriptions) (*chanadmin.Admin, error) {
	cfg := chanadmin.Config{
		Home:               n.cfg.Home,
		ChannelsDir:        n.channelsDir(),
		SenderRate:         n.cfg.ChannelSenderRate,
		SenderBurst:        n.cfg.ChannelSenderBurst,
		SenderBytesPerHour: n.cfg.ChannelSenderBytesPerHour,
	}
	return chanadmin.New(chanAdminHost{n}, set, subs, cfg, n.log)
}

func (h chanAdminHost) Roster() *roster.Roster  { return h.n.Roster() }
func (h chanAdminHost) Self() proto.PubKey      { return h.n.id.Pub }
func (h chanAdminHost) Key() ed25519.PrivateKey { return h.n.id.Key }
func (h chanAdminHost) Links() []*peers.Link    { return h.n.peers.Links() }
func (h chanAdminHost) ChannelsChanged()        { h.n.rx.Sync.ChannelsChanged() }
func (h chanAdminHost) Count(c chanadmin.Counter) {
	h.n.metrics.inc(chanAdminCounters[c])
}
func (h chanAdminHost) Rejected(reason string) { h.n.metrics.Inc("policy.rejected." + reason) }

func (h chanAdminHost) ResolvePeer(q string) (roster.Member, error) { return h.n.resolvePeer(q) }

func (h chanAdminHost) SendFrame(pl *peers.Link, t proto.FrameType, payload []byte) {
	h.n.peers.Send(pl, t, payload)
}

func (h chanAdminHost) Refused(pl *peers.Link, err error) {
	fp := pl.Key.Fingerprint()
	h.n.logRL.warn(h.n.log, "channel policy from peer rejected", fp, "policy.rejected", "peer", fp, "err", err)
}

func (h chanAdminHost) QuotaLogAllowed(fp string) (bool, uint64) {
	return h.n.logRL.allow(h.n.log, slog.LevelWarn, fp, "channel_quota_warning")
}

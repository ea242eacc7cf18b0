package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters counted in this file.
var (
	famPolicyAccepted = newFamily("meshd_policy_updates_accepted_total", "Channel policies accepted from peers.")
	famPolicyRejected = newFamily("meshd_policy_updates_rejected_total", "Channel policies rejected, by reason.", "reason")
	famPolicyDigest   = newFamily("meshd_policy_digests_malformed_total", "Policy digest frames that did not parse.")

	cPolicyPersistFailed     = newCounter("policy.persist_failed", famPersistFailed, "policy")
	cPolicyAccepted          = newCounter("policy.accepted", famPolicyAccepted)
	cPolicyRejectedMalformed = newCounter("policy.rejected.malformed", famPolicyRejected, "malformed")
	cPolicyDigestMalformed   = newCounter("policy.digest_malformed", famPolicyDigest)
)

// CreateChannel creates a channel policy signed by this node, which must
// be a roster admin, applies it, subscribes to it and pushes it to every
// linked peer.
func (n *Node) CreateChannel(req api.CreateChannel) (*channel.Policy, error) {
	r := n.Roster()
	if !r.IsAdmin(n.id.Pub) {
		return nil, forbidden("role too low: only roster admins sign channel policies (this node is %s)", n.myRole())
	}
	name, err := channel.NormalizeName(req.Name)
	if err != nil {
		return nil, badRequest("%w", err)
	}
	if _, ok := n.channels.ByName(name); ok {
		return nil, badRequest("channel #%s exists", name)
	}
	parse := func(what string, in []string) ([]channel.Principal, error) {
		var out []channel.Principal
		for _, s := range in {
			p, err := channel.ParsePrincipal(s, r)
			if err != nil {
				return nil, badRequest("%s: %w", what, err)
			}
			out = append(out, p)
		}
		return out, nil
	}
	readers, err := parse("readers", req.Readers)
	if err != nil {
		return nil, err
	}
	writers, err := parse("writers", req.Writers)
	if err != nil {
		return nil, err
	}
	p, err := channel.New(r.Org, name, readers, writers, !req.NoHistory, n.id.Key)
	if err != nil {
		return nil, badRequest("%w", err)
	}
	if req.RetentionHours != 0 || req.RetentionMessages != 0 {
		if req.RetentionHours < 0 || req.RetentionHours > channel.MaxRetentionHours ||
			req.RetentionMessages < 0 || req.RetentionMessages > channel.MaxRetentionMessages {
			return nil, badRequest("retention of %d hours and %d messages: want 0 (the default) to %d hours and to %d messages",
				req.RetentionHours, req.RetentionMessages, channel.MaxRetentionHours, channel.MaxRetentionMessages)
		}
		p.RetentionHours, p.RetentionMessages = uint32(req.RetentionHours), uint32(req.RetentionMessages)
		if err := p.Sign(n.id.Key); err != nil {
			return nil, badRequest("%w", err)
		}
	}
	if _, err := n.applyPolicy(p, nil); err != nil {
		return nil, err
	}
	if p.CanRead(r, n.id.Pub) {
		if err := n.subs.Set(p.ID, channel.Subscribed); err != nil {
			n.log.Warn("subscribe to new channel", "err", err)
		}
		n.syncer.ChannelsChanged()
	}
	return p, nil
}

// applyPolicy merges p into the channel set; a change is persisted and
// pushed to every link but from.
func (n *Node) applyPolicy(p *channel.Policy, from *peers.Link) (bool, error) {
	out, err := n.channels.Merge(n.Roster(), p)
	if err != nil {
		n.metrics.Inc("policy.rejected." + policyReason(err))
		return false, fmt.Errorf("channel policy #%s v%d refused: %w", p.Name, p.Version, err)
	}
	if !out.Changed {
		return false, nil
	}
	if out.Dropped != nil {
		n.log.Warn("channel name conflict resolved", "name", p.Name, "dropped", out.Dropped.ID)
	}
	if err := n.channels.Save(n.channelsDir()); err != nil {
		n.metrics.inc(cPolicyPersistFailed)
		n.log.Error("persist channel policies", "err", err)
	}
	n.metrics.inc(cPolicyAccepted)
	n.policyApplied(p)
	n.log.Info("channel policy", "name", p.Name, "id", p.ID, "version", p.Version)
	n.syncer.ChannelsChanged()
	b, err := p.Encode()
	if err != nil {
		return true, nil
	}
	links := n.linkList()
	for _, pl := range links {
		if pl != from {
			n.sendFrame(pl, proto.FramePolicy, b)
		}
	}
	return true, nil
}

func policyReason(err error) string {
	switch {
	case errors.Is(err, channel.ErrNotAdmin):
		return "not_admin"
	case errors.Is(err, channel.ErrRollback):
		return "rollback"
	case errors.Is(err, channel.ErrTooFewSignatures):
		return "quorum"
	case errors.Is(err, channel.ErrWrongOrg):
		return "wrong_org"
	case errors.Is(err, channel.ErrNameTaken):
		return "name_taken"
	case errors.Is(err, proto.ErrBadSignature):
		return "bad_signature"
	}
	return "invalid"
}

func (n *Node) handlePolicy(pl *peers.Link, payload []byte) {
	p, err := channel.Parse(payload)
	if err != nil {
		n.metrics.inc(cPolicyRejectedMalformed)
		n.logRL.warn(n.log, "channel policy from peer rejected", pl.Key.Fingerprint(), "policy.rejected", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if _, err := n.applyPolicy(p, pl); err != nil && !errors.Is(err, channel.ErrRollback) {
		n.logRL.warn(n.log, "channel policy from peer rejected", pl.Key.Fingerprint(), "policy.rejected", "peer", pl.Key.Fingerprint(), "err", err)
	}
}

func (n *Node) handlePolicyDigest(pl *peers.Link, payload []byte) {
	var d proto.PolicyDigest
	if err := proto.Unmarshal(payload, &d); err != nil {
		n.metrics.inc(cPolicyDigestMalformed)
		return
	}
	for _, p := range n.channels.Newer(d) {
		if b, err := p.Encode(); err == nil {
			n.sendFrame(pl, proto.FramePolicy, b)
		}
	}
}

func (n *Node) sendPolicyDigest(pl *peers.Link) {
	b, err := proto.Marshal(n.channels.Digest())
	if err == nil {
		n.sendFrame(pl, proto.FramePolicyDigest, b)
	}
}

// Channel returns the channel named (or with the id) q.
func (n *Node) Channel(q string) (api.Channel, error) {
	p, err := n.resolveChannel(q)
	if err != nil {
		return api.Channel{}, err
	}
	c := n.channelInfo(p)
	r := n.Roster()
	for _, v := range n.chanVersions.get(p.ID) {
		cv := api.ChannelVersion{Version: v.Version, Made: time.UnixMilli(v.Timestamp).UTC(), History: v.History,
			Hours: int(v.Hours), Messages: int(v.Messages), Deleted: v.Deleted, Accepted: v.Accepted,
			Signers: []string{}, Readers: labels(v.ReadText, r), Writers: labels(v.WriteText, r)}
		for _, k := range v.Signers {
			cv.Signers = append(cv.Signers, r.Label(k))
		}
		c.Versions = append(c.Versions, cv)
	}
	return c, nil
}

// labels renders principal texts as channelInfo does.
func labels(texts []string, r *roster.Roster) []string {
	out := []string{}
	for _, s := range texts {
		if p, err := channel.ParsePrincipal(s, nil); err == nil {
			s = p.Label(r)
		}
		out = append(out, s)
	}
	return out
}

// NewChannel is [Node.CreateChannel] answering with the API's view.
func (n *Node) NewChannel(req api.CreateChannel) (api.Channel, error) {
	p, err := n.CreateChannel(req)
	if err != nil {
		return api.Channel{}, err
	}
	return n.channelInfo(p), nil
}

// channelInfo renders a policy for the API.
func (n *Node) channelInfo(p *channel.Policy) api.Channel {
	r := n.Roster()
	hours, msgs := p.EffectiveRetention()
	c := api.Channel{
		ID:                p.ID.String(),
		Name:              p.Name,
		Version:           p.Version,
		Readers:           []string{},
		Writers:           []string{},
		Admins:            []string{},
		AllowHistoryFetch: p.AllowHistory,
		RetentionHours:    int(hours.Hours()),
		RetentionMessages: msgs,
		Subscription:      n.subs.Get(p.ID).String(),
		CanRead:           p.CanRead(r, n.id.Pub),
		CanWrite:          p.CanWrite(r, n.id.Pub),
		Deleted:           p.Deleted(),
	}
	for _, x := range p.ReadACL {
		c.Readers = append(c.Readers, x.Label(r))
	}
	for _, x := range p.WriteACL {
		c.Writers = append(c.Writers, x.Label(r))
	}
	for _, k := range p.Admins {
		if m, ok := r.Member(k); ok {
			c.Admins = append(c.Admins, m.Label())
		} else {
			c.Admins = append(c.Admins, k.Fingerprint())
		}
	}
	return c
}

// SetSubscription sets our subscription state for a channel.
func (n *Node) SetSubscription(name, state string) (*api.Channel, error) {
	p, err := n.resolveChannel(name)
	if err != nil {
		return nil, err
	}
	st, err := channel.ParseSubState(state)
	if err != nil {
		return nil, badRequest("%w", err)
	}
	if st != channel.Unsubscribed && p.Deleted() {
		return nil, forbidden("#%s was deleted (policy v%d)", p.Name, p.Version)
	}
	if st != channel.Unsubscribed && !p.CanRead(n.Roster(), n.id.Pub) {
		return nil, forbidden("not a reader of #%s (readers: %s)", p.Name, principals(p.ReadACL))
	}
	if err := n.subs.Set(p.ID, st); err != nil {
		return nil, err
	}
	n.syncer.ChannelsChanged()
	c := n.channelInfo(p)
	return &c, nil
}

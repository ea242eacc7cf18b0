package node

import (
	"errors"
	"net/http"
	"slices"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/roster"
)

// Channel administration: the next policy version, and the tombstone
// that deletes a channel (PROTOCOL.md §11.3). Both are signed by this
// node's key, which must be a roster admin, merged like a policy from a
// peer (so a rollback or a lost concurrent edit is refused) and spread on
// every link.

// adminPolicy resolves q for an edit by this node.
func (n *Node) adminPolicy(q, what string) (*channel.Policy, *roster.Roster, error) {
	r := n.Roster()
	if !r.IsAdmin(n.id.Pub) {
		return nil, nil, forbidden("only roster admins sign channel policies, so only they %s (this node is %s)", what, n.myRole())
	}
	p, err := n.resolveChannel(q)
	if err != nil {
		return nil, nil, err
	}
	return p, r, nil
}

// UpdateChannel signs and spreads the next version of channel q's policy
// with the changes in req.
func (n *Node) UpdateChannel(q string, req api.UpdateChannel) (api.Channel, error) {
	next, err := n.nextPolicy(q, req)
	if err != nil {
		return api.Channel{}, err
	}
	return n.publishOwn(next)
}

// nextPolicy returns the next version of channel q's policy with the
// changes in req, signed by this node.
func (n *Node) nextPolicy(q string, req api.UpdateChannel) (*channel.Policy, error) {
	p, r, err := n.adminPolicy(q, "change a channel")
	if err != nil {
		return nil, err
	}
	next := p.Next()
	if req.Readers != nil {
		if next.ReadACL, err = parsePrincipals("readers", req.Readers, r); err != nil {
			return nil, err
		}
	}
	if req.Writers != nil {
		if next.WriteACL, err = parsePrincipals("writers", req.Writers, r); err != nil {
			return nil, err
		}
	}
	if req.AllowHistoryFetch != nil {
		next.AllowHistory = *req.AllowHistoryFetch
	}
	if req.RetentionHours != nil {
		h := *req.RetentionHours
		if h < 0 || h > channel.MaxRetentionHours {
			return nil, badRequest("retention of %d hours: want 0 (the default) to %d", h, channel.MaxRetentionHours)
		}
		next.RetentionHours = uint32(h)
	}
	if req.RetentionMessages != nil {
		m := *req.RetentionMessages
		if m < 0 || m > channel.MaxRetentionMessages {
			return nil, badRequest("retention of %d messages: want 0 (the default) to %d", m, channel.MaxRetentionMessages)
		}
		next.RetentionMessages = uint32(m)
	}
	switch {
	case next.Deleted() && p.Deleted():
		return nil, badRequest("#%s is deleted: give readers and writers to restore it", p.Name)
	case next.Deleted():
		return nil, badRequest("#%s would have no readers and no writers, which deletes it: use meshctl channel delete", p.Name)
	}
	if err := next.Sign(n.id.Key); err != nil {
		return nil, badRequest("%w", err)
	}
	return next, nil
}

// DeleteChannel signs and spreads the tombstone of channel q.
func (n *Node) DeleteChannel(q string) (api.Channel, error) {
	tomb, err := n.tombstone(q)
	if err != nil {
		return api.Channel{}, err
	}
	return n.publishOwn(tomb)
}

// tombstone returns the tombstone of channel q, signed by this node.
func (n *Node) tombstone(q string) (*channel.Policy, error) {
	p, _, err := n.adminPolicy(q, "delete a channel")
	if err != nil {
		return nil, err
	}
	if p.Deleted() {
		return nil, badRequest("#%s is already deleted (v%d)", p.Name, p.Version)
	}
	tomb := p.Tombstone()
	if err := tomb.Sign(n.id.Key); err != nil {
		return nil, badRequest("%w", err)
	}
	return tomb, nil
}

// hintCosign says how an edit gathers the roster's quorum.
const hintCosign = "the roster's quorum applies to channel edits: sign it to a file with --out FILE, " +
	"have other admins run meshctl channel sign FILE, then meshctl channel publish FILE"

// publishOwn merges a version this node signed and spreads it.
func (n *Node) publishOwn(p *channel.Policy) (api.Channel, error) {
	if _, err := n.applyPolicy(p, nil); err != nil {
		if errors.Is(err, channel.ErrTooFewSignatures) {
			return api.Channel{}, refuse(http.StatusConflict, hintCosign, "%w", err)
		}
		return api.Channel{}, badRequest("%w", err)
	}
	return n.Channel(p.ID.String())
}

// DraftChannel signs the next version of channel q's policy (its
// tombstone when del is set) without applying it, for other admins to
// co-sign (meshctl channel sign) before it is published.
func (n *Node) DraftChannel(q string, req api.UpdateChannel, del bool) (api.PolicyDraft, error) {
	var p *channel.Policy
	var err error
	if del {
		p, err = n.tombstone(q)
	} else {
		p, err = n.nextPolicy(q, req)
	}
	if err != nil {
		return api.PolicyDraft{}, err
	}
	b, err := p.Encode()
	if err != nil {
		return api.PolicyDraft{}, badRequest("%w", err)
	}
	t := channel.CountSignatures(n.Roster(), p)
	return api.PolicyDraft{Channel: p.Name, ID: p.ID.String(), Version: p.Version, Document: b,
		Signatures: t.Have, Required: t.Need}, nil
}

// PublishChannel merges a signed policy document given by a local client
// (an edit its admins co-signed) and spreads it, under the rules of a
// policy from a peer: authority, the quorum for an edit, and no rollback.
func (n *Node) PublishChannel(doc []byte) (api.Channel, error) {
	p, err := channel.Parse(doc)
	if err != nil {
		n.metrics.inc(cPolicyRejectedMalformed)
		return api.Channel{}, badRequest("%w", err)
	}
	if _, err := n.applyPolicy(p, nil); err != nil {
		if errors.Is(err, channel.ErrTooFewSignatures) {
			return api.Channel{}, refuse(http.StatusConflict, "have other admins run: meshctl channel sign FILE", "%w", err)
		}
		return api.Channel{}, badRequest("%w", err)
	}
	return n.Channel(p.ID.String())
}

// policyApplied runs after the set took a new version p: it records the
// version and, for a tombstone, drops our subscription, so nothing of the
// channel reaches the inbox again; its stored history ages out by the
// normal retention rules.
func (n *Node) policyApplied(p *channel.Policy) {
	n.chanVersions.add(p)
	if err := n.chanVersions.save(); err != nil {
		n.metrics.inc(cPolicyPersistFailed)
		n.log.Error("persist channel versions", "err", err)
	}
	if p.Deleted() && n.subs.Get(p.ID) != channel.Unsubscribed {
		if err := n.subs.Set(p.ID, channel.Unsubscribed); err != nil {
			n.log.Warn("unsubscribe from deleted channel", "channel", p.Name, "err", err)
		}
		n.log.Info("channel deleted", "name", p.Name, "id", p.ID, "version", p.Version)
	}
}

// parsePrincipals resolves principal texts against r.
func parsePrincipals(what string, in []string, r *roster.Roster) ([]channel.Principal, error) {
	out := []channel.Principal{}
	for _, s := range in {
		p, err := channel.ParsePrincipal(s, r)
		if err != nil {
			return nil, badRequest("%s: %w", what, err)
		}
		out = append(out, p)
	}
	return slices.Clip(out), nil
}

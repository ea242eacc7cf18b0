package chanadmin

import (
	"errors"
	"net/http"
	"slices"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/roster"
)

// Channel administration: the first version, the next one, and the
// tombstone that deletes a channel (PROTOCOL.md §11.3). Each is signed by
// this node's key, which must be a roster admin, merged like a policy
// from a peer (so a rollback or a lost concurrent edit is refused) and
// spread on every link.

// CreateChannel creates a channel policy signed by this node, which must
// be a roster admin, applies it, subscribes to it and pushes it to every
// linked peer.
func (a *Admin) CreateChannel(req api.CreateChannel) (*channel.Policy, error) {
	r := a.host.Roster()
	self := a.host.Self()
	if !r.IsAdmin(self) {
		return nil, apierr.Forbidden("role too low: only roster admins sign channel policies (this node is %s)", a.myRole())
	}
	name, err := channel.NormalizeName(req.Name)
	if err != nil {
		return nil, apierr.BadRequest("%w", err)
	}
	if _, ok := a.set.ByName(name); ok {
		return nil, apierr.BadRequest("channel #%s exists", name)
	}
	readers, err := parsePrincipals("readers", req.Readers, r)
	if err != nil {
		return nil, err
	}
	writers, err := parsePrincipals("writers", req.Writers, r)
	if err != nil {
		return nil, err
	}
	p, err := a.newPolicy(r.Org, name, readers, writers, req)
	if err != nil {
		return nil, err
	}
	if _, err := a.Apply(p, nil); err != nil {
		return nil, err
	}
	if p.CanRead(r, self) {
		if err := a.subs.Set(p.ID, channel.Subscribed); err != nil {
			a.log.Warn("subscribe to new channel", "err", err)
		}
		a.host.ChannelsChanged()
	}
	return p, nil
}

// newPolicy makes the first version of a channel, signed by this node.
func (a *Admin) newPolicy(org, name string, readers, writers []channel.Principal, req api.CreateChannel) (*channel.Policy, error) {
	p, err := channel.New(org, name, readers, writers, !req.NoHistory, a.host.Key())
	if err != nil {
		return nil, apierr.BadRequest("%w", err)
	}
	if req.RetentionHours != 0 || req.RetentionMessages != 0 {
		if req.RetentionHours < 0 || req.RetentionHours > channel.MaxRetentionHours ||
			req.RetentionMessages < 0 || req.RetentionMessages > channel.MaxRetentionMessages {
			return nil, apierr.BadRequest("retention of %d hours and %d messages: want 0 (the default) to %d hours and to %d messages",
				req.RetentionHours, req.RetentionMessages, channel.MaxRetentionHours, channel.MaxRetentionMessages)
		}
		p.RetentionHours, p.RetentionMessages = uint32(req.RetentionHours), uint32(req.RetentionMessages)
		if err := p.Sign(a.host.Key()); err != nil {
			return nil, apierr.BadRequest("%w", err)
		}
	}
	return p, nil
}

// NewChannel is [Admin.CreateChannel] answering with the API's view.
func (a *Admin) NewChannel(req api.CreateChannel) (api.Channel, error) {
	p, err := a.CreateChannel(req)
	if err != nil {
		return api.Channel{}, err
	}
	return a.ChannelInfo(p), nil
}

// adminPolicy resolves q for an edit by this node.
func (a *Admin) adminPolicy(q, what string) (*channel.Policy, *roster.Roster, error) {
	r := a.host.Roster()
	if !r.IsAdmin(a.host.Self()) {
		return nil, nil, apierr.Forbidden("only roster admins sign channel policies, so only they %s (this node is %s)", what, a.myRole())
	}
	p, err := a.Resolve(q)
	if err != nil {
		return nil, nil, err
	}
	return p, r, nil
}

// UpdateChannel signs and spreads the next version of channel q's policy
// with the changes in req.
func (a *Admin) UpdateChannel(q string, req api.UpdateChannel) (api.Channel, error) {
	next, err := a.nextPolicy(q, req)
	if err != nil {
		return api.Channel{}, err
	}
	return a.publishOwn(next)
}

// nextPolicy returns the next version of channel q's policy with the
// changes in req, signed by this node.
func (a *Admin) nextPolicy(q string, req api.UpdateChannel) (*channel.Policy, error) {
	p, r, err := a.adminPolicy(q, "change a channel")
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
			return nil, apierr.BadRequest("retention of %d hours: want 0 (the default) to %d", h, channel.MaxRetentionHours)
		}
		next.RetentionHours = uint32(h)
	}
	if req.RetentionMessages != nil {
		m := *req.RetentionMessages
		if m < 0 || m > channel.MaxRetentionMessages {
			return nil, apierr.BadRequest("retention of %d messages: want 0 (the default) to %d", m, channel.MaxRetentionMessages)
		}
		next.RetentionMessages = uint32(m)
	}
	switch {
	case next.Deleted() && p.Deleted():
		return nil, apierr.BadRequest("#%s is deleted: give readers and writers to restore it", p.Name)
	case next.Deleted():
		return nil, apierr.BadRequest("#%s would have no readers and no writers, which deletes it: use meshctl channel delete", p.Name)
	}
	if err := next.Sign(a.host.Key()); err != nil {
		return nil, apierr.BadRequest("%w", err)
	}
	return next, nil
}

// DeleteChannel signs and spreads the tombstone of channel q.
func (a *Admin) DeleteChannel(q string) (api.Channel, error) {
	tomb, err := a.tombstone(q)
	if err != nil {
		return api.Channel{}, err
	}
	return a.publishOwn(tomb)
}

// tombstone returns the tombstone of channel q, signed by this node.
func (a *Admin) tombstone(q string) (*channel.Policy, error) {
	p, _, err := a.adminPolicy(q, "delete a channel")
	if err != nil {
		return nil, err
	}
	if p.Deleted() {
		return nil, apierr.BadRequest("#%s is already deleted (v%d)", p.Name, p.Version)
	}
	tomb := p.Tombstone()
	if err := tomb.Sign(a.host.Key()); err != nil {
		return nil, apierr.BadRequest("%w", err)
	}
	return tomb, nil
}

// hintCosign says how an edit gathers the roster's quorum.
const hintCosign = "the roster's quorum applies to channel edits: sign it to a file with --out FILE, " +
	"have other admins run meshctl channel sign FILE, then meshctl channel publish FILE"

// publishOwn merges a version this node signed and spreads it.
func (a *Admin) publishOwn(p *channel.Policy) (api.Channel, error) {
	if _, err := a.Apply(p, nil); err != nil {
		if errors.Is(err, channel.ErrTooFewSignatures) {
			return api.Channel{}, apierr.New(http.StatusConflict, hintCosign, "%w", err)
		}
		return api.Channel{}, apierr.BadRequest("%w", err)
	}
	return a.Channel(p.ID.String())
}

// DraftChannel signs the next version of channel q's policy (its
// tombstone when del is set) without applying it, for other admins to
// co-sign (meshctl channel sign) before it is published.
func (a *Admin) DraftChannel(q string, req api.UpdateChannel, del bool) (api.PolicyDraft, error) {
	var p *channel.Policy
	var err error
	if del {
		p, err = a.tombstone(q)
	} else {
		p, err = a.nextPolicy(q, req)
	}
	if err != nil {
		return api.PolicyDraft{}, err
	}
	b, err := p.Encode()
	if err != nil {
		return api.PolicyDraft{}, apierr.BadRequest("%w", err)
	}
	t := channel.CountSignatures(a.host.Roster(), p)
	return api.PolicyDraft{Channel: p.Name, ID: p.ID.String(), Version: p.Version, Document: b,
		Signatures: t.Have, Required: t.Need}, nil
}

// PublishChannel merges a signed policy document given by a local client
// (an edit its admins co-signed) and spreads it, under the rules of a
// policy from a peer: authority, the quorum for an edit, and no rollback.
func (a *Admin) PublishChannel(doc []byte) (api.Channel, error) {
	p, err := channel.Parse(doc)
	if err != nil {
		a.host.Count(PolicyMalformed)
		return api.Channel{}, apierr.BadRequest("%w", err)
	}
	if _, err := a.Apply(p, nil); err != nil {
		if errors.Is(err, channel.ErrTooFewSignatures) {
			return api.Channel{}, apierr.New(http.StatusConflict, "have other admins run: meshctl channel sign FILE", "%w", err)
		}
		return api.Channel{}, apierr.BadRequest("%w", err)
	}
	return a.Channel(p.ID.String())
}

// parsePrincipals resolves principal texts against r.
func parsePrincipals(what string, in []string, r *roster.Roster) ([]channel.Principal, error) {
	out := []channel.Principal{}
	for _, s := range in {
		p, err := channel.ParsePrincipal(s, r)
		if err != nil {
			return nil, apierr.BadRequest("%s: %w", what, err)
		}
		out = append(out, p)
	}
	return slices.Clip(out), nil
}

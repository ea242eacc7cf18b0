package chanadmin

import (
	"errors"
	"fmt"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Apply merges p into the channel set; a change is persisted and pushed
// to every link but from.
func (a *Admin) Apply(p *channel.Policy, from *peers.Link) (bool, error) {
	out, err := a.set.Merge(a.host.Roster(), p)
	if err != nil {
		a.host.Rejected(policyReason(err))
		return false, fmt.Errorf("channel policy #%s v%d refused: %w", p.Name, p.Version, err)
	}
	if !out.Changed {
		return false, nil
	}
	if out.Dropped != nil {
		a.log.Warn("channel name conflict resolved", "name", p.Name, "dropped", out.Dropped.ID)
	}
	if err := a.set.Save(a.cfg.ChannelsDir); err != nil {
		a.host.Count(PolicyPersistFailed)
		a.log.Error("persist channel policies", "err", err)
	}
	a.host.Count(PolicyAccepted)
	a.applied(p)
	a.log.Info("channel policy", "name", p.Name, "id", p.ID, "version", p.Version)
	a.host.ChannelsChanged()
	b, err := p.Encode()
	if err != nil {
		return true, nil
	}
	for _, pl := range a.host.Links() {
		if pl != from {
			a.host.SendFrame(pl, proto.FramePolicy, b)
		}
	}
	return true, nil
}

// applied runs after the set took a new version p: it records the
// version and, for a tombstone, drops our subscription, so nothing of the
// channel reaches the inbox again; its stored history ages out by the
// normal retention rules.
func (a *Admin) applied(p *channel.Policy) {
	a.versions.add(p)
	if err := a.versions.save(); err != nil {
		a.host.Count(PolicyPersistFailed)
		a.log.Error("persist channel versions", "err", err)
	}
	if p.Deleted() && a.subs.Get(p.ID) != channel.Unsubscribed {
		if err := a.subs.Set(p.ID, channel.Unsubscribed); err != nil {
			a.log.Warn("unsubscribe from deleted channel", "channel", p.Name, "err", err)
		}
		a.log.Info("channel deleted", "name", p.Name, "id", p.ID, "version", p.Version)
	}
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

// HandleFrame takes a policy frame from pl.
func (a *Admin) HandleFrame(pl *peers.Link, payload []byte) {
	p, err := channel.Parse(payload)
	if err != nil {
		a.host.Count(PolicyMalformed)
		a.host.Refused(pl, err)
		return
	}
	if _, err := a.Apply(p, pl); err != nil && !errors.Is(err, channel.ErrRollback) {
		a.host.Refused(pl, err)
	}
}

// HandleDigest answers a policy digest frame from pl with the versions
// newer than the peer's.
func (a *Admin) HandleDigest(pl *peers.Link, payload []byte) {
	var d proto.PolicyDigest
	if err := proto.Unmarshal(payload, &d); err != nil {
		a.host.Count(PolicyDigestMalformed)
		return
	}
	for _, p := range a.set.Newer(d) {
		if b, err := p.Encode(); err == nil {
			a.host.SendFrame(pl, proto.FramePolicy, b)
		}
	}
}

// SendDigest sends pl the digest of the policies held, for a link that
// came up.
func (a *Admin) SendDigest(pl *peers.Link) {
	b, err := proto.Marshal(a.set.Digest())
	if err == nil {
		a.host.SendFrame(pl, proto.FramePolicyDigest, b)
	}
}

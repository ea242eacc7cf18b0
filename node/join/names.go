package join

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// checkInviteName checks the name an invite is to give: valid, and unlike
// every member's name.
func checkInviteName(r *roster.Roster, name string) error {
	if name == "" {
		return nil
	}
	if err := roster.CheckName(name); err != nil {
		return apierr.BadRequest("name: %w", err)
	}
	if o, taken := r.NameTaken(name, proto.PubKey{}); taken {
		return apierr.New(http.StatusConflict, "list roster members with: meshctl roster show", "the roster already has a member named %+q (%s), which %+q looks like",
			o.Name, o.Key.Fingerprint(), name)
	}
	return nil
}

// inviteeName is the name a joiner gets: the invite's, or else the name
// the joiner claims when it is valid and unlike every member's. A refused
// claim is counted and logged, and the joiner joins unnamed.
func (b *Invites) inviteeName(cur *roster.Roster, s *storedInvite, p *proto.HandshakePayload) string {
	if s.Name != "" || p.Name == "" {
		return s.Name
	}
	err := roster.CheckName(p.Name)
	if o, taken := cur.NameTaken(p.Name, p.Identity); err == nil && taken {
		err = fmt.Errorf("it looks like %+q, the name of %s", o.Name, o.Key.Fingerprint())
	}
	if err == nil {
		return p.Name
	}
	b.h.Count(InviteClaimedNameRefused)
	rateLog(b.rl, b.log, slog.LevelInfo, "invite: the joiner's claimed name is refused; it joins unnamed",
		p.Identity.Fingerprint(), "claimed_name", "peer", p.Identity.Fingerprint(), "claimed_name", fmt.Sprintf("%+q", p.Name), "err", err)
	return ""
}

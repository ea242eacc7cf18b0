package channel

import (
	"fmt"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Check decides whether p may be trusted under the roster r: it must be
// for r's org ([ErrWrongOrg]), signed by at least one key, every
// signature must verify over the signed body (wrapping
// [proto.ErrBadSignature]), and every signer and every channel admin it
// lists must be an admin of r ([ErrNotAdmin], naming the key). A
// signature by anyone else spoils the whole document rather than being
// ignored, so a policy never claims authority it lacks. One admin
// signature creates a channel (version 1); an edit (a later version,
// a tombstone included) needs r's quorum of admin signatures
// ([ErrTooFewSignatures], see [Tally]).
func Check(r *roster.Roster, p *Policy) error {
	if p.Org != r.Org {
		return fmt.Errorf("%w: %s is for org %q, the roster is for org %q", ErrWrongOrg, p, p.Org, r.Org)
	}
	if _, err := p.signedBody(); err != nil {
		return err
	}
	signers, err := p.Doc.ValidSigners(proto.DomainPolicy)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, k := range signers {
		if !r.IsAdmin(k) {
			return fmt.Errorf("%w: %s is signed by %s, not an admin of %s", ErrNotAdmin, p, r.Label(k), r)
		}
	}
	for _, k := range p.Admins {
		if !r.IsAdmin(k) {
			return fmt.Errorf("%w: %s lists channel admin %s, not an admin of %s", ErrNotAdmin, p, r.Label(k), r)
		}
	}
	if t := CountSignatures(r, p); t.Missing() > 0 {
		return fmt.Errorf("%w: %s has %d of %d required admin signatures (the quorum of %s)", ErrTooFewSignatures, p, t.Have, t.Need, r)
	}
	return nil
}

// Tally counts a policy's admin signatures against what it needs.
type Tally struct {
	Have int // distinct valid signatures by admins of the roster
	Need int // 1 for a new channel (version 1), else the roster's quorum
}

// Missing is how many more admin signatures the policy needs.
func (t Tally) Missing() int { return max(t.Need-t.Have, 0) }

// CountSignatures tallies p's valid signatures by admins of r. A new
// channel (version 1) needs one; an edit needs r's quorum, as a roster
// update does (PROTOCOL.md §11.2).
func CountSignatures(r *roster.Roster, p *Policy) Tally {
	t := Tally{Need: 1}
	if p.Version > 1 {
		t.Need = r.Quorum()
	}
	if p.Doc == nil {
		return t
	}
	signers, err := p.Doc.ValidSigners(proto.DomainPolicy)
	if err != nil {
		return t
	}
	seen := map[proto.PubKey]bool{}
	for _, k := range signers {
		if r.IsAdmin(k) && !seen[k] {
			seen[k] = true
			t.Have++
		}
	}
	return t
}

// CheckUpdate decides whether next may replace cur: next must pass
// [Check], be for the same channel ([ErrInvalid] otherwise) and have a
// strictly greater version ([ErrRollback]).
func CheckUpdate(r *roster.Roster, cur, next *Policy) error {
	if err := Check(r, next); err != nil {
		return err
	}
	if next.ID != cur.ID {
		return fmt.Errorf("%w: update %s is for channel %s, not %s", ErrInvalid, next, next.ID, cur.ID)
	}
	if next.Version <= cur.Version {
		return fmt.Errorf("%w: %s is not newer than the current v%d", ErrRollback, next, cur.Version)
	}
	return nil
}

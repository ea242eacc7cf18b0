package roster

import (
	"fmt"
	"strings"

	"github.com/meshd/meshd/proto"
)

// Tally is the outcome of counting a roster's signatures against the
// admins of an authority roster (the current roster for an update, the
// roster itself for a bootstrap).
type Tally struct {
	// Admins are signers that are admins of the authority: they count.
	Admins []proto.PubKey
	// Others are signers that are not, and do not count.
	Others []proto.PubKey
	// Need is the authority's effective quorum.
	Need int
}

// Missing returns how many more admin signatures are needed.
func (t Tally) Missing() int { return max(t.Need-len(t.Admins), 0) }

// CountSignatures verifies every signature of r over its signed body and
// counts those made by admins of authority. Any bad signature fails the
// count with an error wrapping [proto.ErrBadSignature], as does a roster
// whose fields were changed after signing ([ErrUnsigned]).
func CountSignatures(authority, r *Roster) (Tally, error) {
	t := Tally{Need: authority.Quorum()}
	if _, err := r.signedBody(); err != nil {
		return t, err
	}
	signers, err := r.Doc.ValidSigners(proto.DomainRoster)
	if err != nil {
		return t, fmt.Errorf("%s: %w", r, err)
	}
	for _, s := range signers {
		if authority.IsAdmin(s) {
			t.Admins = append(t.Admins, s)
		} else {
			t.Others = append(t.Others, s)
		}
	}
	return t, nil
}

// CheckBootstrap decides whether r may be trusted with nothing to compare
// it against: the first roster a node is given. r must be signed by at
// least its own quorum of the admins it lists.
func CheckBootstrap(r *Roster) error {
	t, err := CountSignatures(r, r)
	if err != nil {
		return err
	}
	return t.check(r, "admin it lists itself", "its own quorum")
}

// CheckUpdate decides whether next may replace cur: it must be for the
// same org ([ErrWrongOrg]), have a greater version ([ErrRollback]), and
// carry valid signatures from at least cur's quorum of cur's admins.
// Signatures by anyone who is not an admin of cur do not count: when no
// signer is, the error is [ErrUnknownSigner], otherwise
// [ErrTooFewSignatures]. New admins that next adds can sign only the
// update after it.
func CheckUpdate(cur, next *Roster) error {
	if next.Org != cur.Org {
		return fmt.Errorf("%w: update is for org %q, the current roster is for org %q", ErrWrongOrg, next.Org, cur.Org)
	}
	if next.Version <= cur.Version {
		return fmt.Errorf("%w: %q v%d is not newer than the current v%d", ErrRollback, next.Org, next.Version, cur.Version)
	}
	t, err := CountSignatures(cur, next)
	if err != nil {
		return err
	}
	return t.check(next, fmt.Sprintf("admin of the current v%d", cur.Version), fmt.Sprintf("quorum of the current v%d", cur.Version))
}

// check turns a tally into a decision. admin and quorum say whose admins
// and quorum count, for the messages.
func (t Tally) check(r *Roster, admin, quorum string) error {
	switch {
	case len(t.Admins) == 0 && len(t.Others) == 0:
		return fmt.Errorf("%w: %s is unsigned; it needs %d signatures (%s)", ErrTooFewSignatures, r, t.Need, quorum)
	case len(t.Admins) == 0:
		return fmt.Errorf("%w: %s is signed only by %s, none of them an %s", ErrUnknownSigner, r, fingerprints(t.Others), admin)
	case len(t.Admins) < t.Need:
		return fmt.Errorf("%w: %s has %d of %d required admin signatures (%s)", ErrTooFewSignatures, r, len(t.Admins), t.Need, quorum)
	}
	return nil
}

func fingerprints(keys []proto.PubKey) string {
	fps := make([]string, len(keys))
	for i, k := range keys {
		fps[i] = k.Fingerprint()
	}
	return strings.Join(fps, ", ")
}

package roster

import (
	"errors"
	"fmt"
	"strings"
)

// Errors callers decide on. Match them with errors.Is; the messages of the
// wrapping errors name the org, versions and keys involved.
var (
	// ErrInvalid: a roster breaks a structural rule (no admin, unsorted or
	// duplicate members, an unknown role, a name or org id out of bounds).
	ErrInvalid = errors.New("invalid roster")
	// ErrUnknownRole: a role name or number that is not one of the four roles.
	ErrUnknownRole = errors.New("unknown role")
	// ErrWrongOrg: an update is for another org than the current roster.
	ErrWrongOrg = errors.New("wrong org")
	// ErrRollback: an update's version is not newer than the current one.
	ErrRollback = errors.New("roster rollback")
	// ErrUnknownSigner: a roster is signed, but by no admin whose signature counts.
	ErrUnknownSigner = errors.New("unknown signer")
	// ErrTooFewSignatures: fewer admins signed than the quorum requires.
	ErrTooFewSignatures = errors.New("too few signatures")
	// ErrUnsigned: a roster has changes that no one has signed yet.
	ErrUnsigned = errors.New("roster not signed")
	// ErrNotMember: a key or query names no member of the roster.
	ErrNotMember = errors.New("not a member")
	// ErrDuplicateMember: adding a key that is already a member.
	ErrDuplicateMember = errors.New("already a member")
	// ErrDuplicateName: adding or naming a member with a name another member has.
	ErrDuplicateName = errors.New("name already in use")
	// ErrLastAdmin: an edit would leave the roster without an admin.
	ErrLastAdmin = errors.New("last admin")
	// ErrQuorum: a quorum larger than the number of admins.
	ErrQuorum = errors.New("quorum exceeds admins")
	// ErrAmbiguous: a lookup matched several members; see [AmbiguousError].
	ErrAmbiguous = errors.New("ambiguous member")
)

// AmbiguousError is returned by [Roster.Lookup] when a query matches
// several members. It matches [ErrAmbiguous] with errors.Is.
type AmbiguousError struct {
	Query   string
	Matches []Member
}

// Error lists the matches, so the user can pick a precise query.
func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %q matches %d members:", ErrAmbiguous, e.Query, len(e.Matches))
	for i, m := range e.Matches {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s", m.Label())
	}
	b.WriteString("; use the full key")
	return b.String()
}

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

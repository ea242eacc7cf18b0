package channel

import "errors"

// Errors callers decide on. Match them with errors.Is; the wrapping
// errors name the channel, versions and keys involved.
var (
	// ErrInvalid: a policy breaks a structural rule (unsorted or duplicate
	// lists, a principal with both or neither field, a retention beyond
	// its limit, a channel id that is not a UUIDv7, an org id out of bounds).
	ErrInvalid = errors.New("invalid channel policy")
	// ErrBadName: a channel name that is not 1..64 characters of
	// [a-z0-9][a-z0-9._-]*.
	ErrBadName = errors.New("invalid channel name")
	// ErrUnsigned: a policy has no signature, or its fields were changed
	// after it was signed.
	ErrUnsigned = errors.New("channel policy not signed")
	// ErrNotAdmin: a policy is signed by, or lists as a channel admin, a
	// key that is not an admin of the current roster.
	ErrNotAdmin = errors.New("not a roster admin")
	// ErrRollback: an update's version is not newer than the one held.
	ErrRollback = errors.New("channel policy rollback")
	// ErrWrongOrg: a policy is for another org than the roster.
	ErrWrongOrg = errors.New("wrong org")
	// ErrNameTaken: another channel of the org holds the name and keeps it.
	ErrNameTaken = errors.New("channel name taken")
	// ErrTooFewSignatures: an edit (a version after the first) carries
	// fewer admin signatures than the roster's quorum.
	ErrTooFewSignatures = errors.New("too few admin signatures")
	// ErrUnknownChannel: no channel has that id or name.
	ErrUnknownChannel = errors.New("unknown channel")
)

package home

import (
	"errors"
	"fmt"
)

// ErrUnsafeMode: the home, or its mailbox, is owned by another user or
// writable by others, so what is in it cannot be trusted. meshd refuses to
// start, as sshd's StrictModes refuses a ~/.ssh others may write to.
var ErrUnsafeMode = errors.New("unsafe permissions")

// Sharing says whether a group may read the mailbox (meshd's
// mailbox_group), which needs the home to let that group through.
type Sharing struct {
	GroupID  int
	GroupSet bool
}

// Secure checks the owner and mode of the home and of its mailbox before
// meshd uses them, creating the home (0700) if it is missing, and returns
// a line for each mode it repaired.
//
// The choice, per case:
//   - owned by another user, or writable by group or others: refuse with
//     [ErrUnsafeMode] and a message naming the mode and the fix. Someone
//     else could have replaced the key, the roster or a file in the
//     outbox; a chmod would hide that, so a person looks first.
//   - readable or listable by group or others (0755 from a mkdir by hand,
//     a umask, or an older meshd's mailbox): repair to the mode meshd
//     makes, and say so. Nothing is exposed that the chmod does not end,
//     and a refusal would stop every upgraded node for no gain.
//
// The modes meshd makes are 0700 for the home and the mailbox; with a
// group, the home is 0710 and given to the group (members may pass, not
// list) and the mailbox 0750 with the setgid bit. On Windows, where modes
// mean little, Secure does nothing.
func (h Home) Secure(s Sharing) (repaired []string, err error) {
	return h.secure(s)
}

// unsafeModeError builds the refusal for path with mode.
func unsafeModeError(path string, mode uint32, why, fix string) error {
	return fmt.Errorf("%w: %s has mode %04o: %s; fix: %s", ErrUnsafeMode, path, mode&0o7777, why, fix)
}

package channel

import (
	"fmt"
	"strings"
)

// MaxNameLen bounds a channel name.
const MaxNameLen = 64

// CheckName checks a channel name as it travels: 1..[MaxNameLen]
// characters, the first in [a-z0-9] and the rest in [a-z0-9._-]. Names are
// lowercase ASCII so that one name has one spelling: they appear in
// mailbox headers and file names, and a name that differed only in case
// or by a look-alike character could impersonate another channel.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q: must be 1..%d characters", ErrBadName, name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("%w: %q: want [a-z0-9][a-z0-9._-]*", ErrBadName, name)
		}
	}
	return nil
}

// NormalizeName turns what a human typed into a channel name: it trims
// surrounding space, strips one leading '#' (a UI convention, never on the
// wire) and lowercases ASCII letters, then checks the result with
// [CheckName]. Only ASCII is folded, so no non-ASCII character can fold
// into a valid name.
func NormalizeName(s string) (string, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "#")
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	name := string(b)
	if err := CheckName(name); err != nil {
		return "", err
	}
	return name, nil
}

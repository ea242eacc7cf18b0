package roster

import "fmt"

// Role is a member's authority. Roles are ordered: a higher role can do
// everything a lower one can, so checks are plain comparisons (see
// [Role.AtLeast]). The numbers travel on the wire; never renumber.
type Role uint8

// The roles, lowest first. 0 is not a role.
const (
	RoleObserver Role = 1 // reads channels it may read; never writes
	RoleMember   Role = 2 // reads and writes channels
	RoleOperator Role = 3 // may also send Requests
	RoleAdmin    Role = 4 // may also sign rosters and channel policies
)

var roleNames = [...]string{"", "observer", "member", "operator", "admin"}

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool { return r >= RoleObserver && r <= RoleAdmin }

// AtLeast reports whether r is o or higher.
func (r Role) AtLeast(o Role) bool { return r >= o }

// String returns the lowercase name of the role.
func (r Role) String() string {
	if r.Valid() {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole parses a lowercase role name.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if i > 0 && n == s {
			return Role(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want observer, member, operator or admin)", ErrUnknownRole, s)
}

// MarshalText implements encoding.TextMarshaler (used by JSON output).
func (r Role) MarshalText() ([]byte, error) {
	if !r.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownRole, uint8(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

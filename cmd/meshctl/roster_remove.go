package main

import (
	"fmt"

	"github.com/meshd/meshd/roster"
)

const usageRosterRemove = `usage: meshctl roster remove MEMBER [--file FILE] [--out FILE] [--json]

Remove MEMBER (a key, fingerprint or name) from the roster, as the next
version signed by this admin. The last admin, or an admin the quorum still
needs, cannot be removed.

flags:
` + usageEditFlags + `
examples:
  meshctl roster remove bob
  meshctl roster remove 1a2b3c4d5e6f7a8b
`

func runRosterRemove(a *app, fl *editFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	return a.editRoster(*fl, func(cur, next *roster.Roster) (string, error) {
		m, err := resolveMember(cur, pos[0])
		if err != nil {
			return "", err
		}
		if err := next.Remove(m.Key); err != nil {
			return "", err
		}
		return fmt.Sprintf("removed %s %s", m.Role, m.Label()), nil
	})
}

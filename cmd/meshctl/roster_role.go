package main

import (
	"fmt"

	"github.com/meshd/meshd/roster"
)

const usageRosterRole = `usage: meshctl roster role MEMBER ROLE [--file FILE] [--out FILE] [--json]

Set the role of MEMBER (a key, fingerprint or name) to ROLE (observer,
member, operator or admin), as the next version signed by this admin.

flags:
` + usageEditFlags + `
examples:
  meshctl roster role bob operator
`

func runRosterRole(a *app, fl *editFlags, pos []string) error {
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	role, err := roster.ParseRole(pos[1])
	if err != nil {
		return a.usageErrorf("ROLE: %v", err)
	}
	return a.editRoster(*fl, func(cur, next *roster.Roster) (string, error) {
		m, err := resolveMember(cur, pos[0])
		if err != nil {
			return "", err
		}
		if m.Role == role {
			return "", fmt.Errorf("%s is already %s in roster %q v%d", m.Label(), role, cur.Org, cur.Version)
		}
		if err := next.SetRole(m.Key, role); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s is now %s (was %s)", m.Label(), role, m.Role), nil
	})
}

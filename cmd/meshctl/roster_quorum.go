package main

import (
	"fmt"
	"strconv"

	"github.com/meshd/meshd/roster"
)

const usageRosterQuorum = `usage: meshctl roster quorum N [--file FILE] [--out FILE] [--json]

Set the roster's quorum: how many of its admins must sign the version after
this one. N is 1 up to the number of admins. The change itself is signed
under the current quorum.

flags:
` + usageEditFlags + `
examples:
  meshctl roster quorum 2
`

func runRosterQuorum(a *app, fl *editFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[0])
	if err != nil || n < 1 {
		return a.usageErrorf("N must be a positive number, got %q", pos[0])
	}
	return a.editRoster(*fl, func(cur, next *roster.Roster) (string, error) {
		if cur.Quorum() == n {
			return "", fmt.Errorf("the quorum of roster %q v%d is already %d", cur.Org, cur.Version, n)
		}
		if err := next.SetQuorum(n); err != nil {
			return "", err
		}
		return fmt.Sprintf("quorum is now %d of %d admins (was %d)", n, len(next.Admins()), cur.Quorum()), nil
	})
}

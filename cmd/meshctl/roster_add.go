package main

import (
	"fmt"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageRosterAdd = `usage: meshctl roster add KEY --role ROLE [--name NAME] [--archive] [--file FILE] [--out FILE] [--json]

Add the node with public key KEY (the full "ed25519:..." text that
'meshctl id' prints on that node) to the roster, as the next version signed
by this admin.

flags:
  --role ROLE   observer, member, operator or admin (required)
  --name NAME   the member's display name, unique in the roster
  --archive     the node keeps long history for others to sync from
` + usageEditFlags + `
examples:
  meshctl roster add ed25519:KEY --role operator --name ci-runner
  meshctl roster add ed25519:KEY --role member --archive --name archive1
`

func runRosterAdd(a *app, args []string) error {
	fs := a.flagSet()
	roleFlag := fs.String("role", "", "")
	name := fs.String("name", "", "")
	archive := fs.Bool("archive", false, "")
	var ef editFlags
	ef.register(fs)
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	key, err := proto.ParsePubKey(pos[0])
	if err != nil {
		return a.usageErrorf("KEY: %v (want the full key that 'meshctl id' prints)", err)
	}
	if *roleFlag == "" {
		return a.usageErrorf("--role is required")
	}
	role, err := roster.ParseRole(*roleFlag)
	if err != nil {
		return a.usageErrorf("--role: %v", err)
	}
	return a.editRoster(ef, func(_, next *roster.Roster) (string, error) {
		m := roster.Member{Key: key, Role: role, Name: *name, Archive: *archive}
		if err := next.Add(m); err != nil {
			return "", err
		}
		return fmt.Sprintf("added %s as %s", m.Label(), role), nil
	})
}

package main

import (
	"fmt"

	"github.com/meshd/meshd/proto"
)

const usagePresenceSet = `usage: meshctl presence set online|away|offline [--json]

Announce this node's presence to the org: online (working and answering),
away (up, but slow to answer) or offline (about to stop). meshd repeats the
announcement to keep it fresh.

examples:
  meshctl presence set away
`

func runPresenceSet(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if _, err := proto.ParsePresenceState(pos[0]); err != nil {
		return a.usageErrorf("%v", err)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().SetPresence(ctx, pos[0])
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(p)
	}
	fmt.Fprintf(a.Stdout, "announced %s\n", pos[0])
	return nil
}

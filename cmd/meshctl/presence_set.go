package main

import (
	"fmt"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

const usagePresenceSet = `usage: meshctl presence set online|away|offline [--for D] [--json]
       meshctl presence set auto [--json]

meshd announces this node's presence from what its agent does: online
while it reads, sends or answers, away while it waits on the inbox (or
when no client has called meshd for presence_away_after), offline after
presence_offline_after without any, and at shutdown. An agent loop needs
no presence calls.

presence set overrides that for a while: online (working and answering),
away (up, but slow to answer) or offline (about to stop), held for --for
(default 30m, at most 168h); then presence follows the agent again.
"auto" ends the override now.

flags:
  --for D    how long the override holds (like 90m); default 30m

examples:
  meshctl presence set away --for 2h
  meshctl presence set auto
`

func runPresenceSet(a *app, args []string) error {
	fs := a.flagSet()
	dur := fs.Duration("for", 0, "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if pos[0] != "auto" {
		if _, err := proto.ParsePresenceState(pos[0]); err != nil {
			return a.usageErrorf("%v (or auto)", err)
		}
	} else if *dur != 0 {
		return a.usageErrorf("--for does not go with auto")
	}
	if *dur < 0 || (*dur > 0 && *dur < time.Second) || *dur > 168*time.Hour {
		return a.usageErrorf("--for %v: want 1s to 168h", *dur)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().SetPresenceFor(ctx, api.SetPresence{State: pos[0], ForSeconds: int(dur.Round(time.Second) / time.Second)})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(p)
	}
	if ag := p.Agent; ag != nil && ag.Source == "override" {
		fmt.Fprintf(a.Stdout, "announced %s until %s; then presence follows the agent again\n", ag.State, ag.Until.Local().Format(time.TimeOnly))
	} else if ag != nil {
		fmt.Fprintf(a.Stdout, "presence follows the agent again: %s (%s)\n", ag.State, ag.Reason)
	}
	return nil
}

package main

import (
	"flag"
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

// presenceSetFlags are the flags of 'meshctl presence set'.
type presenceSetFlags struct {
	dur time.Duration
}

func (fl *presenceSetFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&fl.dur, "for", 0, "")
}

func runPresenceSet(a *app, fl *presenceSetFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if pos[0] != "auto" {
		if _, err := proto.ParsePresenceState(pos[0]); err != nil {
			return a.usageErrorf("%v (or auto)", err)
		}
	} else if fl.dur != 0 {
		return a.usageErrorf("--for does not go with auto")
	}
	if fl.dur < 0 || (fl.dur > 0 && fl.dur < time.Second) || fl.dur > 168*time.Hour {
		return a.usageErrorf("--for %v: want 1s to 168h", fl.dur)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().SetPresenceFor(ctx, api.SetPresence{State: pos[0], ForSeconds: int(fl.dur.Round(time.Second) / time.Second)})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(p)
	}
	switch ag := p.Agent; {
	case ag == nil: // a meshd that predates presence from activity
		fmt.Fprintf(a.Stdout, "announced %s\n", pos[0])
	case ag.Source == "override":
		fmt.Fprintf(a.Stdout, "announced %s until %s; then presence follows the agent again\n",
			printable(ag.State, false), ag.Until.Local().Format(time.TimeOnly))
	default:
		fmt.Fprintf(a.Stdout, "presence follows the agent again: %s (%s)\n", printable(ag.State, false), printable(ag.Reason, false))
	}
	return nil
}

const usagePresenceNote = `usage: meshctl presence note TEXT [--for D] [--json]
       meshctl presence note --clear [--json]

Announce a short status note with this node's presence, such as "running
tests on main": at most 256 bytes on one line. Peers show it in meshctl
presence (and list_peers) while the node is not offline. It holds for
--for (default 30m, at most 168h); --clear withdraws it at once. Nodes
that predate notes see the presence without it.

flags:
  --for D    how long the note holds (like 2h); default 30m
  --clear    withdraw the note

examples:
  meshctl presence note 'running tests on main' --for 20m
  meshctl presence note --clear
`

// presenceNoteFlags are the flags of 'meshctl presence note'.
type presenceNoteFlags struct {
	dur   time.Duration
	clear bool
}

func (fl *presenceNoteFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&fl.dur, "for", 0, "")
	fs.BoolVar(&fl.clear, "clear", false, "")
}

func runPresenceNote(a *app, fl *presenceNoteFlags, pos []string) error {
	note := ""
	if fl.clear {
		if err := a.nargs(pos, 0, 0); err != nil {
			return err
		}
	} else {
		if err := a.nargs(pos, 1, 1); err != nil {
			return err
		}
		if note = pos[0]; note == "" {
			return a.usageErrorf("TEXT is empty: give a note, or --clear")
		}
		if err := proto.CheckPresenceNote(note); err != nil {
			return a.usageErrorf("%v", err)
		}
	}
	if fl.dur < 0 || (fl.dur > 0 && fl.dur < time.Second) || fl.dur > 168*time.Hour {
		return a.usageErrorf("--for %v: want 1s to 168h", fl.dur)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().SetPresenceFor(ctx, api.SetPresence{Note: &note, ForSeconds: int(fl.dur.Round(time.Second) / time.Second)})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(p)
	}
	if note == "" {
		fmt.Fprintln(a.Stdout, "note withdrawn")
	} else if p.Agent != nil {
		fmt.Fprintf(a.Stdout, "announced the note %q until %s\n", printable(note, false), p.Agent.NoteUntil.Local().Format(time.TimeOnly))
	}
	return nil
}

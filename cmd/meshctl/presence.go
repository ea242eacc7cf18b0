package main

import (
	"github.com/meshd/meshd/node/api"

	"fmt"
	"time"
)

const usagePresence = `usage: meshctl presence [--json]
       meshctl presence set online|away|offline [--for D] [--json]
       meshctl presence set auto [--json]
       meshctl presence note TEXT|--clear [--for D] [--json]

Show the presence table: every node this meshd has heard announce its
presence, with the state it announced and its state now. A node silent
for longer than the presence TTL counts as offline, whatever it last
announced. "(self)" marks this node, and the last line says why it
announces what it does: meshd follows its agent (online while it reads,
sends or answers, away while it waits on the inbox or when no client has
called for a while, offline after a longer while), unless presence set
overrides it.

commands:

examples:
  meshctl presence
  meshctl presence --json
`

func runPresence(a *app, _ *noFlags, pos []string) error {
	p, printed, err := fetch(a, pos, (*api.Client).Presence)
	if err != nil || printed {
		return err
	}
	if len(p.Entries) == 0 {
		fmt.Fprintln(a.Stdout, "no presence heard yet")
		return printAgentPresence(a, p.Agent)
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "NAME\tFINGERPRINT\tSTATE\tANNOUNCED\tLAST HEARD\tNOTE")
	now := time.Now()
	for _, e := range p.Entries {
		name := nameText(e.Name)
		if name == "" {
			name = "-"
		}
		if e.Self {
			name += " (self)"
		}
		announced := printable(e.Announced, false)
		if announced == "" {
			announced = "-"
		}
		heard := "never"
		if !e.LastHeard.IsZero() {
			heard = ago(now.Sub(e.LastHeard)) + " ago"
		}
		note := printable(e.Note, false)
		if note == "" {
			note = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, printable(e.Fingerprint, false), printable(e.State, false), announced, heard, note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.TTLSeconds > 0 {
		fmt.Fprintf(a.Stdout, "(offline after %s without presence)\n", ago(time.Duration(p.TTLSeconds*float64(time.Second))))
	}
	return printAgentPresence(a, p.Agent)
}

// printAgentPresence says why this node announces what it does.
func printAgentPresence(a *app, ag *api.AgentPresence) error {
	if ag == nil {
		return nil
	}
	if ag.Source == "override" {
		_, err := fmt.Fprintf(a.Stdout, "this node: %s, set by presence set until %s (meshctl presence set auto ends it)\n",
			printable(ag.State, false), ag.Until.Local().Format(time.TimeOnly))
		return err
	}
	_, err := fmt.Fprintf(a.Stdout, "this node: %s, following its agent: %s\n", printable(ag.State, false), printable(ag.Reason, false))
	return err
}

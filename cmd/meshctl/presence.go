package main

import (
	"fmt"
	"time"
)

const usagePresence = `usage: meshctl presence [--json]
       meshctl presence set online|away|offline [--json]

Show the presence table: every node this meshd has heard announce its
presence, with the state it announced and its state now. A node silent
for longer than the presence TTL counts as offline, whatever it last
announced. "(self)" marks this node.

commands:
`

func runPresence(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().Presence(ctx)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(p)
	}
	if len(p.Entries) == 0 {
		fmt.Fprintln(a.Stdout, "no presence heard yet")
		return nil
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "NAME\tFINGERPRINT\tSTATE\tANNOUNCED\tLAST HEARD")
	now := time.Now()
	for _, e := range p.Entries {
		name := printable(e.Name, false)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, printable(e.Fingerprint, false), printable(e.State, false), announced, heard)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.TTLSeconds > 0 {
		fmt.Fprintf(a.Stdout, "(offline after %s without presence)\n", ago(time.Duration(p.TTLSeconds*float64(time.Second))))
	}
	return nil
}

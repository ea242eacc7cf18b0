package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

const usageStatus = `usage: meshctl status [ID] [--json]

Show the running meshd: its identity, org and roster version, listen
addresses, number of links, uptime and counters (drops by reason, link and
roster events). A node an admin removed from the roster says so, naming
the roster version ("member": false in --json). Needs a running meshd on
this home.

With ID, the id that meshctl dm, send, request or respond printed, show
what became of that message instead: for a direct message, request or
response, per recipient, queued, delivered (with the time it was
acknowledged), expired or refused (with the reason); for a channel
message, how many linked readers acknowledged it. meshctl sent lists
them all.

examples:
  meshctl status
  meshctl status --json | jq .counters
  meshctl status 0193a1c2-7f4e-7cc1-9a4e-3b1f0c2d9e11
`

func runStatus(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 0, 1); err != nil {
		return err
	}
	if len(pos) == 1 {
		return runDeliveryStatus(a, pos[0])
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Status(ctx)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	tw := table(a.Stdout)
	name := s.Name
	if name == "" {
		name = "-"
	}
	fmt.Fprintf(tw, "node\t%s (%s)\n", name, s.Fingerprint)
	fmt.Fprintf(tw, "key\t%s\n", s.Key)
	fmt.Fprintf(tw, "org\t%s (roster v%d, %d members, role %s)\n", s.Org, s.RosterVersion, s.RosterMembers, s.Role)
	if !s.Member {
		fmt.Fprintf(tw, "member\tno: removed from the org by roster v%d; peers refuse its links (ask an admin to add it back)\n", s.RosterVersion)
	}
	fmt.Fprintf(tw, "listen\t%s\n", strings.Join(s.Listen, " "))
	if len(s.Advertised) > 0 {
		fmt.Fprintf(tw, "advertised\t%s\n", strings.Join(s.Advertised, " "))
	}
	mdns := "off"
	if s.MDNS {
		mdns = "on"
	}
	fmt.Fprintf(tw, "mdns\t%s\n", mdns)
	if len(s.Seeds) > 0 {
		fmt.Fprintf(tw, "seeds\t%s\n", strings.Join(s.Seeds, " "))
	}
	fmt.Fprintf(tw, "links\t%d\n", s.Links)
	if s.ClockSkewSeconds != 0 {
		fmt.Fprintf(tw, "clock\twarning: a peer's clock differs by %+.0fs (run meshctl doctor)\n", s.ClockSkewSeconds)
	}
	fmt.Fprintf(tw, "uptime\t%s\n", ago(time.Duration(s.UptimeSeconds*float64(time.Second))))
	fmt.Fprintf(tw, "home\t%s\n", s.Home)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Counters) > 0 {
		fmt.Fprintln(a.Stdout, "counters:")
		tw = table(a.Stdout)
		for _, k := range slices.Sorted(maps.Keys(s.Counters)) {
			fmt.Fprintf(tw, "  %s\t%d\n", k, s.Counters[k])
		}
		return tw.Flush()
	}
	return nil
}

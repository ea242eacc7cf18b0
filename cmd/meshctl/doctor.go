package main

import (
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageDoctor = `usage: meshctl doctor [--json]

Explain why this node has no peers, or fewer than expected. The running
meshd checks, and names the fix for each problem:

  membership  this node is in its own roster (not removed, not never added)
  org         mDNS sees no nodes of another org (a one-node org left by a
              first plain 'meshd' next to the real one)
  discovery   mDNS runs, or seeds are configured
  seeds       the seeds answer
  links       how many of the other members are linked
  clock       clocks agree with the peers' within 10s
  disk        the home's file system is not nearly full
  mailbox     the mailbox directory is writable

Exits 1 when a check finds a problem, 0 when there are only warnings or
none. Needs a running meshd on this home.

examples:
  meshctl doctor
  meshctl doctor --json | jq '.checks[] | select(.status != "ok")'
`

func runDoctor(a *app, args []string) error {
	d, printed, err := fetch(a, args, (*api.Client).Doctor)
	if err == nil && !printed {
		for _, c := range d.Checks {
			mark := "ok     "
			switch c.Status {
			case "warn":
				mark = "warning"
			case "problem":
				mark = "PROBLEM"
			}
			fmt.Fprintf(a.Stdout, "%s  %-10s  %s\n", mark, c.Name, c.Detail)
			if c.Fix != "" && c.Status != "ok" {
				fmt.Fprintf(a.Stdout, "         %-10s  fix: %s\n", "", c.Fix)
			}
		}
		switch d.Problems {
		case 0:
			fmt.Fprintf(a.Stdout, "\nno problem found (%d links, %d members)\n", d.Links, d.Members)
		default:
			fmt.Fprintf(a.Stdout, "\n%d problem(s) found (%d links, %d members)\n", d.Problems, d.Links, d.Members)
		}
	}
	if err != nil {
		return err
	}
	if d.Problems > 0 {
		return exitStatus(exitError)
	}
	return nil
}

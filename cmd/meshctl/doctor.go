package main

import (
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageDoctor = `usage: meshctl doctor [--json]

Explain why this node has no peers, or fewer than expected, and name the
fix for each problem. The running meshd checks:

  membership  this node is in its own roster (not removed, not never added)
  org         mDNS sees no nodes of another org now (a one-node org left by
              a first plain 'meshd' next to the real one; on an admin, how
              to invite such a node)
  discovery   mDNS runs, or seeds are configured
  seeds       the seeds answer, and are of this org (a seed that answers
              as another org's node is told apart from one that does not
              answer)
  links       how many of the other members are linked; for those that
              are not, each address dialled and why it failed
  clock       clocks agree with the linked peers' within 10s
  disk        the home's file system is not nearly full
  mailbox     the mailbox directory is writable

With no meshd running on this home, doctor says so and runs the checks
that need none:

  home        the home exists, is a directory, not writable by all
  identity    the identity loads
  roster      the roster loads, and this node is in it
  config      meshd --print-config accepts the configuration (the meshd
              next to this meshctl, else on PATH)
  ports       the TCP listen ports are free

Exits 1 when a check finds a problem (or meshd is not running), 0 when
there are only warnings or none.

examples:
  meshctl doctor
  meshctl doctor --json | jq '.checks[] | select(.status != "ok")'
`

func runDoctor(a *app, _ *noFlags, pos []string) error {
	d, printed, err := fetch(a, pos, (*api.Client).Doctor)
	if err != nil && a.meshdDown(err) {
		// No meshd: the checks that need none.
		d, err = a.offlineDoctor(), nil
		if a.json {
			printed = true
			if err := a.printJSON(d); err != nil {
				return err
			}
		}
	}
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
		switch {
		case len(d.Checks) > 0 && d.Checks[0].Name == "meshd":
			fmt.Fprintf(a.Stdout, "\n%d problem(s) found; meshd is not running\n", d.Problems)
		case d.Problems == 0:
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

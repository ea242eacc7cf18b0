package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageRosterPending = `usage: meshctl roster pending [--json]

List the nodes this node's running meshd refused because they are not in
the roster: their fingerprint, the name they claim, the address they came
from, when they were first and last seen, and how many times they tried.
meshd remembers up to 256 of them, in memory.

To let one in, add it by its fingerprint (meshd knows its key from the
handshake) and publish the roster; the node links at its next attempt.

examples:
  meshctl roster pending
  meshctl roster add 3f9c2a1b7e0d4c55 --role member --name laptop
  meshctl roster publish
`

func runRosterPending(a *app, args []string) error {
	p, printed, err := fetch(a, args, func(c *api.Client, ctx context.Context) (*api.Pending, error) { return c.Pending(ctx) })
	if err != nil || printed {
		return err
	}
	if len(p.Nodes) == 0 {
		fmt.Fprintln(a.Stdout, "no pending nodes: no node outside the roster tried to link since meshd started")
		return nil
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FINGERPRINT\tNAME\tADDRESS\tFIRST SEEN\tLAST SEEN\tATTEMPTS")
	now := time.Now()
	for _, n := range p.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s ago\t%d\n", n.Fingerprint, dash(n.Name), dash(n.Address),
			ago(now.Sub(n.FirstSeen)), ago(now.Sub(n.LastSeen)), n.Attempts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "\nadd one with: meshctl roster add %s --role member, then meshctl roster publish\n", p.Nodes[0].Fingerprint)
	return nil
}

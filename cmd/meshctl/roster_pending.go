package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/roster"
)

const usageRosterPending = `usage: meshctl roster pending [--json]

List what waits to join the roster:

  - nodes this node's running meshd refused because they are not in the
    roster: their fingerprint, the name they claim (quoted, with anything
    beyond ASCII escaped: the node chose it), the address they came from,
    when they were first and last seen, and how many times they tried
    (meshd remembers up to 256, at most 8 from one address, in memory),
    and the org it came from when it knocked from another org: "fresh"
    marks a node whose org is a one-node org of its own (what a first
    plain 'meshd' makes), which adopts this org once added; a node of
    another org with members stays in its org even when added;
  - roster updates in the home that still need admin signatures
    (roster-vN*.cbor, as 'roster add' and invites write them when the
    quorum is more than 1), with the signatures they have.

To let a refused node in, add it by its fingerprint (meshd knows its key
from the handshake) and publish the roster; the node links at its next
attempt. An update is signed by other admins with 'meshctl roster sign'.

examples:
  meshctl roster pending
  meshctl roster add 3f9c2a1b7e0d4c55 --role member --name laptop
  meshctl roster publish
  meshctl roster sign ~/.meshd/roster-v5.cbor
`

// pendingUpdate is a roster update file that waits for signatures.
type pendingUpdate struct {
	File       string `json:"file"`
	Version    uint64 `json:"version"`
	Members    int    `json:"members"`
	Signatures int    `json:"signatures"`
	Required   int    `json:"required"`
	Missing    int    `json:"missing"`
}

type pendingResult struct {
	Nodes   []api.PendingNode `json:"nodes"`
	Updates []pendingUpdate   `json:"updates"`
	// Daemon is false when no meshd answered: nodes is then empty.
	Daemon bool `json:"daemon"`
}

func runRosterPending(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	res := pendingResult{Nodes: []api.PendingNode{}, Updates: []pendingUpdate{}}
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().Pending(ctx)
	switch {
	case errors.Is(err, api.ErrNoDaemon):
	case err != nil:
		return a.remoteErr(err)
	default:
		res.Nodes, res.Daemon = p.Nodes, true
	}
	if res.Updates, err = pendingUpdates(a.home()); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	switch {
	case !res.Daemon:
		fmt.Fprintln(a.Stdout, "meshd is not running: refused nodes are not known")
	case len(res.Nodes) == 0:
		fmt.Fprintln(a.Stdout, "no pending nodes: no node outside the roster tried to link since meshd started")
	default:
		tw := table(a.Stdout)
		fmt.Fprintln(tw, "FINGERPRINT\tCLAIMED NAME\tFROM ORG\tADDRESS\tFIRST SEEN\tLAST SEEN\tATTEMPTS")
		now := time.Now()
		for _, n := range res.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s ago\t%d\n", n.Fingerprint, claimedCell(n.Name), fromOrgCell(n), nameCell(n.Address),
				ago(now.Sub(n.FirstSeen)), ago(now.Sub(n.LastSeen)), n.Attempts)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.Stdout, "add one with: meshctl roster add %s --role member, then meshctl roster publish\n", res.Nodes[0].Fingerprint)
	}
	for _, u := range res.Updates {
		fmt.Fprintf(a.Stdout, "\nroster update v%d (%d members) in %s: %d of %d admin signatures\n", u.Version, u.Members, u.File, u.Signatures, u.Required)
		if u.Missing > 0 {
			fmt.Fprintf(a.Stdout, "  other admins sign it with: meshctl roster sign %s\n", u.File)
		} else {
			fmt.Fprintf(a.Stdout, "  complete: meshctl roster publish %s\n", u.File)
		}
	}
	return nil
}

// pendingUpdates lists the roster update files in the home that are
// newer than its roster.
func pendingUpdates(h home.Home) ([]pendingUpdate, error) {
	out := []pendingUpdate{}
	cur, err := home.ReadRoster(h.RosterPath())
	if err != nil {
		return out, nil // no roster: nothing can be pending against it
	}
	files, err := filepath.Glob(filepath.Join(h.Dir, "roster-v*.cbor"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	for _, f := range files {
		r, err := home.ReadRoster(f)
		if err != nil || r.Org != cur.Org || r.Version <= cur.Version {
			continue
		}
		t, err := roster.CountSignatures(cur, r)
		if err != nil {
			continue
		}
		out = append(out, pendingUpdate{File: f, Version: r.Version, Members: len(r.Members),
			Signatures: len(t.Admins), Required: t.Need, Missing: t.Missing()})
	}
	return out, nil
}

// claimedCell is a name a node claims, for a table cell: escaped and
// quoted, or "-".
func claimedCell(s string) string {
	if s == "" {
		return "-"
	}
	return claimedText(s)
}

// fromOrgCell says where a pending node came from: "-" for a node that
// dialled as one of ours, "fresh (ORG)" for a node of a one-node org of
// its own, else "other org ORG" (it will not move by being added).
func fromOrgCell(n api.PendingNode) string {
	switch {
	case n.Org == "":
		return "-"
	case n.Fresh:
		return "fresh (" + claimedText(n.Org) + ")"
	}
	return "other org " + claimedText(n.Org)
}

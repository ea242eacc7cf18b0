package main

import (
	"context"
	"fmt"
	"os"

	"github.com/meshd/meshd/roster"
)

const usageRosterPublish = `usage: meshctl roster publish [FILE]

Hand a signed roster (default: <home>/roster.cbor) to the local meshd. It
applies the acceptance rules (same org, newer version, enough signatures by
admins of the current roster), persists it, and pushes it to every linked
peer at once; each peer that accepts it pushes it on, so one publish reaches
the whole mesh. A refusal names its reason.

examples:
  meshctl roster publish
  meshctl roster publish roster-v5.cbor
`

func runRosterPublish(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 1); err != nil {
		return err
	}
	path := a.home().RosterPath()
	if len(pos) == 1 {
		path = pos[0]
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read roster: %w", err)
	}
	// Check locally first so a broken file gets the exact reason without a daemon.
	if _, err := roster.Parse(b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30e9)
	defer cancel()
	r, err := a.client().PublishRoster(ctx, b)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(r)
	}
	fmt.Fprintf(a.Stdout, "published roster %s v%d (%d members) to the mesh\n", r.Org, r.Version, len(r.Members))
	return nil
}

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/roster"
)

const usageRosterInit = `usage: meshctl roster init --org ORG [--force] [--file FILE] [--json]

Create version 1 of a roster for org ORG with this node as its only admin,
signed by this node, in <home>/roster.cbor (or FILE). An existing roster is
not replaced unless --force is given.

flags:
  --org ORG     the org id (1..128 bytes); it also separates meshes on the wire
  --force       replace an existing roster
  --file FILE   write FILE instead of <home>/roster.cbor

examples:
  meshctl roster init --org acme
`

// rosterInitFlags are the flags of 'meshctl roster init'.
type rosterInitFlags struct {
	org   string
	force bool
	file  string
}

func (fl *rosterInitFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.org, "org", "", "")
	fs.BoolVar(&fl.force, "force", false, "")
	fs.StringVar(&fl.file, "file", "", "")
}

func runRosterInit(a *app, fl *rosterInitFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.org == "" {
		return a.usageErrorf("--org is required")
	}
	if err := roster.CheckOrg(fl.org); err != nil {
		return a.usageErrorf("--org: %v", err)
	}
	id, err := a.identity()
	if err != nil {
		return err
	}
	path := a.rosterPath(fl.file)
	if _, err := os.Lstat(path); err == nil && !fl.force {
		return withHint(fmt.Errorf("a roster already exists at %s", path),
			"'meshctl roster show' shows it; use --force to replace it with a new org")
	}
	r, err := roster.New(fl.org, id.Key, id.Name)
	if err != nil {
		return err
	}
	if err := home.WriteRoster(path, r); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(editResult{Org: r.Org, Version: r.Version, Change: "created", File: path,
			Signatures: 1, Required: 1, Complete: true})
	}
	fmt.Fprintf(a.Stdout, "created roster %q v1 with admin %s\nwrote %s\n", r.Org, r.Members[0].Label(), path)
	return nil
}

package main

import (
	"flag"
	"fmt"
)

const usageInit = `usage: meshctl init [--name NAME] [--json]

Create this node's identity in its home directory (--home, else $MESH_HOME,
else ~/.meshd): a new Ed25519 key in identity.key (mode 0600) and its public
key in identity.pub. An existing key is never replaced, so running init
again is safe; with --name it sets or changes only the node's name.

flags:
  --name NAME   the node's display name (at most 128 bytes)

examples:
  meshctl init --name build-agent
  meshctl --home /srv/agent1 init --name agent1 --json
`

// initFlags are the flags of 'meshctl init'.
type initFlags struct {
	name string
}

func (fl *initFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.name, "name", "", "")
}

func runInit(a *app, fl *initFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	h := a.home()
	id, created, err := h.Init(fl.name)
	if err != nil {
		return err
	}
	if !a.json {
		if created {
			fmt.Fprintf(a.Stdout, "created a new identity in %s\n", h.Dir)
		} else {
			fmt.Fprintf(a.Stdout, "identity already exists in %s (kept)\n", h.Dir)
		}
	}
	return a.printIdentity(id, &created)
}

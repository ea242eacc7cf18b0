package main

import (
	"fmt"

	"github.com/meshd/meshd/node/home"
)

const usageID = `usage: meshctl id [--json]

Show this node's identity: its public key, fingerprint, node id (SHA-256 of
the key), name and home directory. Give the key to a roster admin to be
added to the org ('meshctl roster add KEY --role ROLE').

examples:
  meshctl id
  meshctl id --json | jq -r .key
`

// identityJSON is the JSON form of an identity, for init and id.
type identityJSON struct {
	Home        string `json:"home"`
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	NodeID      string `json:"node_id"`
	Name        string `json:"name,omitempty"`
	Created     *bool  `json:"created,omitempty"`
}

func runID(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	id, err := a.identity()
	if err != nil {
		return err
	}
	return a.printIdentity(id, nil)
}

func (a *app) printIdentity(id home.Identity, created *bool) error {
	j := identityJSON{
		Home:        a.home().Dir,
		Key:         id.Pub.String(),
		Fingerprint: id.Pub.Fingerprint(),
		NodeID:      id.Pub.NodeID().String(),
		Name:        id.Name,
		Created:     created,
	}
	if a.json {
		return a.printJSON(j)
	}
	tw := table(a.Stdout)
	fmt.Fprintf(tw, "key\t%s\n", j.Key)
	fmt.Fprintf(tw, "fingerprint\t%s\n", j.Fingerprint)
	fmt.Fprintf(tw, "node id\t%s\n", j.NodeID)
	if j.Name != "" {
		fmt.Fprintf(tw, "name\t%s\n", j.Name)
	}
	fmt.Fprintf(tw, "home\t%s\n", j.Home)
	return tw.Flush()
}

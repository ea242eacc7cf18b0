package main

import (
	"encoding/json"
	"fmt"

	"github.com/meshd/meshd/node/home"
)

// home returns the node's home directory, from --home, $MESH_HOME or the
// default.
func (a *app) home() home.Home { return home.Open(a.homeFlag) }

// identity loads this node's identity.
func (a *app) identity() (home.Identity, error) { return a.home().LoadIdentity() }

// printJSON prints v as indented JSON.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(a.Stdout, "%s\n", b)
	return err
}

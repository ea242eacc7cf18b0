package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/roster"
)

const usageRosterSign = `usage: meshctl roster sign FILE [--current FILE] [--json]

Add this admin's signature to the roster in FILE, in place. The signed body
is not changed, so the signatures already on it stay valid. This is how a
second admin approves an update when the quorum is more than 1.

Signatures count when they are by admins of the current roster: --current,
else <home>/roster.cbor if it is an older version of the same org, else
FILE itself (a new org's first roster). This node must be one of them.

flags:
  --current FILE   the roster FILE is to replace

examples:
  meshctl roster sign roster-v5.cbor
`

type signResult struct {
	File       string `json:"file"`
	Org        string `json:"org"`
	Version    uint64 `json:"version"`
	Signer     string `json:"signer"`
	Signatures int    `json:"signatures"`
	Required   int    `json:"required"`
	Missing    int    `json:"missing"`
	Complete   bool   `json:"complete"`
	Authority  string `json:"authority"`
}

// rosterSignFlags are the flags of 'meshctl roster sign'.
type rosterSignFlags struct {
	current string
}

func (fl *rosterSignFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.current, "current", "", "")
}

func runRosterSign(a *app, fl *rosterSignFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	file := pos[0]
	id, err := a.identity()
	if err != nil {
		return err
	}
	r, err := a.readRoster(file)
	if err != nil {
		return err
	}
	auth, authName, err := a.signingAuthority(r, fl.current)
	if err != nil {
		return err
	}
	if err := requireAdmin(id, auth); err != nil {
		return err
	}
	if err := r.Sign(id.Key); err != nil {
		return err
	}
	tally, err := roster.CountSignatures(auth, r)
	if err != nil {
		return err
	}
	if err := home.WriteRoster(file, r); err != nil {
		return err
	}
	res := signResult{File: file, Org: r.Org, Version: r.Version, Signer: id.Pub.String(),
		Signatures: len(tally.Admins), Required: tally.Need, Missing: tally.Missing(),
		Complete: tally.Missing() == 0, Authority: authName}
	if a.json {
		return a.printJSON(res)
	}
	fmt.Fprintf(a.Stdout, "signed roster %q v%d as %s\n", r.Org, r.Version, auth.Label(id.Pub))
	fmt.Fprintf(a.Stdout, "%d of %d required admin signatures (quorum of %s)\n", res.Signatures, res.Required, authName)
	fmt.Fprintf(a.Stdout, "wrote %s\n", file)
	if !res.Complete {
		fmt.Fprintf(a.Stdout, "needs %d more admin %s\n", res.Missing, plural(res.Missing, "signature", "signatures"))
	}
	return nil
}

// signingAuthority picks the roster whose admins and quorum count for r,
// and describes it.
func (a *app) signingAuthority(r *roster.Roster, current string) (*roster.Roster, string, error) {
	if current != "" {
		cur, err := a.readRoster(current)
		if err != nil {
			return nil, "", err
		}
		// Signing something that can never replace current helps no one.
		if err := roster.CheckUpdate(cur, r); errors.Is(err, roster.ErrWrongOrg) || errors.Is(err, roster.ErrRollback) {
			return nil, "", fmt.Errorf("will not sign: %w", err)
		}
		return cur, fmt.Sprintf("the current v%d in %s", cur.Version, current), nil
	}
	h := a.home()
	cur, err := home.ReadRoster(h.RosterPath())
	switch {
	case err == nil && cur.Org == r.Org && cur.Version < r.Version:
		return cur, fmt.Sprintf("the current v%d in %s", cur.Version, h.RosterPath()), nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, "", err
	}
	return r, "its own admins", nil
}

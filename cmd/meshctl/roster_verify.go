package main

import (
	"flag"
	"fmt"

	"github.com/meshd/meshd/roster"
)

const usageRosterVerify = `usage: meshctl roster verify FILE [--current FILE] [--json]

Check the roster in FILE. Without --current, as the first roster a node is
given: it must be signed by its own quorum of the admins it lists. With
--current, as an update of that roster: same org, a higher version, and
signed by the current roster's quorum of its admins.

Prints "ok" and exits 0 if the roster is valid; otherwise exits 1 with the
reason (bad signature, malformed or non-canonical encoding, wrong org,
rollback, unknown signer, too few signatures).

flags:
  --current FILE   the roster FILE is to replace

examples:
  meshctl roster verify roster-v5.cbor --current ~/.meshd/roster.cbor
`

type verifyResult struct {
	Valid   bool   `json:"valid"`
	Reason  string `json:"reason,omitempty"`
	File    string `json:"file"`
	Org     string `json:"org,omitempty"`
	Version uint64 `json:"version,omitempty"`
}

// rosterVerifyFlags are the flags of 'meshctl roster verify'.
type rosterVerifyFlags struct {
	current string
}

func (fl *rosterVerifyFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.current, "current", "", "")
}

func runRosterVerify(a *app, fl *rosterVerifyFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	res := verifyResult{File: pos[0]}
	msg, err := a.verify(pos[0], fl.current, &res)
	if a.json {
		res.Valid = err == nil
		if err != nil {
			res.Reason = err.Error()
		}
		if perr := a.printJSON(res); perr != nil {
			return perr
		}
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "ok: %s\n", msg)
	return nil
}

func (a *app) verify(file, current string, res *verifyResult) (string, error) {
	r, err := a.readRoster(file)
	if err != nil {
		return "", err
	}
	res.Org, res.Version = r.Org, r.Version
	if current == "" {
		if err := roster.CheckBootstrap(r); err != nil {
			return "", err
		}
		t, _ := roster.CountSignatures(r, r)
		return fmt.Sprintf("roster %q v%d is signed by %d of %d required admins it lists itself", r.Org, r.Version, len(t.Admins), t.Need), nil
	}
	cur, err := a.readRoster(current)
	if err != nil {
		return "", fmt.Errorf("current roster: %w", err)
	}
	if err := roster.CheckUpdate(cur, r); err != nil {
		return "", err
	}
	t, _ := roster.CountSignatures(cur, r)
	return fmt.Sprintf("roster %q v%d is a valid update of v%d, signed by %d of %d required admins", r.Org, r.Version, cur.Version, len(t.Admins), t.Need), nil
}

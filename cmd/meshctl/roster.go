package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/roster"
)

const usageRoster = `usage: meshctl roster COMMAND [ARGS]

The roster is the org's only trust anchor: a document listing every
member's key and role, signed by admins. Nodes accept a new version only if
it is for the same org, has a higher version, and carries signatures from
at least the current roster's quorum of its admins.

Editing commands work on <home>/roster.cbor (or --file FILE): each makes
the next version and signs it with this node's key, which must be an admin
of the roster being edited. When the quorum is more than 1, the new version
is written beside the current one (as roster-vN.cbor) until enough admins
have signed it with 'meshctl roster sign'.

MEMBER may be a full key (ed25519:...), a fingerprint or a prefix of at
least 8 hex digits of the node id, or a member's name.

commands:

examples:
  meshctl roster init --org acme
  meshctl roster add ed25519:KEY --role member --name bob
  meshctl roster publish
`

// errNotAdmin: this node may not sign the roster it was asked to edit.
var errNotAdmin = errors.New("not an admin")

// rosterPath returns file, or the home's roster when file is empty.
func (a *app) rosterPath(file string) string {
	if file != "" {
		return file
	}
	return a.home().RosterPath()
}

// readRoster reads and parses a roster file.
func (a *app) readRoster(path string) (*roster.Roster, error) {
	r, err := home.ReadRoster(path)
	if errors.Is(err, fs.ErrNotExist) {
		if path == a.home().RosterPath() {
			return nil, withHint(fmt.Errorf("no roster at %s", path),
				"create one with 'meshctl roster init --org ORG', or copy the org's roster there")
		}
		return nil, fmt.Errorf("no roster at %s", path)
	}
	if errors.Is(err, home.ErrBadRoster) {
		return nil, withHint(err, "the file is damaged: copy a good roster.cbor from another member's home (or an admin) over it; "+
			"meshd replaces the home's roster when started once with --roster FILE")
	}
	return r, err
}

// requireAdmin refuses when id is not an admin of r.
func requireAdmin(id home.Identity, r *roster.Roster) error {
	if r.IsAdmin(id.Pub) {
		return nil
	}
	who := id.Pub.Fingerprint()
	if id.Name != "" {
		who = id.Name + ", " + who
	}
	return withHint(fmt.Errorf("this node (%s) is %w of roster org %q v%d", who, errNotAdmin, r.Org, r.Version),
		"only an admin can sign roster changes; 'meshctl roster show' lists them")
}

// resolveMember resolves what the user typed to exactly one member.
func resolveMember(r *roster.Roster, query string) (roster.Member, error) {
	ms, err := r.Lookup(query)
	if errors.Is(err, roster.ErrAmbiguous) {
		return roster.Member{}, withHint(err, "give the full key or a longer fingerprint")
	}
	if err != nil {
		return roster.Member{}, err
	}
	return ms[0], nil
}

// editFlags are the flags every roster editing command takes: the flags
// of those that take no other.
type editFlags struct {
	file string
	out  string
}

func (e *editFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&e.file, "file", "", "")
	fs.StringVar(&e.out, "out", "", "")
}

const usageEditFlags = `  --file FILE   edit FILE instead of <home>/roster.cbor
  --out FILE    write the new version to FILE (default: replace the edited
                file, or roster-vN.cbor beside it if more signatures are needed)
`

// editResult is the JSON output of an editing command.
type editResult struct {
	Org        string `json:"org"`
	Version    uint64 `json:"version"`
	Change     string `json:"change"`
	File       string `json:"file"`
	Signatures int    `json:"signatures"`
	Required   int    `json:"required"`
	Missing    int    `json:"missing"`
	Complete   bool   `json:"complete"`
	// Rekey describes a key rotation (roster rekey).
	Rekey *rekeyEditJSON `json:"rekey,omitempty"`
}

// editRoster is the shared flow of roster add, remove, role and quorum: load
// the roster, check that this node is one of its admins, make the next
// version with edit (which describes the change), sign it and write it.
func (a *app) editRoster(f editFlags, edit func(cur, next *roster.Roster) (string, error)) error {
	return a.editRosterWith(f, edit, nil)
}

// editRosterWith is editRoster with a hook that adds to the JSON result.
func (a *app) editRosterWith(f editFlags, edit func(cur, next *roster.Roster) (string, error), more func(*editResult)) error {
	id, err := a.identity()
	if err != nil {
		return err
	}
	path := a.rosterPath(f.file)
	cur, err := a.readRoster(path)
	if err != nil {
		return err
	}
	if err := requireAdmin(id, cur); err != nil {
		return err
	}
	next := cur.Next()
	change, err := edit(cur, next)
	if err != nil {
		return err
	}
	if err := next.Sign(id.Key); err != nil {
		return err
	}
	tally, err := roster.CountSignatures(cur, next)
	if err != nil {
		return err
	}
	complete := tally.Missing() == 0
	out := f.out
	if out == "" && complete {
		out = path
	}
	if out == "" {
		out = pendingPath(path, next.Version)
		if _, err := os.Lstat(out); err == nil {
			return withHint(fmt.Errorf("%s already exists", out),
				"sign that one with 'meshctl roster sign %s', or write this change elsewhere with --out FILE", out)
		}
	}
	if err := home.WriteRoster(out, next); err != nil {
		return err
	}

	res := editResult{Org: next.Org, Version: next.Version, Change: change, File: out,
		Signatures: len(tally.Admins), Required: tally.Need, Missing: tally.Missing(), Complete: complete}
	if more != nil {
		more(&res)
	}
	if a.json {
		return a.printJSON(res)
	}
	fmt.Fprintf(a.Stdout, "roster %q v%d: %s\n", next.Org, next.Version, change)
	fmt.Fprintf(a.Stdout, "signed by %s: %d of %d required admin signatures\n", cur.Label(id.Pub), res.Signatures, res.Required)
	if complete {
		fmt.Fprintf(a.Stdout, "wrote %s\n", out)
		return nil
	}
	fmt.Fprintf(a.Stdout, "wrote %s; %s is unchanged\n", out, path)
	fmt.Fprintf(a.Stdout, "needs %d more admin %s: on another admin's node, run\n  meshctl roster sign %s\n",
		res.Missing, plural(res.Missing, "signature", "signatures"), out)
	return nil
}

// pendingPath names an update that still needs signatures: roster.cbor
// becomes roster-v5.cbor beside it.
func pendingPath(path string, version uint64) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-v%d%s", strings.TrimSuffix(path, ext), version, ext)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

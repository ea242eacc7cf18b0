package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageRekey = `usage: meshctl rekey [--cancel] [--json]

Make this node's next key (a key rotation), or show it if it was made
already. The new key waits beside the current one in
<home>/identity-next.key; this node keeps its current key until an admin
lists the new one in the roster:

  (admin) meshctl roster rekey NAME NEWKEY --grace 24h
  (admin) meshctl roster publish

meshd logs when it applies a roster that lists the new key; restart meshd
within the grace window and it switches to the new key at start (the old
key is kept in <home>/identity-prev.key), with a new sender epoch. The
member keeps its name, role, history and queued messages.

To replace a machine instead, run 'meshctl init' on the new one and give
its key ('meshctl id') to the admin. For a key that leaked, the admin uses
--grace 0: see docs/SECURITY.md.

flags:
  --cancel      remove the pending key (refused once the roster lists it)

examples:
  meshctl rekey
  meshctl rekey --json | jq -r .key
`

// rekeyJSON is the JSON output of meshctl rekey.
type rekeyJSON struct {
	Key                string `json:"key"`
	Fingerprint        string `json:"fingerprint"`
	CurrentKey         string `json:"current_key"`
	CurrentFingerprint string `json:"current_fingerprint"`
	Name               string `json:"name,omitempty"`
	File               string `json:"file"`
	Created            bool   `json:"created"`
	// Listed: the home's roster lists the new key; restart meshd.
	Listed        bool   `json:"listed"`
	RosterVersion uint64 `json:"roster_version,omitempty"`
	Cancelled     bool   `json:"cancelled,omitempty"`
}

// rekeyFlags are the flags of 'meshctl rekey'.
type rekeyFlags struct {
	cancel bool
}

func (fl *rekeyFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.cancel, "cancel", false, "")
}

func runRekey(a *app, fl *rekeyFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	h := a.home()
	id, err := h.LoadIdentity()
	if err != nil {
		return err
	}
	r, rerr := h.LoadRoster()
	if fl.cancel {
		return a.cancelRekey(h, id, r)
	}
	pub, created, err := h.MakeNextKey()
	if err != nil {
		return err
	}
	j := rekeyJSON{Key: pub.String(), Fingerprint: pub.Fingerprint(), CurrentKey: id.Pub.String(),
		CurrentFingerprint: id.Pub.Fingerprint(), Name: id.Name, File: h.NextKeyPath(), Created: created}
	if rerr == nil {
		j.Listed = listsKey(r, pub)
		j.RosterVersion = r.Version
	}
	if a.json {
		return a.printJSON(j)
	}
	if created {
		fmt.Fprintf(a.Stdout, "made a new key for this node (pending): %s\n", j.File)
	} else {
		fmt.Fprintf(a.Stdout, "this node's pending key: %s\n", j.File)
	}
	tw := table(a.Stdout)
	fmt.Fprintf(tw, "new key\t%s\n", j.Key)
	fmt.Fprintf(tw, "new fingerprint\t%s\n", j.Fingerprint)
	fmt.Fprintf(tw, "current key\t%s\n", j.CurrentKey)
	if err := tw.Flush(); err != nil {
		return err
	}
	if j.Listed {
		fmt.Fprintf(a.Stdout, "roster v%d lists the new key: restart meshd to switch to it\n", j.RosterVersion)
		return nil
	}
	who := id.Name
	if who == "" {
		who = id.Pub.Fingerprint()
	}
	fmt.Fprintf(a.Stdout, "give the new key to an admin, who runs:\n  meshctl roster rekey %s %s --grace 24h\n  meshctl roster publish\n", who, j.Key)
	fmt.Fprintf(a.Stdout, "then restart meshd here once it has that roster (its log says so)\n")
	return nil
}

// listsKey reports whether k is a member's current key in r.
func listsKey(r *roster.Roster, k proto.PubKey) bool {
	m, ok := r.Member(k)
	return ok && m.Key == k
}

func (a *app) cancelRekey(h home.Home, id home.Identity, r *roster.Roster) error {
	next, err := h.LoadNextKey()
	if errors.Is(err, home.ErrNoNextKey) {
		return withHint(err, "'meshctl rekey' makes one")
	}
	if err != nil {
		return err
	}
	pub := proto.PubKeyOf(next)
	if r != nil && listsKey(r, pub) {
		return withHint(fmt.Errorf("roster %q v%d already lists the pending key %s as this node's", r.Org, r.Version, pub.Fingerprint()),
			"restart meshd to switch to it; without it this node is locked out when its old key's grace window ends")
	}
	if err := h.DropNextKey(); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(rekeyJSON{Key: pub.String(), Fingerprint: pub.Fingerprint(), CurrentKey: id.Pub.String(),
			CurrentFingerprint: id.Pub.Fingerprint(), Name: id.Name, File: h.NextKeyPath(), Cancelled: true})
	}
	fmt.Fprintf(a.Stdout, "removed the pending key %s; this node keeps %s\n", pub.Fingerprint(), id.Pub.Fingerprint())
	return nil
}

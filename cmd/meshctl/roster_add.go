package main

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

const usageRosterAdd = `usage: meshctl roster add KEY|FINGERPRINT --role ROLE [--name NAME] [--archive] [--file FILE] [--out FILE] [--json]

Add the node with public key KEY (the full "ed25519:..." text that
'meshctl id' prints on that node) to the roster, as the next version signed
by this admin. Instead of the key, give the FINGERPRINT (or at least 8 hex
digits of it) of a node this node's running meshd refused as a non-member,
as 'meshctl roster pending' lists them: meshd knows its key from the
handshake. Without --name, the node is named after the name it claimed
in its handshake, which is shown (escaped) first; a claimed name that
could not be a member's (invisible or bidi characters, or one that
looks like another member's) is refused: pass --name NAME, or --name ''
to add the node unnamed. A node that knocked from another org is told
apart: a fresh one (a one-node org of its own) adopts this org once the
roster is published; one of an org with other members stays in it.

flags:
  --role ROLE   observer, member, operator or admin (required)
  --name NAME   the member's display name, unique in the roster
  --archive     the node keeps long history for others to sync from
` + usageEditFlags + `
examples:
  meshctl roster add ed25519:KEY --role operator --name ci-runner
  meshctl roster add ed25519:KEY --role member --archive --name archive1
  meshctl roster add 3f9c2a1b7e0d4c55 --role member   (from roster pending)
`

// rosterAddFlags are the flags of 'meshctl roster add'.
type rosterAddFlags struct {
	roleFlag string
	name     string
	archive  bool
	ef       editFlags
}

func (fl *rosterAddFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.roleFlag, "role", "", "")
	fs.StringVar(&fl.name, "name", "", "")
	fs.BoolVar(&fl.archive, "archive", false, "")
	fl.ef.define(fs)
}

func runRosterAdd(a *app, fl *rosterAddFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	key, err := proto.ParsePubKey(pos[0])
	if err != nil && isHexPrefix(pos[0]) {
		// A fingerprint: the key of a node meshd refused (roster pending).
		var pn api.PendingNode
		pn, err = a.pendingKey(pos[0])
		if err != nil {
			return err
		}
		key = pn.Key
		if err := adoptClaimedName(a, &fl.name, pn.Name); err != nil {
			return err
		}
		noteKnockedFrom(a, pn)
	} else if err != nil {
		return a.usageErrorf("KEY: %v (want the full key that 'meshctl id' prints, or the fingerprint 'meshctl roster pending' shows)", err)
	}
	if fl.roleFlag == "" {
		return a.usageErrorf("--role is required")
	}
	role, err := roster.ParseRole(fl.roleFlag)
	if err != nil {
		return a.usageErrorf("--role: %v", err)
	}
	return a.editRoster(fl.ef, func(_, next *roster.Roster) (string, error) {
		m := roster.Member{Key: key, Role: role, Name: fl.name, Archive: fl.archive}
		if err := next.Add(m); err != nil {
			if errors.Is(err, roster.ErrDuplicateName) {
				return "", withHint(err, "pass --name NAME to give it another name")
			}
			return "", err
		}
		return fmt.Sprintf("added %s as %s", m.Label(), role), nil
	})
}

// isHexPrefix reports whether s may be a fingerprint or a prefix of a
// node id: at least 8 hex digits.
func isHexPrefix(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// pendingKey finds the key of the pending node whose node id starts with
// prefix, asking the running meshd.
func (a *app) pendingKey(prefix string) (api.PendingNode, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	p, err := a.client().Pending(ctx)
	if err != nil {
		return api.PendingNode{}, withHint(fmt.Errorf("%s is not a key, and meshd could not be asked for the pending node with that fingerprint: %w", prefix, err),
			"give the full key (meshctl id on that node prints it), or start meshd here")
	}
	prefix = strings.ToLower(prefix)
	var found []api.PendingNode
	for _, n := range p.Nodes {
		id := n.Key.NodeID()
		if strings.HasPrefix(hex.EncodeToString(id[:]), prefix) {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return api.PendingNode{}, withHint(fmt.Errorf("no pending node has fingerprint %s", prefix),
			"'meshctl roster pending' lists the nodes meshd refused; the node must have tried to link since meshd started")
	case 1:
		return found[0], nil
	}
	return api.PendingNode{}, withHint(fmt.Errorf("%d pending nodes match %s", len(found), prefix), "give more hex digits")
}

// noteKnockedFrom says what adding a node that knocked from another org
// does: a fresh node adopts this org; a node of an org with members stays
// in it (PROTOCOL.md §14.11).
func noteKnockedFrom(a *app, pn api.PendingNode) {
	switch {
	case pn.Org == "":
	case pn.Fresh:
		fmt.Fprintf(a.Stderr, "it knocked from %s, a one-node org of its own: it adopts this org once the roster is published\n", claimedText(pn.Org))
	default:
		fmt.Fprintf(a.Stderr, "note: it knocked from org %s, which has other members: it stays in that org even when added, until its user runs meshctl join --force with an invite\n", claimedText(pn.Org))
	}
}

// adoptClaimedName names a node added from the pending list after the
// name it claims, unless --name was given: never silently, since the
// node chose it. A claimed name that is not a valid member name is
// refused rather than dropped.
func adoptClaimedName(a *app, name *string, claimed string) error {
	if a.given["name"] || claimed == "" {
		return nil
	}
	if err := roster.CheckName(claimed); err != nil {
		return withHint(fmt.Errorf("the node claims the name %s, which cannot be a member's: %w", claimedText(claimed), err),
			"pass --name NAME to name it, or --name '' to add it unnamed")
	}
	fmt.Fprintf(a.Stderr, "naming it %s, the name it claims (pass --name to choose another)\n", claimedText(claimed))
	*name = claimed
	return nil
}

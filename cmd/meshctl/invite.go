package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageInvite = `usage: meshctl invite --role ROLE [--name NAME] [--expires D] [--json]
       meshctl invite list [--json]
       meshctl invite revoke ID [--json]

Ask this node's running meshd, which must be an admin's, for a one-line
invite token. On the new machine, 'meshctl join TOKEN' uses it to join the
org: this node adds it to the roster with ROLE (and NAME, else the name the
new node gives), signs the roster and spreads it.

The token carries the org, this node's key and addresses, and a secret
that works once, until it expires. Treat it like a password: send it to the
new node's operator privately. meshd keeps only a hash of the secret and
never logs the token.

Where the roster's quorum is more than 1, the node writes the update that
adds the joiner (signed by this node) beside its roster, and the invite
waits: other admins sign it with 'meshctl roster sign' and one of them
publishes it; the joiner, which keeps asking, then links. 'meshctl invite
list' and 'meshctl roster pending' name the file.

flags:
  --role ROLE    observer, member, operator or admin (required)
  --name NAME    the new member's name in the roster
  --expires D    how long the token works (default 24h; 1m to 720h)

examples:
  meshctl invite --role member --name laptop
  meshctl invite --role operator --expires 1h --json
  meshctl invite list
  meshctl invite revoke 3f9c2a1b7e0d4c55

commands:
`

const usageInviteList = `usage: meshctl invite list [--json]

List the invites this node made, newest first, with their state: usable,
used (and by whom), revoked or expired. Tokens are not shown again.

examples:
  meshctl invite list
  meshctl invite list --json
`

const usageInviteRevoke = `usage: meshctl invite revoke ID [--json]

Make an unused invite unusable. ID is the invite's id as 'meshctl invite
list' shows it.

examples:
  meshctl invite revoke 3f9c2a1b7e0d4c55
`

// inviteFlags are the flags of 'meshctl invite'.
type inviteFlags struct {
	role    string
	name    string
	expires time.Duration
}

func (fl *inviteFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.role, "role", "", "")
	fs.StringVar(&fl.name, "name", "", "")
	fs.DurationVar(&fl.expires, "expires", 24*time.Hour, "")
}

func runInvite(a *app, fl *inviteFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.role == "" {
		return a.usageErrorf("--role is required")
	}
	ctx, cancel := a.ctx()
	defer cancel()
	inv, err := a.client().CreateInvite(ctx, api.CreateInvite{Role: fl.role, Name: fl.name, ExpiresSeconds: fl.expires.Seconds()})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(inv)
	}
	who := inv.Role
	if inv.Name != "" {
		who = nameText(inv.Name) + " as " + inv.Role
	}
	fmt.Fprintf(a.Stdout, "invite %s for %s, usable once until %s:\n\n%s\n\n",
		inv.ID, who, inv.Expires.Local().Format(time.DateTime), inv.Token)
	fmt.Fprintf(a.Stdout, "On the new machine, run:\n  meshctl join %s\n  meshd\n", inv.Token)
	return nil
}

func runInviteList(a *app, _ *noFlags, pos []string) error {
	l, printed, err := fetch(a, pos, func(c *api.Client, ctx context.Context) (*api.Invites, error) { return c.Invites(ctx) })
	if err != nil || printed {
		return err
	}
	if len(l.Invites) == 0 {
		fmt.Fprintln(a.Stdout, "no invites; make one with: meshctl invite --role member")
		return nil
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "ID\tROLE\tNAME\tSTATE\tEXPIRES\tUSED BY")
	for _, i := range l.Invites {
		by := ""
		if !i.UsedBy.IsZero() {
			by = i.UsedBy.Fingerprint()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, i.Role, nameCell(i.Name), i.State,
			i.Expires.Local().Format(time.DateTime), by)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, i := range l.Invites {
		if i.State == "waiting" {
			fmt.Fprintf(a.Stdout, "\ninvite %s waits for admin signatures on %s:\n  other admins: meshctl roster sign %s, then meshctl roster publish %s\n",
				i.ID, i.RosterUpdate, i.RosterUpdate, i.RosterUpdate)
		}
	}
	return nil
}

func runInviteRevoke(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	inv, err := a.client().RevokeInvite(ctx, pos[0])
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(inv)
	}
	fmt.Fprintf(a.Stdout, "revoked invite %s\n", inv.ID)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageAdopt = `usage: meshctl adopt [FINGERPRINT] [--json]

Let this fresh node adopt an org that mDNS found. A node whose org is a
one-node org of its own (what a first plain 'meshd' creates) knocks at the
nodes of other orgs it reaches: an org's node lists it in 'meshctl roster
pending' (marked fresh), and once one of that org's admins added it and
published the roster, the node adopts that org: meshd moves the one-node
org aside (to <home>/left-ORG-TIME/, as 'meshctl join' does) and starts
again in the new org, with no token.

It does so by itself when the roster came from a seed you named (--seed
or the seeds setting). From a node found by mDNS alone it does not, since
anyone on the LAN can answer mDNS: confirm the org first with the
fingerprint of one of its admins ('meshctl id' on that admin's node
prints it; --json gives the key, which is accepted too). A roster signed
by that admin is then adopted; meshd knocks again at once.

Without FINGERPRINT, adopt shows whether this node may adopt an org, the
orgs it knocked at and what each answered, and the admins confirmed.
Confirmations last until meshd stops.

examples:
  meshctl adopt
  meshctl adopt ced32622926781f1
  meshctl adopt --json
`

func runAdopt(a *app, _ *noFlags, pos []string) error {
	err := a.nargs(pos, 0, 1)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	var st *api.Adopt
	if len(pos) == 1 {
		st, err = a.client().Adopt(ctx, api.AdoptRequest{Fingerprint: pos[0]})
	} else {
		st, err = a.client().AdoptState(ctx)
	}
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(st)
	}
	if len(pos) == 1 {
		fmt.Fprintf(a.Stdout, "confirmed: a roster signed by admin %s that lists this node is adopted, even from mDNS; knocking again\n", strings.ToLower(pos[0]))
	}
	if st.Fresh {
		fmt.Fprintf(a.Stdout, "this node is in a one-node org of its own (%q): it adopts an org whose admins add it\n", st.Org)
	} else {
		fmt.Fprintf(a.Stdout, "this node belongs to org %q, which has other members or came from elsewhere: it adopts no other org\n", st.Org)
	}
	if len(st.Confirmed) > 0 {
		fmt.Fprintf(a.Stdout, "confirmed admins: %s\n", strings.Join(st.Confirmed, ", "))
	}
	if len(st.Knocked) == 0 {
		fmt.Fprintln(a.Stdout, "knocked at no node of another org yet (a seed or an mDNS peer of another org is knocked at when found)")
		return nil
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "ORG\tNODE\tADDRESS\tVIA\tSTATE\tADMINS\tLAST KNOCK")
	now := time.Now()
	for _, k := range st.Knocked {
		state := k.State
		if k.Reason != "" {
			state += " (" + k.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\n", dash(claimedText(k.Org)), dash(k.Fingerprint), k.Address, k.Via, state,
			dash(strings.Join(k.Admins, ",")), ago(now.Sub(k.LastKnock)))
	}
	return tw.Flush()
}

package main

import (
	"github.com/meshd/meshd/node/api"

	"fmt"
	"time"
)

const usagePeers = `usage: meshctl peers [--json]

List the peers this meshd holds links to: name, role, fingerprint, address,
transport (tcp or unix), direction, link age and when it was last heard.
NAME is the roster's name ("-" for none); a name the peer gave itself
follows as 'claims "..."', escaped, and is not the roster's. Names are
escaped, and only the fingerprint identifies a peer.

examples:
  meshctl peers
  meshctl peers --json | jq -r '.peers[].name'
`

func runPeers(a *app, _ *noFlags, pos []string) error {
	p, printed, err := fetch(a, pos, (*api.Client).Peers)
	if err != nil || printed {
		return err
	}
	if len(p.Peers) == 0 {
		fmt.Fprintln(a.Stdout, "no peers linked")
		return nil
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "NAME\tROLE\tFINGERPRINT\tADDRESS\tVIA\tDIR\tAGE\tLAST SEEN")
	now := time.Now()
	for _, x := range p.Peers {
		name := nameCell(x.Name)
		if x.ClaimedName != "" {
			// Not a roster name: the peer chose it.
			name += " claims " + claimedText(x.ClaimedName)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s ago\n", name, x.Role, x.Fingerprint, x.Address,
			x.Network, x.Direction, ago(now.Sub(x.Established)), ago(now.Sub(x.LastSeen)))
	}
	return tw.Flush()
}

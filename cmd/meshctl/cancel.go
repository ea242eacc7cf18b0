package main

import (
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageCancel = `usage: meshctl cancel REQUEST_ID [--to PEER] [--json]

Ask the peer working on one of this node's requests to stop. meshctl sends
that peer a request for the intent meshd.cancel whose params name the
request: {"request_id": "REQUEST_ID"}. Like any request it is only data:
the peer decides, and answers it (or the original request) as it sees fit.

The peer is the one that answered the request (its accepted or progress
answer is in the inbox); name it with --to when none has answered yet,
for instance after 'meshctl request --any' moved on from it.

flags:
  --to PEER   the peer to tell (key, fingerprint or roster name)

examples:
  meshctl cancel 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10
  meshctl cancel 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10 --to bob
`

func runCancel(a *app, args []string) error {
	fs := a.flagSet()
	to := fs.String("to", "", "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if *to != "" {
		if *to, err = a.peerArg(*to); err != nil {
			return err
		}
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Cancel(ctx, api.Cancel{RequestID: pos[0], To: *to})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	fmt.Fprintf(a.Stdout, "asked %s to cancel request %s (cancel request %s)\n", printable(s.To, false), printable(pos[0], false), printable(s.RequestID, false))
	a.printQueued(s)
	return nil
}

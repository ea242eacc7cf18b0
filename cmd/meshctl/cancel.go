package main

import (
	"flag"
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

// cancelFlags are the flags of 'meshctl cancel'.
type cancelFlags struct {
	to string
}

func (fl *cancelFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.to, "to", "", "")
}

func runCancel(a *app, fl *cancelFlags, pos []string) error {
	err := a.nargs(pos, 1, 1)
	if err != nil {
		return err
	}
	if fl.to != "" {
		if fl.to, err = a.peerArg(fl.to); err != nil {
			return err
		}
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Cancel(ctx, api.Cancel{RequestID: pos[0], To: fl.to})
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

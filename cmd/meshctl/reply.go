package main

import (
	"flag"
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageReply = `usage: meshctl reply ID TEXT [--from PEER] [--direct] [--json]

Answer inbox item ID with TEXT, where it came from: a channel message is
answered in its channel, and a direct message, request or response with a
direct message to its sender. The answer's in_reply_to is ID, so the
sender's agent can match it. ID is the id= of an item (not its
request_id); to answer a request with its status and result, use
'meshctl respond REQUEST_ID STATUS'.

TEXT "-" reads the message from stdin, all of it, up to 256 KiB.

flags:
  --from PEER   the sender of the item, when several share ID
  --direct      answer a channel message with a direct message to its
                sender instead of in the channel

examples:
  meshctl reply 01a1fe3d-fb49-7616-91dd-6ece3220b27e 'on it'
  meshctl reply 01a1fe3d-fb49-7616-91dd-6ece3220b27e --direct - < notes.txt
`

// replyFlags are the flags of 'meshctl reply'.
type replyFlags struct {
	from   string
	direct bool
}

func (fl *replyFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.from, "from", "", "")
	fs.BoolVar(&fl.direct, "direct", false, "")
}

func runReply(a *app, fl *replyFlags, pos []string) error {
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	if pos[0] == "" {
		return a.usageErrorf("ID is empty")
	}
	body, err := a.textArg(pos[1])
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Reply(ctx, api.Reply{ID: pos[0], From: fl.from, Body: body, Direct: fl.direct})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	fmt.Fprintf(a.Stdout, "sent %s to %s\n", printable(s.ID, false), printable(s.To, false))
	a.printQueued(s)
	return nil
}

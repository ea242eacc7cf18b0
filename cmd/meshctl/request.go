package main

import (
	"fmt"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

const usageRequest = `usage: meshctl request PEER INTENT [--params JSON] [--reply-to REQUEST_ID] [--json]

Ask PEER to do something. INTENT names the action (1 to 256 bytes, such as
run-tests) and --params carries its arguments as one JSON value. A request
is only data: the peer decides whether to act, and answers with 'meshctl
respond' (accepted, rejected, completed or failed). Answers arrive in
'meshctl inbox'. Only members with role operator or admin may send
requests. PEER is a member's full key, fingerprint or roster name.

A request made while handling another names that one with --reply-to; its
hop is one more than its parent's, and a chain ends at hop 3.

flags:
  --params JSON          the request's arguments; "-" reads them from stdin
  --reply-to REQUEST_ID  the request this one follows up

examples:
  meshctl request bob run-tests --params '{"branch": "main"}'
  jq -n '{pkgs: ["./..."]}' | meshctl request bob run-tests --params -
  meshctl request carol fetch-logs --reply-to 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10
`

func runRequest(a *app, args []string) error {
	fs := a.flagSet()
	var params jsonFlag
	fs.Var(&params, "params", "")
	replyTo := fs.String("reply-to", "", "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	peer, err := a.peerArg(pos[0])
	if err != nil {
		return err
	}
	intent := pos[1]
	if intent == "" || len(intent) > proto.MaxIntentLen || !utf8.ValidString(intent) {
		return a.usageErrorf("INTENT must be 1 to %d bytes of UTF-8", proto.MaxIntentLen)
	}
	p, err := a.jsonValue("params", &params)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Request(ctx, api.Request{To: peer, Intent: intent, Params: p, ReplyTo: *replyTo})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	hop := ""
	if s.Hop != nil {
		hop = fmt.Sprintf(", hop %d", *s.Hop)
	}
	fmt.Fprintf(a.Stdout, "sent request %s to %s (intent %s%s, envelope %s)\n", printable(s.RequestID, false),
		printable(sentTo(s, peer), false), fieldValue(intent), hop, printable(s.ID, false))
	a.printQueued(s)
	return nil
}

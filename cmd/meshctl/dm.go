package main

import (
	"flag"
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageDM = `usage: meshctl dm PEER TEXT [--in-reply-to ID] [--attach FILE]... [--json]

Send TEXT to one peer as a direct message. PEER is a member's full key
(ed25519:...), fingerprint or roster name. meshd keeps the message and
re-sends it until the peer has stored it, for up to 24 hours
(delivery_window), linked or not: a peer that is away or whose link died
unnoticed gets it when it links again. meshctl status ID says whether it
was delivered; if it never is, a delivery_failed item in your inbox says
so.

TEXT "-" reads the message from stdin, all of it, up to 256 KiB.

flags:
  --in-reply-to ID   the id of the message this one answers
  --attach FILE      attach FILE (repeatable, at most 16): meshd copies it
                     into its blob store and the message lists its name,
                     size, type and SHA-256 under the signature; the
                     recipients fetch it from any member that holds it

examples:
  meshctl dm bob 'can you look at the flaky test?'
  meshctl dm 1a2b3c4d5e6f7a8b - < notes.txt
`

// dmFlags are the flags of 'meshctl dm'.
type dmFlags struct {
	inReplyTo string
	attach    attachFlag
}

func (fl *dmFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.inReplyTo, "in-reply-to", "", "")
	fs.Var(&fl.attach, "attach", "")
}

func runDM(a *app, fl *dmFlags, pos []string) error {
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	peer, err := a.peerArg(pos[0])
	if err != nil {
		return err
	}
	body, err := a.textArg(pos[1])
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Send(ctx, api.Send{To: peer, Body: body, InReplyTo: fl.inReplyTo, Attachments: fl.attach})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	fmt.Fprintf(a.Stdout, "sent %s to %s\n", printable(s.ID, false), printable(sentTo(s, peer), false))
	a.printQueued(s)
	return nil
}

// sentTo names the recipient of a sent envelope: as meshd resolved it, or
// as typed.
func sentTo(s *api.Sent, typed string) string {
	if s.To != "" {
		return s.To
	}
	return typed
}

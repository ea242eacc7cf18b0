package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/meshd/meshd/node/api"
)

const usageSend = `usage: meshctl send '#NAME' TEXT [--in-reply-to ID] [--attach FILE]... [--json]

Send TEXT to channel NAME. meshd signs the message and hands it to the
linked peers that may read the channel; it prints the message's id and how
many peers it went to. Only the channel's writers may send ('meshctl
channel show NAME' lists them). For a message to one peer, use 'meshctl dm'.

Quote '#NAME': in a shell, an unquoted # starts a comment. TEXT "-" reads
the message from stdin, all of it, up to 256 KiB.

flags:
  --in-reply-to ID   the id of the message this one answers
  --attach FILE      attach FILE (repeatable, at most 16): meshd copies it
                     into its blob store and the message lists its name,
                     size, type and SHA-256 under the signature; the
                     recipients fetch it from any member that holds it

examples:
  meshctl send '#deploys' 'v1.4.2 is live'
  git log -1 | meshctl send '#deploys' -
`

// sendFlags are the flags of 'meshctl send'.
type sendFlags struct {
	inReplyTo string
	attach    attachFlag
}

func (fl *sendFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.inReplyTo, "in-reply-to", "", "")
	fs.Var(&fl.attach, "attach", "")
}

func runSend(a *app, fl *sendFlags, pos []string) error {
	if len(pos) == 0 {
		// What "meshctl send #deploys hi" turns into: the shell took the rest for a comment.
		return a.usageErrorf("missing '#NAME' and TEXT (quote '#NAME': an unquoted # starts a shell comment)")
	}
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	to := pos[0]
	if !strings.HasPrefix(to, "#") {
		return a.usageErrorf("%q is not a channel: write %s for the channel, or use 'meshctl dm %s TEXT' for a direct message",
			to, quoteShell("#"+to), quoteShell(to))
	}
	name, err := a.channelArg(to)
	if err != nil {
		return err
	}
	body, err := a.textArg(pos[1])
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Send(ctx, api.Send{To: "#" + name, Body: body, InReplyTo: fl.inReplyTo, Attachments: fl.attach})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	to = "#" + name
	if s.To != "" {
		to = s.To
	}
	fmt.Fprintf(a.Stdout, "sent %s to %s (%d %s)\n", printable(s.ID, false), printable(to, false), len(s.SentTo), plural(len(s.SentTo), "peer", "peers"))
	a.printQueued(s)
	return nil
}

// printQueued says so when meshd kept a message for a peer that is not
// linked.
func (a *app) printQueued(s *api.Sent) {
	if s.Queued {
		fmt.Fprintf(a.Stdout, "peer offline: kept and delivered when it links (meshctl status %s follows it)\n", printable(s.ID, false))
	}
}

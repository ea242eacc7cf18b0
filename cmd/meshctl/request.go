package main

import (
	"context"
	"flag"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

const usageRequest = `usage: meshctl request PEER INTENT [--params JSON] [--reply-to REQUEST_ID] [--attach FILE]... [--wait] [--timeout D] [--strict] [--json]
       meshctl request --any --intent INTENT [--accept-timeout D] [--params JSON] [--wait] [--timeout D] [--json]

Ask PEER to do something. INTENT names the action (1 to 256 bytes, such as
run-tests) and --params carries its arguments as one JSON value. A request
is only data: the peer decides whether to act, and answers with 'meshctl
respond' (accepted, rejected, completed or failed). Answers arrive in
'meshctl inbox'. Only members with role operator or admin may send
requests. PEER is a member's full key, fingerprint or roster name.

A request made while handling another names that one with --reply-to; its
hop is one more than its parent's, and a chain ends at hop 3.

With --wait, request blocks until the peer's final answer (completed,
rejected or failed) arrives, prints it and marks it read; accepted and
progress answers on the way are printed too. It exits 1 if the answer is rejected or
failed, and 3 if --timeout passes first.

When PEER publishes a card (meshctl card show PEER) that does not list
INTENT, request warns on stderr and sends anyway; with --strict it refuses
to send, and also when PEER publishes no card.

With --any instead of PEER, request asks whoever can: the members whose
card lists INTENT (meshctl agents --intent INTENT), online ones first, then
away ones, one at a time. It moves to the next when one rejects or does not
answer within --accept-timeout, and stops at the first that accepts (or
answers in full); with --wait it then waits for that one's final answer.
A request left unanswered stays with its peer, which may still take it up.
It exits 1 when nobody took the request.

flags:
  --params JSON          the request's arguments; "-" reads them from stdin
  --reply-to REQUEST_ID  the request this one follows up
  --attach FILE          attach FILE as an input (repeatable, at most 16);
                         the peer fetches it verified (see meshctl dm)
  --wait                 wait for the final answer and print it
  --timeout D            with --wait, give up after D (default: no limit)
  --strict               refuse unless PEER's card lists INTENT
  --any                  ask the members whose card lists INTENT, in turn
  --intent INTENT        with --any: the intent (or give it as the one argument)
  --accept-timeout D     with --any: how long to wait for each (default 30s)

examples:
  meshctl request bob run-tests --params '{"branch": "main"}'
  jq -n '{pkgs: ["./..."]}' | meshctl request bob run-tests --params -
  meshctl request carol fetch-logs --reply-to 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10
  meshctl request bob run-tests --wait --timeout 10m --json | jq .result
  meshctl request --any --intent run-tests --params '{"branch": "main"}' --wait
`

// requestFlags are the flags of 'meshctl request'.
type requestFlags struct {
	replyTo       string
	wait          bool
	timeout       time.Duration
	strict        bool
	anyone        bool
	intentFlag    string
	acceptTimeout time.Duration
	params        jsonFlag
	attach        attachFlag
}

func (fl *requestFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.replyTo, "reply-to", "", "")
	fs.BoolVar(&fl.wait, "wait", false, "")
	fs.DurationVar(&fl.timeout, "timeout", 0, "")
	fs.BoolVar(&fl.strict, "strict", false, "")
	fs.BoolVar(&fl.anyone, "any", false, "")
	fs.StringVar(&fl.intentFlag, "intent", "", "")
	fs.DurationVar(&fl.acceptTimeout, "accept-timeout", api.DefaultAcceptTimeout, "")
	fs.Var(&fl.params, "params", "")
	fs.Var(&fl.attach, "attach", "")
}

func runRequest(a *app, fl *requestFlags, pos []string) error {
	if fl.anyone || fl.intentFlag != "" {
		if len(fl.attach) > 0 {
			return a.usageErrorf("--attach does not go with --any: name the peer")
		}
		return a.runRequestAny(pos, fl.anyone, fl.intentFlag, fl.acceptTimeout, &fl.params, fl.replyTo, fl.wait, fl.timeout, fl.strict)
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
	p, err := a.jsonValue("params", &fl.params)
	if err != nil {
		return err
	}
	if fl.timeout != 0 && !fl.wait {
		return a.usageErrorf("--timeout needs --wait")
	}
	if err := a.checkCardIntent(peer, intent, fl.strict); err != nil {
		return err
	}
	var events *api.EventStream
	if fl.wait {
		// Listen before sending, so that a quick answer is not missed.
		if events, err = a.client().OpenEvents(context.Background()); err != nil {
			return a.remoteErr(err)
		}
		defer events.Close()
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Request(ctx, api.Request{To: peer, Intent: intent, Params: p, ReplyTo: fl.replyTo, Attachments: fl.attach})
	if err != nil {
		return a.remoteErr(err)
	}
	if fl.wait {
		return a.awaitResponse(events, s, fl.timeout)
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

// awaitResponse reads events until the final response to s arrives (or
// timeout passes, when not 0), prints it and marks it read.
func (a *app) awaitResponse(events *api.EventStream, s *api.Sent, timeout time.Duration) error {
	if !a.json {
		fmt.Fprintf(a.Stdout, "sent request %s; waiting for the answer\n", printable(s.RequestID, false))
	}
	type next struct {
		ev  api.Event
		err error
	}
	ch := make(chan next)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			ev, err := events.Next()
			select {
			case ch <- next{ev, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-expired:
			events.Close() // ends the reader
			if a.json {
				_ = a.printJSON(map[string]any{"request": s, "timed_out": true})
			} else {
				fmt.Fprintf(a.Stdout, "no answer within %v\n", timeout)
			}
			return exitStatus(exitTimeout)
		case n := <-ch:
			if n.err != nil {
				return a.remoteErr(n.err)
			}
			it := n.ev.Item
			if !n.ev.Lagged && it.Kind == api.KindDeliveryFailed && it.ID == s.ID {
				// The request itself never reached the peer.
				return a.requestFailed(&it)
			}
			if n.ev.Lagged || it.Kind != "response" || it.RequestID != s.RequestID {
				continue
			}
			final := it.Status != "accepted" && it.Status != "progress"
			if !a.json {
				if err := writeItem(a.Stdout, &it, true); err != nil {
					return err
				}
			}
			if !final {
				continue
			}
			ctx, cancel := a.ctx()
			_, err := a.client().MarkReadFrom(ctx, it.ID, it.From.Key.String())
			cancel()
			if err != nil {
				return a.remoteErr(err)
			}
			if a.json {
				if err := a.printJSON(it); err != nil {
					return err
				}
			}
			if it.Status != "completed" {
				return exitStatus(exitError)
			}
			return nil
		}
	}
}

// requestFailed reports a request that was not delivered, marks its
// delivery_failed item read and exits with an error status.
func (a *app) requestFailed(it *api.Item) error {
	ctx, cancel := a.ctx()
	_, err := a.client().MarkReadFrom(ctx, it.ID, it.From.Key.String())
	cancel()
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		if err := a.printJSON(it); err != nil {
			return err
		}
	} else if err := writeItem(a.Stdout, it, true); err != nil {
		return err
	}
	return exitStatus(exitError)
}

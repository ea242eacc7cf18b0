package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageWait = `usage: meshctl wait [--timeout D] [--json]

Wait until the inbox holds an unread item that wakes: a direct message, a
request, a response, or a message on a subscribed channel (muted channels
do not wake). An unread waking item ends the wait at once, so mark what you
handle read ('meshctl read ID'). wait prints the waking items, one line
each, as the first line 'meshctl inbox' shows of them; with --json, the
answer of 'meshctl inbox --json' holding just those items.

Without --timeout, wait waits as long as it takes.

flags:
  --timeout D   give up after D, such as 90s or 10m

examples:
  meshctl wait && meshctl inbox
  while meshctl wait; do ./handle-inbox.sh; done
  meshctl wait --timeout 90s --json

exit status: 0 when a waking item is there, 1 on error, 2 on a usage error,
and 3 when the timeout passed first.
`

// waitPoll bounds one long poll of a wait; meshd caps each at 10 minutes.
const waitPoll = 5 * time.Minute

// waitFlags are the flags of 'meshctl wait'.
type waitFlags struct {
	timeout time.Duration
}

func (fl *waitFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&fl.timeout, "timeout", 0, "")
}

func runWait(a *app, fl *waitFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	timeoutSet := a.given["timeout"]
	if timeoutSet && fl.timeout <= 0 {
		return a.usageErrorf("--timeout must be positive")
	}
	var d time.Duration
	if timeoutSet {
		d = fl.timeout
	}
	waking, err := waitWaking(context.Background(), a.client(), d)
	if err != nil {
		return a.remoteErr(err)
	}
	if len(waking) > 0 {
		return a.printWaking(&api.Inbox{Items: waking}, nil)
	}
	return a.printWaking(&api.Inbox{Items: []api.Item{}, TimedOut: true}, exitStatus(exitTimeout))
}

// waitWaking waits until the inbox holds unread waking items and returns
// them, or returns none once timeout passed (0: no timeout). It long-polls
// meshd, at most waitPoll a call, the last call up to the deadline; it
// ends with ctx's error when ctx ends first. 'meshctl wait' and the MCP
// tool wait_inbox share it.
func waitWaking(ctx context.Context, c *api.Client, timeout time.Duration) ([]api.Item, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		poll, last := waitPoll, false
		if timeout > 0 {
			if rest := time.Until(deadline).Truncate(time.Millisecond); rest <= poll {
				poll, last = rest, true
			}
		}
		if poll <= 0 {
			return nil, nil
		}
		cctx, cancel := context.WithTimeout(ctx, poll+waitSlack)
		in, err := c.Inbox(cctx, api.InboxQuery{Wait: true, Timeout: poll})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if waking := wakingItems(in.Items); len(waking) > 0 {
			return waking, nil
		}
		if last {
			return nil, nil
		}
	}
}

// wakingItems returns the unread items that wake.
func wakingItems(items []api.Item) []api.Item {
	out := []api.Item{}
	for _, it := range items {
		if it.Wakes && !it.Read {
			out = append(out, it)
		}
	}
	return out
}

// printWaking prints what ended a wait and returns done.
func (a *app) printWaking(in *api.Inbox, done error) error {
	if a.json {
		if err := a.printJSON(in); err != nil {
			return err
		}
		return done
	}
	if len(in.Items) == 0 {
		fmt.Fprintln(a.Stdout, "no new items")
		return done
	}
	for i := range in.Items {
		if err := a.writeItemLine(&in.Items[i]); err != nil {
			return err
		}
	}
	return done
}

// writeItemLine writes the header line of an item in the text form of
// 'meshctl inbox', noting content that follows it there.
func (a *app) writeItemLine(it *api.Item) error {
	var b strings.Builder
	if err := writeItem(&b, it, false); err != nil {
		return err
	}
	head, rest, _ := strings.Cut(b.String(), "\n")
	if strings.TrimSpace(rest) != "" {
		head += " ..."
	}
	_, err := fmt.Fprintln(a.Stdout, head)
	return err
}

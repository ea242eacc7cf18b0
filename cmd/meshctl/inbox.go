package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageInbox = `usage: meshctl inbox [--all] [--wait [--timeout D]] [--limit N] [--json]

List the unread items of this node's inbox: messages from subscribed and
muted channels, direct messages, requests and responses. Listing marks
nothing read; 'meshctl read ID' shows one item in full and marks it read.

Each item starts with a header line, "*" marking it unread:

  * [high] 2026-11-21 12:00:01 request from alice (1a2b3c4d5e6f7a8b) to @bob: intent=run-tests hop=0 id=ID request_id=RID
      {
        "branch": "main"
      }
  * [normal] 2026-11-21 12:00:05 #deploys alice id=ID: v1.4.2 is live

Params, results and bodies that do not fit on the header follow, indented;
long ones are cut short. Priority is high, normal or low (muted channels).
Times are local.

With --wait, first wait until an unread item that wakes exists (muted
channels' messages do not), or until the timeout passes. An unread waking
item ends the wait at once, so mark what you handle read. To wait as long
as it takes for something to handle:

  until meshctl inbox --wait --timeout 5m; do [ $? -eq 3 ] || exit 1; done

flags:
  --all          include items already read
  --wait         wait for a waking item first
  --timeout D    how long to wait, such as 90s or 10m (default 30s)
  --limit N      list at most N items

exit status: 0 when the list was made, 1 on error, 2 on a usage error, and
3 when --wait timed out with nothing to list.

examples:
  meshctl inbox
  meshctl inbox --all --limit 20
  meshctl inbox --wait --timeout 5m --json
`

// defaultWait is how long inbox --wait waits without --timeout.
const defaultWait = 30 * time.Second

// waitSlack is how much longer than the wait itself the control call may
// take: meshd answers when the wait ends, plus the time to list.
const waitSlack = 10 * time.Second

func runInbox(a *app, args []string) error {
	fs := a.flagSet()
	all := fs.Bool("all", false, "")
	wait := fs.Bool("wait", false, "")
	timeout := fs.Duration("timeout", defaultWait, "")
	limit := fs.Int("limit", 0, "")
	pos, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	timeoutSet := false
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	switch {
	case timeoutSet && !*wait:
		return a.usageErrorf("--timeout needs --wait")
	case *timeout <= 0:
		return a.usageErrorf("--timeout must be positive")
	case *limit < 0:
		return a.usageErrorf("--limit must not be negative")
	}
	q := api.InboxQuery{All: *all, Limit: *limit}
	callTimeout := api.DefaultTimeout
	if *wait {
		q.Wait, q.Timeout = true, *timeout
		callTimeout = *timeout + waitSlack
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	in, err := a.client().Inbox(ctx, q)
	if err != nil {
		return a.remoteErr(err)
	}
	var done error
	if *wait && len(in.Items) == 0 {
		done = exitStatus(exitTimeout)
	}
	if a.json {
		if err := a.printJSON(in); err != nil {
			return err
		}
		return done
	}
	switch {
	case *wait && len(in.Items) == 0:
		fmt.Fprintln(a.Stdout, "no new items")
	case len(in.Items) == 0 && *all:
		fmt.Fprintln(a.Stdout, "the inbox is empty")
	case len(in.Items) == 0:
		fmt.Fprintln(a.Stdout, "no unread items")
	}
	for i := range in.Items {
		if err := writeItem(a.Stdout, &in.Items[i], false); err != nil {
			return err
		}
	}
	return done
}

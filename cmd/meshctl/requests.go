package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageRequests = `usage: meshctl requests [--pending] [--limit N] [--json]

List the requests this node sent, newest first, each with its latest
status and age. The status is that of the newest response from the peer
asked (accepted, progress, rejected, completed or failed) or, while none
came, what became of the request itself (queued, delivered, expired or
refused; see meshctl sent). A request is pending until a final answer
(rejected, completed or failed) comes or it was given up (expired or
refused). Requests are listed as long as their delivery records are kept
(72 h by default).

flags:
  --pending   only the requests still waiting for a final answer
  --limit N   the newest N (default 100, at most 10000)

examples:
  meshctl requests --pending
  meshctl requests --json | jq '.requests[] | select(.status=="failed")'
`

// requestsFlags are the flags of 'meshctl requests'.
type requestsFlags struct {
	pending bool
	limit   int
}

func (fl *requestsFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.pending, "pending", false, "")
	fs.IntVar(&fl.limit, "limit", 0, "")
}

func runRequests(a *app, fl *requestsFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.limit < 0 || fl.limit > api.MaxHistoryLimit {
		return a.usageErrorf("--limit must be from 1 to %d", api.MaxHistoryLimit)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	l, err := a.client().Requests(ctx, fl.pending, fl.limit)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(l)
	}
	if len(l.Requests) == 0 {
		what := "no requests sent"
		if fl.pending {
			what = "no request is waiting for an answer"
		}
		_, err := fmt.Fprintln(a.Stdout, what)
		return err
	}
	tw := table(a.Stdout)
	fmt.Fprintf(tw, "AGE\tREQUEST_ID\tTO\tINTENT\tSTATUS\tPENDING\n")
	for _, r := range l.Requests {
		pend := "no"
		if r.Pending {
			pend = "yes"
		}
		rid := r.RequestID
		if rid == "" {
			rid = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ageText(time.Duration(r.AgeSeconds*float64(time.Second))), rid,
			printable(partyName(r.To), false), printable(orDash(r.Intent), false), printable(r.Status, false), pend)
	}
	return tw.Flush()
}

// ageText is a duration rounded for a table: 45s, 12m, 3h, 2d.
func ageText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

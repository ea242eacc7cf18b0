package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageInbox = `usage: meshctl inbox [--all] [--wait [--timeout D]] [--limit N]
                    [--from PEER] [--kind KIND] [--channel NAME] [--since D]
                    [--claim N [--lease D] [--worker NAME]] [--json]

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
  --limit N      list only the newest N items
  --from PEER    only items from PEER (a name, fingerprint or key)
  --kind KIND    only message, request, response or delivery_failed items
  --channel NAME only items of channel NAME; '@' for direct items only
  --since D      only items delivered in the last D (90m, 72h, 3d) or
                 since an RFC 3339 time

Claims, for a pool of workers behind one node:
  --claim N      claim up to N unread items that no other worker holds,
                 oldest first, and list them; with --wait, wait until at
                 least one can be claimed. Each stays claimed for the
                 lease, then returns to the pool unless it was read
                 (meshctl read ID, or meshctl respond for a request).
  --lease D      how long a claim holds (default 5m, at most 24h)
  --worker NAME  this worker's name, shown to others (default $MESH_WORKER)

An inbox of any size lists in full: meshctl reads it from meshd a page
(at most 1000 items, about 4 MiB) at a time and prints each page as it
comes.

exit status: 0 when the list was made, 1 on error, 2 on a usage error, and
3 when --wait timed out with nothing to list.

examples:
  meshctl inbox
  meshctl inbox --all --limit 20
  meshctl inbox --wait --timeout 5m --json
  meshctl inbox --all --from alice --kind request --since 24h
  meshctl inbox --claim 1 --wait --timeout 5m --lease 10m --json
`

// defaultWait is how long inbox --wait waits without --timeout.
const defaultWait = 30 * time.Second

// waitSlack is how much longer than the wait itself the control call may
// take: meshd answers when the wait ends, plus the time to list.
const waitSlack = 10 * time.Second

// inboxFlags are the flags of 'meshctl inbox'.
type inboxFlags struct {
	all     bool
	wait    bool
	timeout time.Duration
	limit   int
	claimN  int
	lease   time.Duration
	worker  string
	filter  api.InboxFilter
}

func (fl *inboxFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.all, "all", false, "")
	fs.BoolVar(&fl.wait, "wait", false, "")
	fs.DurationVar(&fl.timeout, "timeout", defaultWait, "")
	fs.IntVar(&fl.limit, "limit", 0, "")
	fs.IntVar(&fl.claimN, "claim", 0, "")
	fs.DurationVar(&fl.lease, "lease", api.DefaultLease, "")
	fs.StringVar(&fl.worker, "worker", "", "")
	filterFlags(fs, &fl.filter)
}

func runInbox(a *app, fl *inboxFlags, pos []string) error {
	err := a.nargs(pos, 0, 0)
	if err != nil {
		return err
	}
	timeoutSet := a.given["timeout"]
	switch {
	case timeoutSet && !fl.wait:
		return a.usageErrorf("--timeout needs --wait")
	case fl.timeout <= 0:
		return a.usageErrorf("--timeout must be positive")
	case fl.limit < 0:
		return a.usageErrorf("--limit must not be negative")
	}
	if err := a.checkFilter(fl.filter); err != nil {
		return err
	}
	if fl.claimN != 0 || a.given["lease"] || a.given["worker"] {
		return a.claimNext(fl.claimN, fl.lease, a.workerName(fl.worker), fl.wait, fl.timeout, fl.filter, fl.all || fl.limit != 0)
	}
	// Without --limit every item, from the oldest; with it the newest N.
	q := api.InboxQuery{All: fl.all, Limit: fl.limit, Filter: fl.filter}
	if fl.limit == 0 {
		q.Cursor = api.CursorStart
	}
	callTimeout := api.DefaultTimeout
	if fl.wait {
		q.Wait, q.Timeout = true, fl.timeout
		callTimeout = fl.timeout + waitSlack
	}
	out := inboxWriter{a: a, wait: fl.wait, all: fl.all}
	err = a.client().InboxPages(context.Background(), q, callTimeout, out.page)
	if err != nil && out.pages == 0 {
		return a.remoteErr(err)
	}
	if err != nil {
		// Items are printed already: end the output as it began, then fail.
		_ = out.end()
		return a.remoteErr(err)
	}
	if err := out.end(); err != nil {
		return err
	}
	if fl.wait && out.items == 0 {
		return exitStatus(exitTimeout)
	}
	return nil
}

// inboxWriter prints the pages of an inbox listing as they come, in
// the formats of a single answer: the text lines, or with --json the
// JSON that printJSON makes of one api.Inbox holding every item.
type inboxWriter struct {
	a         *app
	wait, all bool
	pages     int
	items     int
	timedOut  bool
}

func (w *inboxWriter) page(in *api.Inbox) error {
	a := w.a
	w.pages++
	w.timedOut = w.timedOut || in.TimedOut
	for i := range in.Items {
		it := &in.Items[i]
		if a.json {
			b, err := json.MarshalIndent(it, "    ", "  ")
			if err != nil {
				return fmt.Errorf("encode json: %w", err)
			}
			sep := ",\n    "
			if w.items == 0 {
				sep = "{\n  \"items\": [\n    "
			}
			if _, err := fmt.Fprintf(a.Stdout, "%s%s", sep, b); err != nil {
				return err
			}
		} else if err := writeItem(a.Stdout, it, false); err != nil {
			return err
		}
		w.items++
	}
	return nil
}

// end finishes the listing: the closing JSON, or the line that says
// there was nothing.
func (w *inboxWriter) end() error {
	a := w.a
	if a.json {
		tail := "\n  ]"
		if w.items == 0 {
			tail = "{\n  \"items\": []"
		}
		if w.timedOut {
			tail += ",\n  \"timed_out\": true"
		}
		_, err := fmt.Fprintf(a.Stdout, "%s\n}\n", tail)
		return err
	}
	var msg string
	switch {
	case w.items > 0:
		return nil
	case w.wait:
		msg = "no new items"
	case w.all:
		msg = "the inbox is empty"
	default:
		msg = "no unread items"
	}
	_, err := fmt.Fprintln(a.Stdout, msg)
	return err
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/meshd/meshd/node/api"
)

const usageTail = `usage: meshctl tail [--all-history N] [--json]

Print inbox items as meshd delivers them, until Ctrl-C: messages from
subscribed and muted channels, direct messages, requests and responses.
Each item is printed as 'meshctl inbox' prints it; with --json, each is one
line of JSON (JSON lines, one inbox item per line, as in 'meshctl inbox
--json'). Tail marks nothing read.

When the attachments of an item are fetched and in place beside its
mailbox file, tail prints them again with their local paths (with --json,
one line with "kind": "attachments", the item's id and its attachments,
each with "path" once present).

If this tail falls far behind (meshd keeps 256 items for a slow reader),
meshd skips items and tail says so on stderr; 'meshctl inbox' lists them.

flags:
  --all-history N   first print the newest N items of the inbox, read or
                    not, then follow

examples:
  meshctl tail
  meshctl tail --all-history 20
  meshctl tail --json | jq -r 'select(.kind == "request") | .request_id'
  meshctl tail --json | jq -r 'select(.kind == "attachments") | .attachments[].path'

exit status: 0 on Ctrl-C, 1 on error or when meshd stops.
`

// tailFlags are the flags of 'meshctl tail'.
type tailFlags struct {
	history int
}

func (fl *tailFlags) define(fs *flag.FlagSet) {
	fs.IntVar(&fl.history, "all-history", 0, "")
}

func runTail(a *app, fl *tailFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.history < 0 {
		return a.usageErrorf("--all-history must not be negative")
	}
	ctx, stop := interruptContext()
	defer stop()

	c := a.client()
	s, err := c.OpenEvents(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return a.remoteErr(err)
	}
	defer s.Close()
	s.Attachments = true

	// Opened first, so nothing falls between the history and the stream;
	// what is in both is printed once.
	seen := map[string]bool{}
	if fl.history > 0 {
		// Page by page: the newest N may be more than one answer holds.
		err := c.InboxPages(ctx, api.InboxQuery{All: true, Limit: fl.history}, api.DefaultTimeout, func(in *api.Inbox) error {
			for i := range in.Items {
				seen[in.Items[i].ID] = true
				if err := a.printTailItem(&in.Items[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return a.remoteErr(err)
		}
	}
	for {
		ev, err := s.Next()
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C
		case errors.Is(err, api.ErrEventsEnded):
			return withHint(err, "meshd stopped; start it again with: meshd --home %s", a.home().Dir)
		case err != nil:
			return a.remoteErr(err)
		case ev.Lagged:
			fmt.Fprintln(a.Stderr, "meshctl: fell behind: meshd skipped items this tail was too slow to take; 'meshctl inbox' lists them")
			continue
		case ev.Ready != nil:
			if err := a.printTailReady(ev.Ready); err != nil {
				return err
			}
			continue
		case seen[ev.Item.ID]:
			delete(seen, ev.Item.ID)
			continue
		}
		if err := a.printTailItem(&ev.Item); err != nil {
			return err
		}
	}
}

// printTailItem prints one item in the text form, or as one line of JSON.
func (a *app) printTailItem(it *api.Item) error {
	if !a.json {
		return writeItem(a.Stdout, it, false)
	}
	return writeJSONLine(a.Stdout, it)
}

// printTailReady prints an item's attachments now present, with their
// paths, in the text form or as one line of JSON.
func (a *app) printTailReady(r *api.AttachmentsReady) error {
	if a.json {
		return writeJSONLine(a.Stdout, r)
	}
	fmt.Fprintf(a.Stdout, "attachments of %s from %s:\n", r.ID, partyLabel(r.From))
	for _, x := range r.Attachments {
		p := x.Path
		if p == "" {
			p = "(not fetched: meshctl fetch " + r.ID + " " + x.Name + ")"
		}
		fmt.Fprintf(a.Stdout, "  %s (%d bytes, sha256 %s) %s\n", x.Name, x.Size, x.SHA256, p)
	}
	_, err := fmt.Fprintln(a.Stdout)
	return err
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/api"
)

const usageSent = `usage: meshctl sent [--pending] [--limit N] [--json]

List what this node sent, newest first, with what became of it. A direct
message, request or response has one line per recipient, in one of the
states:

  queued     kept and re-sent every 30 s until the recipient acknowledges
             it (it is not yet stored there)
  delivered  acknowledged: the recipient stored it (the time it did)
  expired    never acknowledged within its life (delivery_window, 24 h by
             default); meshd stopped sending it and put a delivery_failed
             item in this node's inbox
  refused    meshd gave it up before it expired (the reason is shown),
             and put a delivery_failed item in this node's inbox

A channel message shows how many linked readers it was sent to and how
many of them acknowledged storing it (readers that were not linked catch
up through history sync, and older nodes do not acknowledge channel
messages). Records of what is no longer queued are kept as long as
direct messages (72 h by default).

flags:
  --pending   only what is still queued
  --limit N   the newest N (default 100)

examples:
  meshctl sent --pending
  meshctl status 0193a1c2-...
  meshctl sent --json | jq '.items[] | select(.recipients[0].state=="expired")'
`

// sentFlags are the flags of 'meshctl sent'.
type sentFlags struct {
	pending bool
	limit   int
}

func (fl *sentFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.pending, "pending", false, "")
	fs.IntVar(&fl.limit, "limit", 0, "")
}

func runSent(a *app, fl *sentFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.limit < 0 {
		return a.usageErrorf("--limit must be 1 or more")
	}
	ctx, cancel := a.ctx()
	defer cancel()
	l, err := a.client().SentList(ctx, api.SentQuery{Pending: fl.pending, Limit: fl.limit})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(l)
	}
	if len(l.Items) == 0 {
		what := "nothing sent"
		if fl.pending {
			what = "nothing queued: every direct message sent was acknowledged, or expired"
		}
		_, err := fmt.Fprintln(a.Stdout, what)
		return err
	}
	tw := table(a.Stdout)
	fmt.Fprintf(tw, "SENT\tID\tKIND\tTO\tSTATE\n")
	for i := range l.Items {
		d := &l.Items[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Sent.Local().Format("2006-01-02 15:04:05"), d.ID, d.Kind,
			printable(d.To, false), deliveryState(d))
	}
	return tw.Flush()
}

// deliveryState is a delivery's state in one line.
func deliveryState(d *api.Delivery) string {
	if d.LinkedReaders != nil && d.AckedReaders != nil {
		return fmt.Sprintf("acked by %d of %d linked readers", *d.AckedReaders, *d.LinkedReaders)
	}
	if len(d.Recipients) == 0 {
		return "-"
	}
	r := d.Recipients[0]
	s := r.State
	switch r.State {
	case "delivered", "expired", "refused":
		s += " " + r.At.Local().Format("2006-01-02 15:04:05")
	case "queued":
		s += ", expires " + d.Expires.Local().Format("2006-01-02 15:04:05")
	}
	if r.Reason != "" {
		s += ": " + printable(r.Reason, false)
	}
	return s
}

// runDeliveryStatus is meshctl status ID: one sent envelope's state.
func runDeliveryStatus(a *app, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return a.usageErrorf("%q is not a message id (the id meshctl dm, send, request or respond printed): %v", id, err)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	d, err := a.client().Delivery(ctx, id)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(d)
	}
	return writeDelivery(a.Stdout, d)
}

func writeDelivery(w io.Writer, d *api.Delivery) error {
	tw := table(w)
	fmt.Fprintf(tw, "id\t%s\n", d.ID)
	fmt.Fprintf(tw, "kind\t%s\n", d.Kind)
	fmt.Fprintf(tw, "to\t%s\n", printable(d.To, false))
	fmt.Fprintf(tw, "sent\t%s\n", d.Sent.Local().Format(time.RFC3339))
	fmt.Fprintf(tw, "expires\t%s\n", d.Expires.Local().Format(time.RFC3339))
	if d.LinkedReaders != nil && d.AckedReaders != nil {
		fmt.Fprintf(tw, "readers\t%s linked when sent, %s acknowledged\n", strconv.Itoa(*d.LinkedReaders), strconv.Itoa(*d.AckedReaders))
	}
	for _, r := range d.Recipients {
		name := r.Name
		if name == "" {
			name = "-"
		}
		line := r.State
		if !r.At.IsZero() {
			line += " at " + r.At.Local().Format(time.RFC3339)
		}
		if r.Reason != "" {
			line += ": " + printable(r.Reason, false)
		}
		fmt.Fprintf(tw, "recipient\t%s (%s): %s\n", printable(name, false), r.Fingerprint, line)
	}
	return tw.Flush()
}

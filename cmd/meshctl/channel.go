package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
)

const usageChannel = `usage: meshctl channel COMMAND [ARGS]

A channel is a named topic, such as #deploys, that members of the org
write to and read. Its policy, signed by a roster admin, says who may read
and write it and whether peers may fetch its history. This node takes a
channel's messages into its inbox once it subscribes ('meshctl subscribe
NAME'); send to it with 'meshctl send '#NAME' TEXT'.

NAME is 1 to 64 characters of a-z, 0-9, '.', '_' and '-', starting with a
letter or digit. A leading '#' is optional, and capitals are folded.

commands:

examples:
  meshctl channel create deploys --writers role:operator
  meshctl channel set deploys --readers role:operator --history off
  meshctl channel delete old-builds
  meshctl channel list
`

// access renders what this node may do on a channel.
func access(ch *api.Channel) string {
	switch {
	case ch.Deleted:
		return "deleted"
	case ch.CanRead && ch.CanWrite:
		return "read/write"
	case ch.CanRead:
		return "read"
	case ch.CanWrite:
		return "write"
	}
	return "none"
}

// onOff renders a boolean setting.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// principals renders a reader, writer or admin list.
func principals(ps []string) string {
	if len(ps) == 0 {
		return "-"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = printable(p, false)
	}
	return strings.Join(out, ", ")
}

// retention renders a channel's history limits, where 0 means the
// protocol's default.
func retention(ch *api.Channel) string {
	h, n := ch.RetentionHours, ch.RetentionMessages
	if h == 0 {
		h = channel.DefaultRetentionHours
	}
	if n == 0 {
		n = channel.DefaultRetentionMessages
	}
	return fmt.Sprintf("%d hours or %d messages, whichever is reached first", h, n)
}

// writeChannel writes every field of a channel, one per line.
func writeChannel(w io.Writer, ch *api.Channel) error {
	tw := table(w)
	fmt.Fprintf(tw, "channel\t#%s\n", printable(ch.Name, false))
	fmt.Fprintf(tw, "id\t%s\n", printable(ch.ID, false))
	fmt.Fprintf(tw, "version\t%d\n", ch.Version)
	if ch.Deleted {
		fmt.Fprintf(tw, "deleted\tyes: a tombstone; nothing is delivered, sends are refused\n")
	}
	fmt.Fprintf(tw, "subscription\t%s\n", printable(ch.Subscription, false))
	fmt.Fprintf(tw, "access\t%s\n", access(ch))
	fmt.Fprintf(tw, "readers\t%s\n", principals(ch.Readers))
	fmt.Fprintf(tw, "writers\t%s\n", principals(ch.Writers))
	fmt.Fprintf(tw, "admins\t%s\n", principals(ch.Admins))
	fmt.Fprintf(tw, "history fetch\t%s\n", onOff(ch.AllowHistoryFetch))
	fmt.Fprintf(tw, "retention\t%s\n", retention(ch))
	return tw.Flush()
}

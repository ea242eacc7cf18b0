package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageChannelShow = `usage: meshctl channel show NAME [--json]

Show everything about channel NAME: its id and policy version, readers,
writers and admins, whether peers may fetch its history and how long it is
kept, this node's subscription, and whether this node may read and write;
then the policy versions this node accepted, oldest first, each with its
signers and what it set. Versions made while this node was away are not
listed.

examples:
  meshctl channel show '#deploys'
`

func runChannelShow(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	name, err := a.channelArg(pos[0])
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ch, err := a.client().Channel(ctx, name)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(ch)
	}
	if err := writeChannel(a.Stdout, ch); err != nil {
		return err
	}
	return writeVersions(a.Stdout, ch.Versions)
}

// writeVersions lists a channel's policy versions, one per line.
func writeVersions(w io.Writer, vs []api.ChannelVersion) error {
	if len(vs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nversions:")
	tw := table(w)
	fmt.Fprintln(tw, "VERSION\tMADE\tSIGNED BY\tREADERS\tWRITERS\tHISTORY\tRETENTION")
	for _, v := range vs {
		readers, writers := principals(v.Readers), principals(v.Writers)
		if v.Deleted {
			readers, writers = "(deleted)", "-"
		}
		signers := make([]string, len(v.Signers))
		for i, s := range v.Signers {
			signers[i] = printable(s, false)
		}
		fmt.Fprintf(tw, "v%d\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Version, v.Made.Local().Format(time.DateTime),
			strings.Join(signers, ", "), readers, writers, onOff(v.History), retentionShort(v.Hours, v.Messages))
	}
	return tw.Flush()
}

// retentionShort renders a version's retention, 0 meaning the default.
func retentionShort(h, n int) string {
	hs, ns := fmt.Sprintf("%dh", h), fmt.Sprint(n)
	if h == 0 {
		hs = "default"
	}
	if n == 0 {
		ns = "default"
	}
	return hs + "/" + ns
}

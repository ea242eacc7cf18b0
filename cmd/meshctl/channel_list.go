package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/meshd/meshd/node/api"
)

const usageChannelList = `usage: meshctl channel list [--json]

List the channels this node knows, with this node's subscription
(subscribed, muted or unsubscribed), what it may do there (read/write,
read, write or none), the policy version, and whether peers may fetch the
channel's history.

examples:
  meshctl channel list
  meshctl channel list --json
`

func runChannelList(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	cs, err := a.client().Channels(ctx)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(cs)
	}
	if len(cs.Channels) == 0 {
		fmt.Fprintln(a.Stdout, "no channels (an admin creates one with 'meshctl channel create NAME')")
		return nil
	}
	chans := slices.Clone(cs.Channels)
	slices.SortFunc(chans, func(x, y api.Channel) int { return cmp.Compare(x.Name, y.Name) })
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "NAME\tSUBSCRIPTION\tREAD/WRITE\tVERSION\tHISTORY")
	for i := range chans {
		ch := &chans[i]
		fmt.Fprintf(tw, "#%s\t%s\t%s\t%d\t%s\n", printable(ch.Name, false), printable(ch.Subscription, false),
			access(ch), ch.Version, onOff(ch.AllowHistoryFetch))
	}
	return tw.Flush()
}

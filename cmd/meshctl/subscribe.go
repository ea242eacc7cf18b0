package main

import (
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageSubscribe = `usage: meshctl subscribe NAME [--json]

Subscribe to channel NAME: its messages go to this node's inbox at normal
priority and wake 'meshctl inbox --wait'. NAME may start with '#'.

example:
  meshctl subscribe deploys
`

func runSubscribe(a *app, _ *noFlags, pos []string) error {
	return a.setSubscription(pos, "subscribed")
}

// setSubscription is the shared flow of subscribe, unsubscribe, mute and
// unmute: one channel name, one state.
func (a *app) setSubscription(pos []string, state string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	name, err := a.channelArg(pos[0])
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ch, err := a.client().Subscribe(ctx, api.Subscribe{Channel: name, State: state})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(ch)
	}
	if ch.Name != "" {
		name = ch.Name
	}
	name = "#" + printable(name, false)
	switch a.cmd.name {
	case "unsubscribe":
		fmt.Fprintf(a.Stdout, "unsubscribed from %s: its messages no longer go to the inbox\n", name)
	case "mute":
		fmt.Fprintf(a.Stdout, "muted %s: its messages go to the inbox at low priority and do not wake\n", name)
	case "unmute":
		fmt.Fprintf(a.Stdout, "unmuted %s: subscribed\n", name)
	default:
		fmt.Fprintf(a.Stdout, "subscribed to %s\n", name)
	}
	if !ch.CanRead && state != "unsubscribed" {
		fmt.Fprintf(a.Stdout, "note: this node may not read %s, so nothing will arrive until its policy allows it\n", name)
	}
	return nil
}

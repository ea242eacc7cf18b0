package main

const usageUnsubscribe = `usage: meshctl unsubscribe NAME [--json]

Unsubscribe from channel NAME: its messages no longer go to this node's
inbox. NAME may start with '#'.

examples:
  meshctl unsubscribe random
`

func runUnsubscribe(a *app, _ *noFlags, pos []string) error {
	return a.setSubscription(pos, "unsubscribed")
}

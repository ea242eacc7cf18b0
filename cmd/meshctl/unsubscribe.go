package main

const usageUnsubscribe = `usage: meshctl unsubscribe NAME [--json]

Unsubscribe from channel NAME: its messages no longer go to this node's
inbox. NAME may start with '#'.

examples:
  meshctl unsubscribe random
`

func runUnsubscribe(a *app, args []string) error { return a.setSubscription(args, "unsubscribed") }

package main

const usageUnmute = `usage: meshctl unmute NAME [--json]

Unmute channel NAME: subscribe to it again, so its messages go to the inbox
at normal priority and wake 'meshctl inbox --wait'. NAME may start with '#'.

examples:
  meshctl unmute '#random'
`

func runUnmute(a *app, _ *noFlags, pos []string) error { return a.setSubscription(pos, "subscribed") }

package main

const usageUnmute = `usage: meshctl unmute NAME [--json]

Unmute channel NAME: subscribe to it again, so its messages go to the inbox
at normal priority and wake 'meshctl inbox --wait'. NAME may start with '#'.

examples:
  meshctl unmute '#random'
`

func runUnmute(a *app, args []string) error { return a.setSubscription(args, "subscribed") }

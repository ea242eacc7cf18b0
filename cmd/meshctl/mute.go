package main

const usageMute = `usage: meshctl mute NAME [--json]

Mute channel NAME: its messages still go to this node's inbox, at low
priority, but no longer wake 'meshctl inbox --wait'. 'meshctl unmute NAME'
subscribes again. NAME may start with '#'.

examples:
  meshctl mute '#random'
`

func runMute(a *app, _ *noFlags, pos []string) error { return a.setSubscription(pos, "muted") }

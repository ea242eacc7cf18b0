package main

const usageChannelShow = `usage: meshctl channel show NAME [--json]

Show everything about channel NAME: its id and policy version, readers,
writers and admins, whether peers may fetch its history and how long it is
kept, this node's subscription, and whether this node may read and write.

examples:
  meshctl channel show '#deploys'
`

func runChannelShow(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
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
	return writeChannel(a.Stdout, ch)
}

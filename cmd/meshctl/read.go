package main

const usageRead = `usage: meshctl read ID [--json]

Mark inbox item ID read and show it in full: the header line that 'meshctl
inbox' shows, then the whole body, params or result. ID is the id= of an
item (not its request_id).

examples:
  meshctl read 01a1fe3d-fb49-7616-91dd-6ece3220b27e
`

func runRead(a *app, args []string) error {
	pos, err := a.parse(a.flagSet(), args)
	if err != nil {
		return err
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if pos[0] == "" {
		return a.usageErrorf("ID is empty")
	}
	ctx, cancel := a.ctx()
	defer cancel()
	it, err := a.client().MarkRead(ctx, pos[0])
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(it)
	}
	return writeItem(a.Stdout, it, true)
}

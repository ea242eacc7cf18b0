package main

import "flag"

const usageRead = `usage: meshctl read ID [--from PEER] [--json]

Mark inbox item ID read and show it in full: the header line that 'meshctl
inbox' shows, then the whole body, params or result. ID is the id= of an
item (not its request_id).

Ids are chosen by senders, so two members' items can share one; meshd
then refuses, naming both senders, and --from PEER picks one.

flags:
  --from PEER   the sender of the item, when several share ID

examples:
  meshctl read 01a1fe3d-fb49-7616-91dd-6ece3220b27e
`

// readFlags are the flags of 'meshctl read'.
type readFlags struct {
	from string
}

func (fl *readFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.from, "from", "", "")
}

func runRead(a *app, fl *readFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if pos[0] == "" {
		return a.usageErrorf("ID is empty")
	}
	ctx, cancel := a.ctx()
	defer cancel()
	it, err := a.client().MarkReadFrom(ctx, pos[0], fl.from)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(it)
	}
	return writeItem(a.Stdout, it, true)
}

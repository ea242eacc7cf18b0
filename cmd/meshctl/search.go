package main

import (
	"flag"
	"fmt"

	"github.com/meshd/meshd/node/api"
)

const usageSearch = `usage: meshctl search TEXT [--limit N] [--from PEER] [--kind KIND]
                     [--channel NAME] [--since D] [--json]

List the inbox items this node holds, read or not, whose text holds TEXT
(case does not matter): a message's body, a request's intent and params,
a response's status and result, and the sender's name. The newest N
matches (default 100) are listed oldest first, as 'meshctl inbox' lists
items. Items are held as long as retention keeps them (72 h for direct
messages; a channel's own retention).

flags:
  --limit N      the newest N matches (default 100, at most 10000)
  --from, --kind, --channel, --since   as for meshctl inbox

examples:
  meshctl search 'flaky test'
  meshctl search deploy --channel deploys --since 24h --json
`

// searchFlags are the flags of 'meshctl search'.
type searchFlags struct {
	limit  int
	filter api.InboxFilter
}

func (fl *searchFlags) define(fs *flag.FlagSet) {
	fs.IntVar(&fl.limit, "limit", 0, "")
	filterFlags(fs, &fl.filter)
}

func runSearch(a *app, fl *searchFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if pos[0] == "" {
		return a.usageErrorf("TEXT is empty")
	}
	if fl.limit < 0 || fl.limit > api.MaxHistoryLimit {
		return a.usageErrorf("--limit must be from 1 to %d", api.MaxHistoryLimit)
	}
	if err := a.checkFilter(fl.filter); err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	in, err := a.client().Search(ctx, pos[0], fl.limit, fl.filter)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(in)
	}
	if len(in.Items) == 0 {
		_, err := fmt.Fprintln(a.Stdout, "no held item matches")
		return err
	}
	for i := range in.Items {
		if err := writeItem(a.Stdout, &in.Items[i], false); err != nil {
			return err
		}
	}
	return nil
}

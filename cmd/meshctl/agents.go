package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/meshd/meshd/node/api"
)

const usageAgents = `usage: meshctl agents [--intent NAME] [--json]

List the members that publish a card, with what they serve and their
presence: online first, then away, then offline. With --intent, only the
members whose card lists that intent: whom to send 'meshctl request' to.

flags:
  --intent NAME   only members serving this intent

examples:
  meshctl agents
  meshctl agents --intent run-tests --json | jq -r '.cards[0].name'
`

// agentsFlags are the flags of 'meshctl agents'.
type agentsFlags struct {
	intent string
}

func (fl *agentsFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.intent, "intent", "", "")
}

func runAgents(a *app, fl *agentsFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	cs, err := a.client().Cards(ctx, fl.intent)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(cs)
	}
	if len(cs.Cards) == 0 {
		if fl.intent != "" {
			fmt.Fprintf(a.Stdout, "no member's card lists intent %s\n", fieldValue(fl.intent))
		} else {
			fmt.Fprintln(a.Stdout, "no member publishes a card (publish one with: meshctl card set --file card.json)")
		}
		return nil
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "NAME\tFINGERPRINT\tPRESENCE\tINTENTS\tDESCRIPTION")
	for _, c := range cs.Cards {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", agentName(&c), printable(c.Fingerprint, false),
			printable(c.Presence, false), intentList(&c), orDash(printable(c.Description, false)))
	}
	return tw.Flush()
}

func agentName(c *api.Card) string {
	name := orDash(printable(c.Name, false))
	if c.Self {
		name += " (self)"
	}
	return name
}

// intentList renders a card's intent names, comma-separated.
func intentList(c *api.Card) string {
	names := make([]string, len(c.Intents))
	for i, it := range c.Intents {
		names[i] = printable(it.Name, false)
	}
	return orDash(strings.Join(names, ","))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

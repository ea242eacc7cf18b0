package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/meshd/meshd/node/api"
)

const usagePost = `usage: meshctl post --subagent ID --summary TEXT|- [--result JSON] [--json]

Put a subagent's result in this node's own inbox, for the agent that
started the subagent: a subagent_result item at high priority, which
wakes every wait (meshctl wait, inbox --wait, wait_inbox) and is written
to the mailbox (Kind: subagent_result). It is local only: it is never
sent to any peer, and a node drops one that comes over a link.

A subagent is a worker of this agent (a process, a forked model turn); it
does not join the mesh itself. When it finishes it posts its result here,
and the agent reads it like any item (meshctl read ID marks it read).

flags:
  --subagent ID    the subagent's id or name, 1 to 128 bytes on one line
  --summary TEXT   what it found or did, 1 to 8192 bytes; "-" reads stdin
  --result JSON    its result as one JSON value; "-" reads it from stdin

examples:
  meshctl post --subagent tests-1 --summary 'go test ./... passed' --result '{"passed": 412}'
  go test ./... 2>&1 | tail -c 4000 | meshctl post --subagent tests-1 --summary -
`

// postFlags are the flags of 'meshctl post'.
type postFlags struct {
	sub     string
	summary string
	result  jsonFlag
}

func (fl *postFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.sub, "subagent", "", "")
	fs.StringVar(&fl.summary, "summary", "", "")
	fs.Var(&fl.result, "result", "")
}

func runPost(a *app, fl *postFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.sub == "" {
		return a.usageErrorf("--subagent is required: the id or name of the subagent whose result this is")
	}
	if fl.summary == "" {
		return a.usageErrorf("--summary is required: what the subagent found or did")
	}
	if fl.summary == "-" && fl.result.val == "-" {
		return a.usageErrorf("only one of --summary and --result can read stdin")
	}
	text, err := a.textArg(fl.summary)
	if err != nil {
		return err
	}
	r, err := a.jsonValue("result", &fl.result)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	it, err := a.client().PostSubagentResult(ctx, api.SubagentResult{SubagentID: fl.sub, Summary: text, Result: r})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(it)
	}
	fmt.Fprintf(a.Stdout, "posted the result of subagent %s to this node's inbox (item %s)\n", printable(fl.sub, false), printable(it.ID, false))
	return nil
}

// firstLine returns s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimRight(line, "\r")
}

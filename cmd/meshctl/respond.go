package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

const usageRespond = `usage: meshctl respond REQUEST_ID STATUS [--result JSON | --note TEXT] [--to PEER] [--attach FILE]... [--json]

Answer the request REQUEST_ID (the request_id that 'meshctl inbox' shows)
with STATUS, sent back to the peer that asked:

  accepted    taken on; a completed or failed answer should follow
  progress    work under way; --note says how far (several may be sent)
  rejected    will not be done
  completed   done; --result carries the outcome
  failed      tried, and it did not work; --result may say why

Request ids are chosen by the requesters, so two members' requests can
share one; meshd then refuses, naming both, and --to PEER picks the
requester to answer.

flags:
  --result JSON   the outcome as one JSON value; "-" reads it from stdin
  --to PEER       the requester to answer, when several sent REQUEST_ID
  --note TEXT     with progress: a short note (at most 1 KiB), sent as the result
  --attach FILE   attach FILE as a result (repeatable, at most 16); the
                  requester fetches it verified (see meshctl dm)

examples:
  meshctl respond 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10 accepted
  meshctl respond 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10 progress --note '200 of 412 tests run'
  meshctl respond 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10 completed --result '{"passed": 412, "failed": 0}'
  jq -n '{passed: 412}' | meshctl respond 0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10 completed --result -
`

// respondFlags are the flags of 'meshctl respond'.
type respondFlags struct {
	to     string
	note   string
	result jsonFlag
	attach attachFlag
}

func (fl *respondFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.to, "to", "", "")
	fs.StringVar(&fl.note, "note", "", "")
	fs.Var(&fl.result, "result", "")
	fs.Var(&fl.attach, "attach", "")
}

func runRespond(a *app, fl *respondFlags, pos []string) error {
	if err := a.nargs(pos, 2, 2); err != nil {
		return err
	}
	reqID, status := pos[0], pos[1]
	if reqID == "" {
		return a.usageErrorf("REQUEST_ID is empty")
	}
	if _, err := proto.ParseStatus(status); err != nil {
		return a.usageErrorf("STATUS: %v", err)
	}
	r, err := a.jsonValue("result", &fl.result)
	if err != nil {
		return err
	}
	if fl.note != "" {
		if status != "progress" {
			return a.usageErrorf("--note goes with STATUS progress; other answers carry --result")
		}
		if r != nil {
			return a.usageErrorf("give --note or --result, not both")
		}
		if len(fl.note) > proto.MaxProgressNote-4 {
			return a.usageErrorf("--note is longer than %d bytes", proto.MaxProgressNote-4)
		}
		if r, err = json.Marshal(fl.note); err != nil {
			return err
		}
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Respond(ctx, api.Respond{RequestID: reqID, Status: status, Result: r, To: fl.to, Attachments: fl.attach})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	dest := ""
	if s.To != "" {
		dest = " to " + printable(s.To, false)
	}
	fmt.Fprintf(a.Stdout, "sent %s response to request %s%s (envelope %s)\n", status, printable(reqID, false), dest, printable(s.ID, false))
	a.printQueued(s)
	return nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

const usageCard = `usage: meshctl card set --file FILE|-
       meshctl card show [PEER]
       meshctl card clear

A card says what this node serves: a description, the intents it answers
(each with a one-line summary and, optionally, a JSON Schema for the
request's params) and tags. meshd signs it with the node's key and
spreads it to every member; 'meshctl agents' lists who serves what.

commands:

examples:
  meshctl card set --file card.json
  meshctl card show bob --json
  meshctl agents --intent run-tests
`

const usageCardSet = `usage: meshctl card set --file FILE|- [--json]

Publish this node's card from a JSON file ("-" reads stdin):

  {
    "description": "CI runner on the build host",
    "intents": [
      {"name": "run-tests", "summary": "run go test on a branch",
       "params_schema": {"type": "object", "properties": {"branch": {"type": "string"}}}}
    ],
    "tags": ["ci", "linux"]
  }

Limits: description 1024 bytes; at most 64 intents, each named like a
request's INTENT (1 to 256 bytes) with a one-line summary of at most 256
bytes; at most 32 tags of 1 to 64 bytes; 16 KiB signed. A newer card
replaces the older one everywhere within seconds.

flags:
  --file FILE   the card, as JSON; "-" reads stdin
`

const usageCardShow = `usage: meshctl card show [PEER] [--json]

Show a member's card (PEER is a key, fingerprint or roster name), or this
node's without PEER.
`

const usageCardClear = `usage: meshctl card clear [--json]

Publish an empty card: this node serves no intent. Members drop it from
'meshctl agents'.
`

// maxCardFile bounds the card JSON read from a file or stdin.
const maxCardFile = 4 * proto.MaxCardSize

func runCard(a *app, fl *noFlags, pos []string) error {
	return runCardShow(a, fl, pos)
}

// cardSetFlags are the flags of 'meshctl card set'.
type cardSetFlags struct {
	file string
}

func (fl *cardSetFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.file, "file", "", "")
}

func runCardSet(a *app, fl *cardSetFlags, pos []string) error {
	err := a.nargs(pos, 0, 0)
	if err != nil {
		return err
	}
	if fl.file == "" {
		return a.usageErrorf("card set needs --file FILE (or --file - for stdin)")
	}
	var data []byte
	if fl.file == "-" {
		data, err = a.readStdin("card JSON", maxCardFile)
	} else {
		data, err = readCardFile(fl.file)
	}
	if err != nil {
		return err
	}
	var in api.CardInput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("card %s: %w", fl.file, err)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	c, err := a.client().SetCard(ctx, in)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(c)
	}
	fmt.Fprintf(a.Stdout, "published card version %d (%d intents)\n", c.Version, len(c.Intents))
	return nil
}

func readCardFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCardFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCardFile {
		return nil, fmt.Errorf("card %s is larger than %d bytes", path, maxCardFile)
	}
	return b, nil
}

func runCardShow(a *app, _ *noFlags, pos []string) error {
	err := a.nargs(pos, 0, 1)
	if err != nil {
		return err
	}
	peer := ""
	if len(pos) == 1 {
		if peer, err = a.peerArg(pos[0]); err != nil {
			return err
		}
	}
	ctx, cancel := a.ctx()
	defer cancel()
	c, err := a.client().CardOf(ctx, peer)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(c)
	}
	return writeCard(a.Stdout, c)
}

func runCardClear(a *app, _ *noFlags, pos []string) error {
	c, printed, err := fetch(a, pos, func(cl *api.Client, ctx context.Context) (*api.Card, error) { return cl.ClearCard(ctx) })
	if err != nil || printed {
		return err
	}
	fmt.Fprintf(a.Stdout, "cleared this node's card (version %d)\n", c.Version)
	return nil
}

// writeCard prints a card as text.
func writeCard(w io.Writer, c *api.Card) error {
	name := printable(c.Name, false)
	if name == "" {
		name = "-"
	}
	fmt.Fprintf(w, "member:      %s (%s)\n", name, printable(c.Fingerprint, false))
	fmt.Fprintf(w, "presence:    %s\n", printable(c.Presence, false))
	fmt.Fprintf(w, "version:     %d\n", c.Version)
	if c.Cleared {
		fmt.Fprintln(w, "card:        cleared (serves nothing)")
		return nil
	}
	if c.Description != "" {
		fmt.Fprintf(w, "description: %s\n", printable(c.Description, false))
	}
	if len(c.Tags) > 0 {
		tags := make([]string, len(c.Tags))
		for i, t := range c.Tags {
			tags[i] = printable(t, false)
		}
		fmt.Fprintf(w, "tags:        %s\n", strings.Join(tags, ", "))
	}
	fmt.Fprintln(w, "intents:")
	if len(c.Intents) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, it := range c.Intents {
		fmt.Fprintf(w, "  %s", printable(it.Name, false))
		if it.Summary != "" {
			fmt.Fprintf(w, ": %s", printable(it.Summary, false))
		}
		if len(it.ParamsSchema) > 0 {
			fmt.Fprint(w, " (params schema)")
		}
		fmt.Fprintln(w)
	}
	return nil
}

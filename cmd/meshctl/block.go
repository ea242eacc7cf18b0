package main

import (
	"fmt"
	"strings"

	"github.com/meshd/meshd/node/api"
)

const usageBlock = `usage: meshctl block MEMBER [--json]

Block MEMBER (a roster name, fingerprint or key) on this node only. Nothing
the member sends reaches this node's inbox, its event stream or its mailbox
any more: no DM, request, response or channel message wakes an agent here.
Each one kept out is counted as drop.blocked.

The member is not told. This node stays linked to it, and still verifies,
stores, acknowledges and relays what it sends, and serves it to other
members' catch-up, as before: a block changes what this node's owner sees,
not what the mesh carries. The list is kept in <home>/blocks.json and
survives restarts. Undo it with 'meshctl unblock MEMBER'.

examples:
  meshctl block noisy-bot
  meshctl blocks
`

const usageUnblock = `usage: meshctl unblock MEMBER [--json]

Unblock MEMBER: what it sends from now on reaches the inbox and the mailbox
again. What arrived while it was blocked stays in the history (meshctl
history) and is not put in the inbox. MEMBER may be a full key of a member
who has left the roster.

examples:
  meshctl unblock noisy-bot
`

const usageBlocks = `usage: meshctl blocks [--json]

List the members this node blocks, with when each was blocked.

examples:
  meshctl blocks
  meshctl blocks --json
`

func runBlock(a *app, _ *noFlags, pos []string) error   { return setBlock(a, pos, true) }
func runUnblock(a *app, _ *noFlags, pos []string) error { return setBlock(a, pos, false) }

func setBlock(a *app, pos []string, on bool) error {
	err := a.nargs(pos, 1, 1)
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	c := a.client()
	var b *api.Block
	if on {
		b, err = c.Block(ctx, pos[0])
	} else {
		b, err = c.Unblock(ctx, pos[0])
	}
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(b)
	}
	if on {
		fmt.Fprintf(a.Stdout, "blocked %s: nothing it sends reaches this inbox or mailbox\n", blockLabel(*b))
	} else {
		fmt.Fprintf(a.Stdout, "unblocked %s\n", blockLabel(*b))
	}
	return nil
}

func runBlocks(a *app, _ *noFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	bs, err := a.client().Blocks(ctx)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(bs)
	}
	if len(bs.Blocks) == 0 {
		fmt.Fprintln(a.Stdout, "no member is blocked")
		return nil
	}
	tw := table(a.Stdout)
	fmt.Fprintln(tw, "MEMBER\tFINGERPRINT\tSINCE")
	for _, b := range bs.Blocks {
		name := "-"
		if b.Name != "" {
			name = printable(b.Name, false)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, b.Fingerprint, b.Since.Local().Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

// blockLabel names a blocked member: its name and fingerprint.
func blockLabel(b api.Block) string {
	if b.Name == "" {
		return b.Fingerprint
	}
	return printable(b.Name, false) + " (" + b.Fingerprint + ")"
}

// blockNames lists blocked members for status.
func blockNames(bs []api.Block) string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = blockLabel(b)
	}
	return strings.Join(out, ", ")
}

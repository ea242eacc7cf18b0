package main

import (
	"flag"
	"fmt"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
)

const usageChannelSet = `usage: meshctl channel set NAME [--readers P,...] [--writers P,...] [--history on|off]
                          [--retention-hours H] [--retention-messages N] [--json]

Change channel NAME: meshd signs the next version of its policy with this
node's key, which must be an admin of the roster, and spreads it to the
mesh. Every node applies it within the gossip time: a reader removed stops
receiving, a writer added may post at once. What a flag does not name keeps
its value. A version older than the one a node holds is refused there.

A principal P is as for 'meshctl channel create'; --readers and --writers
replace the whole list. A channel with neither readers nor writers is
deleted: use 'meshctl channel delete' for that.

Where the roster's quorum is more than 1, an edit needs that many admin
signatures: --out FILE writes the version signed by this node, unapplied;
other admins add theirs with 'meshctl channel sign FILE', and
'meshctl channel publish FILE' applies and spreads it.

flags:
  --readers P,...         who may read
  --writers P,...         who may write; observers never write
  --history on|off        whether peers hand out the channel's history
  --retention-hours H     hours every node keeps the history (0: default 72)
  --retention-messages N  messages every node keeps (0: default 10000)
  --out FILE              write the signed version to FILE for co-signing; apply nothing

examples:
  meshctl channel set ops --readers role:operator,alice
  meshctl channel set deploys --writers role:member --history off
  meshctl channel set builds --retention-hours 24
  meshctl channel set ops --readers role:operator --out ops-v4.cbor
`

func runChannelSet(a *app, args []string) error {
	fs := a.flagSet()
	var readers, writers principalList
	fs.Var(&readers, "readers", "")
	fs.Var(&writers, "writers", "")
	hist := fs.String("history", "", "")
	hours := fs.Int("retention-hours", -1, "")
	msgs := fs.Int("retention-messages", -1, "")
	out := fs.String("out", "", "")
	pos, err := a.parse(fs, args)
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
	var in api.UpdateChannel
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "readers", "writers", "history", "retention-hours", "retention-messages":
			set[f.Name] = true
		}
	})
	if set["readers"] {
		in.Readers = readers
	}
	if set["writers"] {
		in.Writers = writers
	}
	if set["history"] {
		switch *hist {
		case "on", "off":
			on := *hist == "on"
			in.AllowHistoryFetch = &on
		default:
			return a.usageErrorf("--history %q: want on or off", *hist)
		}
	}
	if set["retention-hours"] {
		if *hours < 0 || *hours > channel.MaxRetentionHours {
			return a.usageErrorf("--retention-hours %d: want 0 (the default) to %d", *hours, channel.MaxRetentionHours)
		}
		in.RetentionHours = hours
	}
	if set["retention-messages"] {
		if *msgs < 0 || *msgs > channel.MaxRetentionMessages {
			return a.usageErrorf("--retention-messages %d: want 0 (the default) to %d", *msgs, channel.MaxRetentionMessages)
		}
		in.RetentionMessages = msgs
	}
	if len(set) == 0 {
		return a.usageErrorf("nothing to change: give --readers, --writers, --history, --retention-hours or --retention-messages")
	}
	if *out != "" {
		return a.draftChannel(name, api.DraftChannel{UpdateChannel: in}, *out)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ch, err := a.client().UpdateChannel(ctx, name, in)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(ch)
	}
	fmt.Fprintf(a.Stdout, "signed #%s v%d\n", printable(ch.Name, false), ch.Version)
	return writeChannel(a.Stdout, ch)
}

const usageChannelDelete = `usage: meshctl channel delete NAME [--json]

Delete channel NAME: meshd signs a tombstone, the policy version after the
current one with no readers and no writers, and spreads it to the mesh.
Every node then stops delivering the channel, drops its subscription and
refuses sends to it; the history it holds ages out by the channel's
retention. The name stays taken by the tombstone. This node must be a
roster admin. Where the roster's quorum is more than 1, --out FILE writes
the tombstone for co-signing, as for 'meshctl channel set'.

flags:
  --out FILE   write the signed tombstone to FILE for co-signing; apply nothing

examples:
  meshctl channel delete old-builds
  meshctl channel delete old-builds --out old-builds-del.cbor
`

func runChannelDelete(a *app, args []string) error {
	fs := a.flagSet()
	out := fs.String("out", "", "")
	pos, err := a.parse(fs, args)
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
	if *out != "" {
		return a.draftChannel(name, api.DraftChannel{Delete: true}, *out)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ch, err := a.client().DeleteChannel(ctx, name)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(ch)
	}
	fmt.Fprintf(a.Stdout, "deleted #%s (tombstone v%d)\n", printable(ch.Name, false), ch.Version)
	return nil
}

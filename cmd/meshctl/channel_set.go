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

// channelSetFlags are the flags of 'meshctl channel set'.
type channelSetFlags struct {
	hist             string
	hours            int
	msgs             int
	out              string
	readers, writers principalList
}

func (fl *channelSetFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.hist, "history", "", "")
	fs.IntVar(&fl.hours, "retention-hours", -1, "")
	fs.IntVar(&fl.msgs, "retention-messages", -1, "")
	fs.StringVar(&fl.out, "out", "", "")
	fs.Var(&fl.readers, "readers", "")
	fs.Var(&fl.writers, "writers", "")
}

func runChannelSet(a *app, fl *channelSetFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	name, err := a.channelArg(pos[0])
	if err != nil {
		return err
	}
	var in api.UpdateChannel
	set := map[string]bool{} // the policy's fields given
	for _, name := range []string{"readers", "writers", "history", "retention-hours", "retention-messages"} {
		if a.given[name] {
			set[name] = true
		}
	}
	if set["readers"] {
		in.Readers = fl.readers
	}
	if set["writers"] {
		in.Writers = fl.writers
	}
	if set["history"] {
		switch fl.hist {
		case "on", "off":
			on := fl.hist == "on"
			in.AllowHistoryFetch = &on
		default:
			return a.usageErrorf("--history %q: want on or off", fl.hist)
		}
	}
	if set["retention-hours"] {
		if fl.hours < 0 || fl.hours > channel.MaxRetentionHours {
			return a.usageErrorf("--retention-hours %d: want 0 (the default) to %d", fl.hours, channel.MaxRetentionHours)
		}
		in.RetentionHours = &fl.hours
	}
	if set["retention-messages"] {
		if fl.msgs < 0 || fl.msgs > channel.MaxRetentionMessages {
			return a.usageErrorf("--retention-messages %d: want 0 (the default) to %d", fl.msgs, channel.MaxRetentionMessages)
		}
		in.RetentionMessages = &fl.msgs
	}
	if len(set) == 0 {
		return a.usageErrorf("nothing to change: give --readers, --writers, --history, --retention-hours or --retention-messages")
	}
	if fl.out != "" {
		return a.draftChannel(name, api.DraftChannel{UpdateChannel: in}, fl.out)
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

// channelDeleteFlags are the flags of 'meshctl channel delete'.
type channelDeleteFlags struct {
	out string
}

func (fl *channelDeleteFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.out, "out", "", "")
}

func runChannelDelete(a *app, fl *channelDeleteFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	name, err := a.channelArg(pos[0])
	if err != nil {
		return err
	}
	if fl.out != "" {
		return a.draftChannel(name, api.DraftChannel{Delete: true}, fl.out)
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

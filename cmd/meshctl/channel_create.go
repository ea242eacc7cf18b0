package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

const usageChannelCreate = `usage: meshctl channel create NAME [--readers P,...] [--writers P,...] [--no-history]
                             [--retention-hours H] [--retention-messages N] [--json]

Create channel NAME. meshd signs its policy with this node's key, which
must be an admin of the roster, and spreads it to the mesh. This node
becomes the channel's admin.

A principal P is "role:ROLE" (every member with role ROLE or higher:
observer, member, operator, admin), a member's full key (ed25519:...), a
fingerprint, or a roster name. The flags may repeat, and each takes a
comma-separated list.

flags:
  --readers P,...   who may read (default role:observer, every member)
  --writers P,...   who may write (default role:member); observers never write
  --no-history      peers refuse to hand out the channel's history
  --retention-hours H     hours every node keeps the channel's history (default 72)
  --retention-messages N  messages every node keeps of it (default 10000); past
                          it the sender holding the most loses its oldest read
                          ones first, and unread inbox items wait to be read

examples:
  meshctl channel create deploys
  meshctl channel create ops --readers role:operator --writers alice,bob
  meshctl channel create alerts --writers role:operator --writers monitor --no-history
  meshctl channel create builds --retention-hours 24 --retention-messages 2000
`

// principalList is a --readers or --writers flag: it may repeat, and each
// value is a comma-separated list.
type principalList []string

func (p *principalList) String() string { return strings.Join(*p, ",") }

// Set checks the forms meshctl can check without the roster (role:ROLE
// and full keys) and leaves names and fingerprints for meshd to resolve.
func (p *principalList) Set(s string) error {
	n := len(*p)
	for _, x := range strings.Split(s, ",") {
		x = strings.TrimSpace(x)
		if x == "" {
			continue
		}
		if strings.HasPrefix(x, channel.RolePrefix) || strings.HasPrefix(x, proto.KeyPrefix) {
			if _, err := channel.ParsePrincipal(x, nil); err != nil {
				return err
			}
		}
		*p = append(*p, x)
	}
	if len(*p) == n {
		return fmt.Errorf("no principal in %q", s)
	}
	return nil
}

// channelCreateFlags are the flags of 'meshctl channel create'.
type channelCreateFlags struct {
	noHistory        bool
	hours            int
	msgs             int
	readers, writers principalList
}

func (fl *channelCreateFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.noHistory, "no-history", false, "")
	fs.IntVar(&fl.hours, "retention-hours", 0, "")
	fs.IntVar(&fl.msgs, "retention-messages", 0, "")
	fs.Var(&fl.readers, "readers", "")
	fs.Var(&fl.writers, "writers", "")
}

func runChannelCreate(a *app, fl *channelCreateFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	name, err := a.channelArg(pos[0])
	if err != nil {
		return err
	}
	if fl.hours < 0 || fl.hours > channel.MaxRetentionHours {
		return a.usageErrorf("--retention-hours %d: want 0 (the default) to %d", fl.hours, channel.MaxRetentionHours)
	}
	if fl.msgs < 0 || fl.msgs > channel.MaxRetentionMessages {
		return a.usageErrorf("--retention-messages %d: want 0 (the default) to %d", fl.msgs, channel.MaxRetentionMessages)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ch, err := a.client().CreateChannel(ctx, api.CreateChannel{Name: name, Readers: fl.readers, Writers: fl.writers, NoHistory: fl.noHistory,
		RetentionHours: fl.hours, RetentionMessages: fl.msgs})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(ch)
	}
	fmt.Fprintf(a.Stdout, "created #%s\n", printable(ch.Name, false))
	return writeChannel(a.Stdout, ch)
}

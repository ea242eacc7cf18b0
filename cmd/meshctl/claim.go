package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageClaim = `usage: meshctl claim ID [--lease D] [--worker NAME] [--from PEER] [--release] [--json]

Claim inbox item ID for this worker, so that no other worker of a pool
that shares this node takes it: 'meshctl inbox --claim N' and other
claims skip it until the lease ends. The claim ends when the item is read
('meshctl read ID'), when the request it is answered ('meshctl respond',
which also marks it read), with --release, or when the lease runs out:
then the item is back in the pool for the next worker.

Claiming an item that another worker holds, or that is read already,
fails (exit 1) and says who holds it until when; the same worker (the
same --worker name) claiming again renews its lease. Claims live in
meshd's memory only: a restart of meshd returns every claimed item to the
pool, as an expired lease does.

flags:
  --lease D      how long the claim holds (default 5m, at most 24h)
  --worker NAME  this worker's name (default $MESH_WORKER); an anonymous
                 claim cannot be renewed or released by name
  --from PEER    the sender of the item, when several share ID
  --release      give the claim up: the item goes back to the pool

examples:
  meshctl claim 01a1fe3d-fb49-7616-91dd-6ece3220b27e --lease 10m --worker w1
  meshctl inbox --claim 5 --worker w1 --json
  meshctl claim 01a1fe3d-fb49-7616-91dd-6ece3220b27e --release --worker w1
`

// claimFlags are the flags of 'meshctl claim'.
type claimFlags struct {
	lease   time.Duration
	worker  string
	from    string
	release bool
}

func (fl *claimFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&fl.lease, "lease", api.DefaultLease, "")
	fs.StringVar(&fl.worker, "worker", "", "")
	fs.StringVar(&fl.from, "from", "", "")
	fs.BoolVar(&fl.release, "release", false, "")
}

func runClaim(a *app, fl *claimFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if fl.lease <= 0 || fl.lease > api.MaxLease {
		return a.usageErrorf("--lease must be from 1s to %v", api.MaxLease)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	it, err := a.client().Claim(ctx, pos[0], fl.from, api.Claim{Worker: a.workerName(fl.worker), Lease: fl.lease.String(), Release: fl.release})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(it)
	}
	return writeItem(a.Stdout, it, false)
}

// workerName is --worker, or $MESH_WORKER.
func (a *app) workerName(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv("MESH_WORKER")
}

// filterFlags adds the inbox filter flags to fs.
func filterFlags(fs *flag.FlagSet, f *api.InboxFilter) {
	fs.StringVar(&f.From, "from", "", "")
	fs.StringVar(&f.Kind, "kind", "", "")
	fs.StringVar(&f.Channel, "channel", "", "")
	fs.StringVar(&f.Since, "since", "", "")
}

// checkFilter refuses a filter meshd would refuse, before asking it.
func (a *app) checkFilter(f api.InboxFilter) error {
	switch f.Kind {
	case "", "message", "request", "response", api.KindDeliveryFailed:
	default:
		return a.usageErrorf("--kind %q: want message, request, response or delivery_failed", f.Kind)
	}
	if _, err := api.ParseSince(f.Since, time.Now()); err != nil {
		return a.usageErrorf("--%v", err)
	}
	return nil
}

// claimNext is meshctl inbox --claim N.
func (a *app) claimNext(n int, lease time.Duration, worker string, wait bool, timeout time.Duration, f api.InboxFilter, listing bool) error {
	switch {
	case listing:
		return a.usageErrorf("--claim takes unread items: it does not go with --all or --limit")
	case n <= 0 || n > api.MaxClaimCount:
		return a.usageErrorf("--claim N: want 1 to %d (with --lease and --worker)", api.MaxClaimCount)
	case lease <= 0 || lease > api.MaxLease:
		return a.usageErrorf("--lease must be from 1s to %v", api.MaxLease)
	}
	q := api.ClaimNext{Count: n, Worker: worker, Lease: lease.String(), Wait: wait, InboxFilter: f}
	bound := api.DefaultTimeout
	if wait {
		q.Timeout = timeout.String()
		bound = timeout + waitSlack
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	in, err := a.client().ClaimNext(ctx, q)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		if err := a.printJSON(in); err != nil {
			return err
		}
	} else {
		for i := range in.Items {
			if err := writeItem(a.Stdout, &in.Items[i], false); err != nil {
				return err
			}
		}
		if len(in.Items) == 0 {
			fmt.Fprintln(a.Stdout, "nothing to claim")
		}
	}
	if wait && len(in.Items) == 0 {
		return exitStatus(exitTimeout)
	}
	return nil
}

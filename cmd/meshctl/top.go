package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageTop = `usage: meshctl top [--once] [--interval D] [--json]

Show the running meshd in the terminal, redrawn in place every second until
Ctrl-C: this node, its linked peers with presence and link health (network,
direction, link age, last heard), envelopes in and out per second, and
drops by reason with their rates. Rates are the change of the status
counters between two successive samples.

flags:
  --once         print one frame, without redrawing, and exit; its rates
                 are measured over one interval
  --interval D   time between samples (default 1s)
  --json         print one snapshot as JSON and exit (rates as --once)

examples:
  meshctl top
  meshctl top --once
  meshctl top --json | jq '.traffic.envelopes_in_per_sec'

exit status: 0 on Ctrl-C or after one frame, 1 on error or when meshd stops.
`

// topSnapshot is one frame of top, and what --json prints.
type topSnapshot struct {
	Time time.Time `json:"time"`
	// IntervalSeconds is the time the rates are measured over, by meshd's
	// clock; 0 when there is no earlier sample (rates are then 0).
	IntervalSeconds float64    `json:"interval_seconds"`
	Node            topNode    `json:"node"`
	Traffic         topTraffic `json:"traffic"`
	Peers           []topPeer  `json:"peers"`
	Drops           []topDrop  `json:"drops"`
}

type topNode struct {
	Name          string  `json:"name,omitempty"`
	Fingerprint   string  `json:"fingerprint"`
	Role          string  `json:"role"`
	Org           string  `json:"org"`
	RosterVersion uint64  `json:"roster_version"`
	Links         int     `json:"links"`
	UptimeSeconds float64 `json:"uptime_seconds"`
}

// topTraffic counts envelopes: in is every envelope received from a
// peer; out is every envelope handed to a peer, first sends and re-sends
// of kept ones alike; delivered is what reached the inbox.
type topTraffic struct {
	EnvelopesIn        uint64  `json:"envelopes_in"`
	EnvelopesOut       uint64  `json:"envelopes_out"`
	Delivered          uint64  `json:"delivered"`
	EnvelopesInPerSec  float64 `json:"envelopes_in_per_sec"`
	EnvelopesOutPerSec float64 `json:"envelopes_out_per_sec"`
	DeliveredPerSec    float64 `json:"delivered_per_sec"`
}

type topPeer struct {
	Name            string  `json:"name,omitempty"`
	NameAmbiguous   bool    `json:"name_ambiguous,omitempty"`
	Fingerprint     string  `json:"fingerprint"`
	Role            string  `json:"role"`
	Presence        string  `json:"presence"`
	Network         string  `json:"network"`
	Direction       string  `json:"direction"`
	Address         string  `json:"address"`
	LinkAgeSeconds  float64 `json:"link_age_seconds"`
	LastSeenSeconds float64 `json:"last_seen_seconds"` // how long ago, by meshd's clock
}

// topDrop is one drop counter: "drop.REASON" for envelopes the receive
// pipeline refused (reason REASON), and every "*.dropped.*" counter of
// frames that could not be sent (reason: the counter's name).
type topDrop struct {
	Reason string  `json:"reason"`
	Total  uint64  `json:"total"`
	PerSec float64 `json:"per_sec"`
}

// topSample is what one round of control calls read.
type topSample struct {
	status   *api.Status
	peers    *api.Peers
	presence *api.Presence
}

// topFlags are the flags of 'meshctl top'.
type topFlags struct {
	once     bool
	interval time.Duration
}

func (fl *topFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.once, "once", false, "")
	fs.DurationVar(&fl.interval, "interval", time.Second, "")
}

func runTop(a *app, fl *topFlags, pos []string) error {
	if err := a.nargs(pos, 0, 0); err != nil {
		return err
	}
	if fl.interval < 10*time.Millisecond {
		return a.usageErrorf("--interval must be at least 10ms")
	}
	ctx, stop := interruptContext()
	defer stop()
	c := a.client()

	prev, err := a.topSample(ctx, c)
	if err != nil {
		return a.topErr(ctx, err)
	}
	if fl.once || a.json {
		if !sleepCtx(ctx, fl.interval) {
			return nil
		}
		cur, err := a.topSample(ctx, c)
		if err != nil {
			return a.topErr(ctx, err)
		}
		snap := topFrame(prev, cur)
		if a.json {
			return a.printJSON(snap)
		}
		return writeTop(a.Stdout, snap)
	}

	// Live: the first frame at once (no rates yet), then one a sample.
	// Each frame goes home, draws, and clears what the last one left.
	var last *topSample
	cur := prev
	for {
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J")
		if err := writeTop(&b, topFrame(last, cur)); err != nil {
			return err
		}
		fmt.Fprintf(&b, "\n(every %s; Ctrl-C to quit)\n", fl.interval.String())
		if _, err := io.WriteString(a.Stdout, b.String()); err != nil {
			return err
		}
		if !sleepCtx(ctx, fl.interval) {
			return nil
		}
		next, err := a.topSample(ctx, c)
		if err != nil {
			return a.topErr(ctx, err)
		}
		last, cur = cur, next
	}
}

// topErr turns a failed sample into the command's error; Ctrl-C during a
// call is no error.
func (a *app) topErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return a.remoteErr(err)
}

// topSample reads status, peers and presence, each call bounded.
func (a *app) topSample(ctx context.Context, c *api.Client) (*topSample, error) {
	cctx, cancel := context.WithTimeout(ctx, api.DefaultTimeout)
	defer cancel()
	st, err := c.Status(cctx)
	if err != nil {
		return nil, err
	}
	peers, err := c.Peers(cctx)
	if err != nil {
		return nil, err
	}
	pres, err := c.Presence(cctx)
	if err != nil {
		return nil, err
	}
	return &topSample{status: st, peers: peers, presence: pres}, nil
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// topFrame computes a frame from the current sample and, for rates, the
// one before (nil for none). Rates are per second of meshd's uptime
// between the two, and left at 0 across a restart of meshd.
func topFrame(prev, cur *topSample) topSnapshot {
	st := cur.status
	out := topSnapshot{
		Time: time.Now().UTC(),
		Node: topNode{Name: st.Name, Fingerprint: st.Fingerprint, Role: st.Role, Org: st.Org,
			RosterVersion: st.RosterVersion, Links: st.Links, UptimeSeconds: st.UptimeSeconds},
		Peers: []topPeer{},
		Drops: []topDrop{},
	}
	var pc map[string]uint64
	if prev != nil && prev.status.Started.Equal(st.Started) && st.UptimeSeconds > prev.status.UptimeSeconds {
		out.IntervalSeconds = st.UptimeSeconds - prev.status.UptimeSeconds
		pc = prev.status.Counters
	}
	rate := func(now, before uint64) float64 {
		if pc == nil || now < before {
			return 0
		}
		return float64(now-before) / out.IntervalSeconds
	}
	c := st.Counters
	in, outN := c["rx.envelopes"], c["tx.envelopes"]+c["tx.forwarded"]
	out.Traffic = topTraffic{
		EnvelopesIn:        in,
		EnvelopesOut:       outN,
		Delivered:          c["inbox.items"],
		EnvelopesInPerSec:  rate(in, pc["rx.envelopes"]),
		EnvelopesOutPerSec: rate(outN, pc["tx.envelopes"]+pc["tx.forwarded"]),
		DeliveredPerSec:    rate(c["inbox.items"], pc["inbox.items"]),
	}
	for _, name := range slices.Sorted(maps.Keys(c)) {
		reason, ok := strings.CutPrefix(name, "drop.")
		if !ok && !strings.Contains(name, ".dropped.") {
			continue
		}
		if !ok {
			reason = name
		}
		out.Drops = append(out.Drops, topDrop{Reason: reason, Total: c[name], PerSec: rate(c[name], pc[name])})
	}

	presence := map[string]string{}
	if cur.presence != nil {
		for _, e := range cur.presence.Entries {
			presence[e.Key.String()] = e.State
		}
	}
	now := st.Started.Add(time.Duration(st.UptimeSeconds * float64(time.Second))) // meshd's clock at the sample
	if cur.peers != nil {
		for _, p := range cur.peers.Peers {
			pr := presence[p.Key.String()]
			if pr == "" {
				pr = "unknown"
			}
			out.Peers = append(out.Peers, topPeer{Name: p.Name, NameAmbiguous: p.NameAmbiguous, Fingerprint: p.Fingerprint, Role: p.Role,
				Presence: pr, Network: p.Network, Direction: p.Direction, Address: p.Address,
				LinkAgeSeconds: p.LinkAgeSeconds, LastSeenSeconds: max(0, now.Sub(p.LastSeen).Seconds())})
		}
	}
	return out
}

// writeTop prints one frame as text.
func writeTop(w io.Writer, s topSnapshot) error {
	name := nameCell(s.Node.Name)
	secs := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	fmt.Fprintf(w, "meshd %s (%s)  %s of %s, roster v%d  links %d  up %s  %s\n", name, s.Node.Fingerprint,
		s.Node.Role, s.Node.Org, s.Node.RosterVersion, s.Node.Links, ago(secs(s.Node.UptimeSeconds)),
		s.Time.Local().Format("15:04:05"))
	perSec := func(f float64) string {
		if s.IntervalSeconds == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f/s", f)
	}
	t := s.Traffic
	fmt.Fprintf(w, "envelopes  in %s  out %s  delivered %s   (totals: in %d, out %d, delivered %d)\n\n",
		perSec(t.EnvelopesInPerSec), perSec(t.EnvelopesOutPerSec), perSec(t.DeliveredPerSec),
		t.EnvelopesIn, t.EnvelopesOut, t.Delivered)

	if len(s.Peers) == 0 {
		fmt.Fprintln(w, "no peers linked")
	} else {
		tw := table(w)
		fmt.Fprintln(tw, "PEER\tROLE\tPRESENCE\tVIA\tDIR\tADDRESS\tLINK AGE\tLAST SEEN")
		for _, p := range s.Peers {
			pn := partyName(api.Party{Name: p.Name, Fingerprint: p.Fingerprint, NameAmbiguous: p.NameAmbiguous})
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s ago\n", pn, p.Role, p.Presence, p.Network,
				p.Direction, p.Address, ago(secs(p.LinkAgeSeconds)), ago(secs(p.LastSeenSeconds)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if len(s.Drops) == 0 {
		_, err := fmt.Fprintln(w, "no drops")
		return err
	}
	tw := table(w)
	fmt.Fprintln(tw, "DROPS BY REASON\tTOTAL\tRATE")
	for _, d := range s.Drops {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", d.Reason, d.Total, perSec(d.PerSec))
	}
	return tw.Flush()
}

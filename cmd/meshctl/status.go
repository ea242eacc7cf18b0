package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageStatus = `usage: meshctl status [ID] [--verbose] [--json]

Show the running meshd: its identity, org and roster version, listen
addresses, number of links, uptime, the mailbox's files against its
limits (and whether its mirror is paused), the members whose channel
messages were refused past their quota, and a summary of its traffic:
envelopes received and sent, drops by their most frequent reasons, and
failures. A node an admin removed from the roster says so, naming the
roster version and how often it still redials its former peers
("member": false, "removed": true and "retry_seconds" in --json). Needs a
running meshd on this home.

  --verbose   also list every counter (drops by reason, link, roster and
              mailbox events)
  --json      everything, counters included, as JSON

With ID, the id that meshctl dm, send, request or respond printed, show
what became of that message instead: for a direct message, request or
response, per recipient, queued, delivered (with the time it was
acknowledged), expired or refused (with the reason); for a channel
message, how many linked readers acknowledged it. meshctl sent lists
them all.

examples:
  meshctl status
  meshctl status --verbose
  meshctl status --json | jq .counters
  meshctl status 0193a1c2-7f4e-7cc1-9a4e-3b1f0c2d9e11
`

// statusFlags are the flags of 'meshctl status'.
type statusFlags struct {
	verbose bool
}

func (fl *statusFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.verbose, "verbose", false, "")
}

func runStatus(a *app, fl *statusFlags, pos []string) error {
	if err := a.nargs(pos, 0, 1); err != nil {
		return err
	}
	if len(pos) == 1 {
		return runDeliveryStatus(a, pos[0])
	}
	ctx, cancel := a.ctx()
	defer cancel()
	s, err := a.client().Status(ctx)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	tw := table(a.Stdout)
	name := s.Name
	if name == "" {
		name = "-"
	}
	fmt.Fprintf(tw, "node\t%s (%s)\n", name, s.Fingerprint)
	fmt.Fprintf(tw, "key\t%s\n", s.Key)
	fmt.Fprintf(tw, "org\t%s (roster v%d, %d members, role %s)\n", s.Org, s.RosterVersion, s.RosterMembers, s.Role)
	switch {
	case s.Removed:
		fmt.Fprintf(tw, "member\tno: removed from the org by roster v%d; peers refuse its links, so it redials each only every %v (meshctl doctor says how to come back)\n",
			s.RosterVersion, time.Duration(s.RetrySeconds)*time.Second)
	case !s.Member:
		fmt.Fprintf(tw, "member\tno: not in roster v%d; peers refuse its links (ask an admin to add it)\n", s.RosterVersion)
	}
	fmt.Fprintf(tw, "listen\t%s\n", strings.Join(s.Listen, " "))
	if len(s.Advertised) > 0 {
		fmt.Fprintf(tw, "advertised\t%s\n", strings.Join(s.Advertised, " "))
	}
	mdns := "off"
	if s.MDNS {
		mdns = "on"
	}
	fmt.Fprintf(tw, "mdns\t%s\n", mdns)
	if len(s.Seeds) > 0 {
		fmt.Fprintf(tw, "seeds\t%s\n", strings.Join(s.Seeds, " "))
	}
	fmt.Fprintf(tw, "links\t%d%s\n", s.Links, linksByNet(s.LinksByNet))
	if s.ClockSkewSeconds != 0 {
		fmt.Fprintf(tw, "clock\twarning: a peer's clock differs by %+.0fs (run meshctl doctor)\n", s.ClockSkewSeconds)
	}
	fmt.Fprintf(tw, "uptime\t%s\n", ago(time.Duration(s.UptimeSeconds*float64(time.Second))))
	fmt.Fprintf(tw, "home\t%s\n", s.Home)
	if mb := s.Mailbox; mb != nil {
		fmt.Fprintf(tw, "mailbox\t%s\n", mailboxLine(mb))
	}
	for i, q := range s.QuotaRefused {
		label := ""
		if i == 0 {
			label = "quota"
		}
		name := "-"
		if q.Name != "" {
			name = printable(q.Name, false)
		}
		fmt.Fprintf(tw, "%s\t%d channel messages refused from %s (%s): past channel_sender_rate or its budget\n", label, q.Refused, name, q.Fingerprint)
	}
	if len(s.Blocked) > 0 {
		fmt.Fprintf(tw, "blocked\t%s (meshctl blocks)\n", blockNames(s.Blocked))
	}
	if !fl.verbose {
		summarizeCounters(tw, s.Counters)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !fl.verbose {
		fmt.Fprintf(a.Stdout, "counters: %d (meshctl status --verbose lists them)\n", len(s.Counters))
		return nil
	}
	if len(s.Counters) > 0 {
		fmt.Fprintln(a.Stdout, "counters:")
		tw = table(a.Stdout)
		for _, k := range slices.Sorted(maps.Keys(s.Counters)) {
			fmt.Fprintf(tw, "  %s\t%d\n", k, s.Counters[k])
		}
		return tw.Flush()
	}
	return nil
}

// mailboxLine says how full the mailbox is and whether its mirror is
// paused.
func mailboxLine(mb *api.MailboxStatus) string {
	line := fmt.Sprintf("%d files, %s", mb.Files, mib(mb.Bytes))
	if mb.MaxFiles > 0 || mb.MaxBytes > 0 {
		var lim []string
		if mb.MaxFiles > 0 {
			lim = append(lim, fmt.Sprintf("%d files", mb.MaxFiles))
		}
		if mb.MaxBytes > 0 {
			lim = append(lim, mib(mb.MaxBytes))
		}
		line += " (limit " + strings.Join(lim, ", ") + ")"
	}
	if mb.FreeBytes >= 0 {
		line += fmt.Sprintf("; %s free", mib(mb.FreeBytes))
	}
	switch mb.Paused {
	case "":
	case "free_space":
		line += fmt.Sprintf("; PAUSED since %s: free space below %s (mailbox_min_free_mib); files are written once there is room",
			mb.PausedSince.Local().Format(time.DateTime), mib(mb.MinFreeBytes))
	default:
		line += fmt.Sprintf("; PAUSED since %s: the %s limit is reached (mailbox_max_%s); files are written once retention or an agent removes some",
			mb.PausedSince.Local().Format(time.DateTime), mb.Paused, map[string]string{"files": "files", "bytes": "mib"}[mb.Paused])
	}
	return line
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// linksByNet renders the links by transport, as " (tcp 1, unix 2)", or
// "" when there are none.
func linksByNet(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	nets := make([]string, 0, len(m))
	for k := range m {
		nets = append(nets, k)
	}
	slices.Sort(nets)
	parts := make([]string, len(nets))
	for i, k := range nets {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

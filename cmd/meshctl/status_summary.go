package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// summaryReasons is how many drop reasons and failures the summary of
// meshctl status names; --verbose lists every counter.
const summaryReasons = 3

// summarizeCounters writes the few lines of meshctl status that sum up
// its counters: envelopes received and sent, envelopes dropped with their
// most frequent reasons (copies of envelopes already held aside), and failures (counters named *failed or
// *disk_full), most frequent first.
func summarizeCounters(w io.Writer, c map[string]uint64) {
	fmt.Fprintf(w, "traffic\t%d envelopes received (%d were copies already held), %d sent, %d acknowledged\n",
		c["rx.envelopes"], c["drop.duplicate"], c["tx.envelopes"], c["tx.acked"])
	// Copies are the mesh's flooding at work, not a problem.
	total, drops := topCounters(c, func(k string) bool { return strings.HasPrefix(k, "drop.") && k != "drop.duplicate" })
	if total == 0 {
		fmt.Fprintf(w, "dropped\tnone\n")
	} else {
		fmt.Fprintf(w, "dropped\t%d (%s)\n", total, drops)
	}
	total, fails := topCounters(c, func(k string) bool {
		return strings.HasSuffix(k, "failed") || strings.HasSuffix(k, "_failed") || strings.HasSuffix(k, "disk_full")
	})
	if total > 0 {
		fmt.Fprintf(w, "failures\t%d (%s; the log says why)\n", total, fails)
	}
}

// topCounters sums the non-zero counters that match and names the most
// frequent, with "and N more" for the rest.
func topCounters(c map[string]uint64, match func(string) bool) (uint64, string) {
	type kv struct {
		k string
		v uint64
	}
	var list []kv
	var total uint64
	for k, v := range c {
		if v > 0 && match(k) {
			list = append(list, kv{k, v})
			total += v
		}
	}
	slices.SortFunc(list, func(a, b kv) int {
		if a.v != b.v {
			return cmp.Compare(b.v, a.v)
		}
		return strings.Compare(a.k, b.k)
	})
	var parts []string
	for i, x := range list {
		if i == summaryReasons {
			parts = append(parts, fmt.Sprintf("and %d more", len(list)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", x.k, x.v))
	}
	return total, strings.Join(parts, ", ")
}

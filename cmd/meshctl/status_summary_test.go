package main

import (
	"strings"
	"testing"
)

// TestSummarizeCounters: the summary names the most frequent drop
// reasons and failures, leaves copies out of the drops, and says how
// many more there are.
func TestSummarizeCounters(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	summarizeCounters(&b, map[string]uint64{
		"rx.envelopes": 100, "tx.envelopes": 40, "tx.acked": 30, "drop.duplicate": 50,
		"drop.quota": 9, "drop.future": 3, "drop.bad_signature": 2, "drop.expired": 1, "drop.not_member": 0,
		"mirror.disk_full": 7, "retention.failed": 1, "link.up": 4,
	})
	got := b.String()
	for _, want := range []string{
		"traffic\t100 envelopes received (50 were copies already held), 40 sent, 30 acknowledged\n",
		"dropped\t15 (drop.quota 9, drop.future 3, drop.bad_signature 2, and 1 more)\n",
		"failures\t8 (mirror.disk_full 7, retention.failed 1; the log says why)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	summarizeCounters(&b, map[string]uint64{"drop.duplicate": 5})
	if got := b.String(); !strings.Contains(got, "dropped\tnone") || strings.Contains(got, "failures") {
		t.Errorf("quiet node's summary:\n%s", got)
	}
}

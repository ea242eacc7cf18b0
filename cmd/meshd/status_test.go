package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshd/meshd/internal/testpar"
)

// TestStatusSummaryAndVerbose: meshctl status sums its counters up in a
// few lines (traffic, drops by reason) and lists them all only with
// --verbose; --json still carries every counter.
func TestStatusSummaryAndVerbose(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "solo")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "solo")
	waitStatus(t, meshctl, h, d)

	txt := meshctlOK(t, meshctl, "--home", h, "status")
	for _, want := range []string{"traffic", "envelopes received", "dropped", "none", "meshctl status --verbose lists them"} {
		if !strings.Contains(txt, want) {
			t.Fatalf("status lacks %q:\n%s", want, txt)
		}
	}
	if strings.Contains(txt, "tx.presence") {
		t.Fatalf("status lists raw counters without --verbose:\n%s", txt)
	}
	if n := strings.Count(txt, "\n"); n > 20 {
		t.Fatalf("status is %d lines, want a short summary:\n%s", n, txt)
	}

	verbose := meshctlOK(t, meshctl, "--home", h, "status", "--verbose")
	if !strings.Contains(verbose, "counters:\n") || !strings.Contains(verbose, "  tx.presence") {
		t.Fatalf("status --verbose does not list the counters:\n%s", verbose)
	}

	var raw map[string]json.RawMessage
	meshctlJSON(t, meshctl, &raw, "--home", h, "status", "--json")
	var counters map[string]uint64
	if err := json.Unmarshal(raw["counters"], &counters); err != nil || len(counters) == 0 {
		t.Fatalf("status --json counters: %v: %s", err, raw["counters"])
	}
	if counters["tx.presence"] == 0 {
		t.Fatalf("status --json lacks tx.presence: %v", counters)
	}
	if r := meshctlRun(t, meshctl, "--home", h, "status", "--loud"); r.code != 2 {
		t.Fatalf("status --loud: %+v", r)
	}
}

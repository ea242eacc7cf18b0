package promexport

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fqName pulls the family name out of a descriptor.
func fqName(f *family) string {
	m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(f.desc.String())
	if m == nil {
		return ""
	}
	return m[1]
}

func TestResolve(t *testing.T) {
	m := newMapper(allRules())
	for _, c := range []struct {
		name   string
		family string
		values []string
	}{
		{"drop.bad_signature", "meshd_envelopes_dropped_total", []string{"bad_signature"}},
		{"rx.delivered.message", "meshd_envelopes_delivered_total", []string{"message"}},
		{"rx.delivered.history-response", "meshd_envelopes_delivered_total", []string{"history-response"}},
		{"rx.presence", "meshd_envelopes_delivered_total", []string{"presence"}},
		{"tx.message", "meshd_envelopes_sent_total", []string{"message"}},
		{"tx.presence", "meshd_envelopes_sent_total", []string{"presence"}},
		{"tx.envelopes", "meshd_envelope_copies_sent_total", nil},
		{"tx.acked", "meshd_envelopes_acked_total", nil},
		{"tx.dropped.queue", "meshd_envelopes_send_dropped_total", []string{"queue"}},
		{"tx.unknown", "meshd_events_total", []string{"tx.unknown"}},
		{"link.up", "meshd_link_events_total", []string{"up"}},
		{"link.retired_key", "meshd_link_events_total", []string{"retired_key"}},
		{"drop.retired_key", "meshd_envelopes_dropped_total", []string{"retired_key"}},
		{"rekey.switched", "meshd_key_rotations_total", []string{"switched"}},
		{"link.rejected.not_member", "meshd_links_rejected_total", []string{"not_member"}},
		{"handshake.accepted", "meshd_handshakes_total", []string{"accepted"}},
		{"handshake.rejected.not_member", "meshd_handshakes_rejected_total", []string{"not_member"}},
		{"mirror.files", "meshd_mirror_files_written_total", nil},
		{"mirror.disk_full", "meshd_mirror_failures_total", []string{"disk_full"}},
		{"roster.accepted", "meshd_roster_updates_accepted_total", nil},
		{"policy.rejected.not_admin", "meshd_policy_updates_rejected_total", []string{"not_admin"}},
		{"history.served", "meshd_history_requests_served_total", nil},
		{"history.served.envelopes", "meshd_history_served_envelopes_total", nil},
		{"history.refused.status_9", "meshd_history_requests_refused_total", []string{"status_9"}},
		{"sync.rounds", "meshd_sync_rounds_total", nil},
		{"send.dropped.peers", "meshd_frames_send_dropped_total", []string{"peers"}},
		{"drop.", "meshd_events_total", []string{"drop."}},
		{"drop.a.b", "meshd_events_total", []string{"drop.a.b"}},
		{"", "meshd_events_total", []string{""}},
		{"weird", "meshd_events_total", []string{"weird"}},
	} {
		f, values := m.resolve(c.name)
		if got := fqName(f); got != c.family || !slices.Equal(values, c.values) {
			t.Errorf("resolve(%q) = %s %q, want %s %q", c.name, got, values, c.family, c.values)
		}
		if len(values) != len(f.labels) {
			t.Errorf("resolve(%q): %d label values for %d labels", c.name, len(values), len(f.labels))
		}
	}
}

// Every rule fits its family's labels: an exact row fixes them all, a
// prefix row all but the last.
func TestRulesFitFamilies(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range allRules() {
		if seen[r.name] {
			t.Errorf("rule %q listed twice", r.name)
		}
		seen[r.name] = true
		want := len(r.fam.labels)
		if strings.HasSuffix(r.name, ".") {
			want--
		}
		if len(r.values) != want {
			t.Errorf("rule %q: %d fixed label values, family %s has %d labels", r.name, len(r.values), fqName(r.fam), len(r.fam.labels))
		}
	}
	names := map[string]bool{}
	for _, f := range allFamilies() {
		n := fqName(f)
		if names[n] {
			t.Errorf("family %s defined twice", n)
		}
		names[n] = true
	}
}

// The package doc's table lists every rule with its family, and every
// counter the node defines: by its own row, or by a prefix row of its
// family ("drop.<reason>") whose last label value is the rest.
func TestDocTableListsEveryRule(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := docRows(t)
	for _, r := range allRules() {
		found := false
		for _, row := range rows {
			name, isPrefix := row[0], strings.Contains(row[0], "<")
			if isPrefix {
				name, _, _ = strings.Cut(name, "<")
			}
			if row[1] != fqName(r.fam) {
				continue
			}
			if name == r.name || isPrefix && coveredByPrefix(r, name) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("doc.go has no row %q -> %s", r.name, fqName(r.fam))
		}
	}
	for _, f := range gaugeFamilies {
		if !strings.Contains(string(b), "//\t"+fqName(f)+" ") {
			t.Errorf("doc.go does not list gauge %s", fqName(f))
		}
	}
}

// docRows returns the rows of the package doc's tables, split on blanks.
func docRows(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//")); len(f) >= 2 {
			rows = append(rows, f)
		}
	}
	return rows
}

// Every family the node defines is in the doc table.
func TestDocTableListsNodeFamilies(t *testing.T) {
	if len(nodeFamilies) == 0 {
		t.Fatal("the node defines no counter family")
	}
	rows := docRows(t)
	for name := range nodeFamilies {
		if !slices.ContainsFunc(rows, func(row []string) bool { return row[1] == name }) {
			t.Errorf("doc.go lists no row of family %s", name)
		}
	}
}

// coveredByPrefix says whether a doc row "<prefix><...>" covers the
// defined counter r: its name is the prefix and a dot-free rest, which is
// its last label value (or, in meshd_events_total, the name is).
func coveredByPrefix(r rule, prefix string) bool {
	rest, ok := strings.CutPrefix(r.name, prefix)
	if !ok || rest == "" || strings.Contains(rest, ".") || len(r.values) == 0 {
		return false
	}
	last := r.values[len(r.values)-1]
	return last == rest || last == r.name
}

package channel

import (
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

func TestCheckName(t *testing.T) {
	max := strings.Repeat("a", MaxNameLen)
	for _, ok := range []string{"a", "0", "general", "team-a", "ops.prod", "a_b", "9lives", "a-", "a..b", max} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "#general", "General", "-a", ".a", "_a", "a b", "a/b", "a\n", "é", "ａ",
		max + "a", "a\x00", "\u212aeys"} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) accepted", bad)
		} else {
			wantErr(t, err, ErrBadName)
		}
	}
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"general":      "general",
		"#general":     "general",
		"  #Ops.Prod ": "ops.prod",
		"TEAM-A":       "team-a",
	} {
		got, err := NormalizeName(in)
		if err != nil || got != want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// Only one '#' is stripped, and no non-ASCII character folds into a
	// valid name (U+212A KELVIN SIGN lowercases to 'k' in Unicode).
	for _, bad := range []string{"", "#", "##general", "\u212aeys", "İ", "# general", "a b"} {
		if got, err := NormalizeName(bad); err == nil {
			t.Errorf("NormalizeName(%q) = %q, want an error", bad, got)
		}
	}
}

func TestPrincipalText(t *testing.T) {
	r := testRoster(t)
	// Add two members whose names collide with the text forms' prefixes.
	r2 := r.Next()
	if err := r2.SetName(pub(dave), "role:admin"); err != nil {
		t.Fatal(err)
	}
	if err := r2.Sign(alice); err != nil {
		t.Fatal(err)
	}
	fp := pub(bob).Fingerprint()
	for _, tc := range []struct {
		in   string
		r    *roster.Roster
		want Principal
	}{
		{"role:observer", nil, RolePrincipal(roster.RoleObserver)},
		{"role:member", nil, RolePrincipal(roster.RoleMember)},
		{"role:operator", nil, RolePrincipal(roster.RoleOperator)},
		{"role:admin", r2, RolePrincipal(roster.RoleAdmin)}, // the role, never the member named so
		{pub(eve).String(), nil, KeyPrincipal(pub(eve))},    // keys need no roster, nor membership
		{pub(bob).String(), r, KeyPrincipal(pub(bob))},
		{fp, r, KeyPrincipal(pub(bob))},
		{strings.ToUpper(fp[:8]), r, KeyPrincipal(pub(bob))},
		{pub(bob).NodeID().String(), r, KeyPrincipal(pub(bob))},
		{"carol", r, KeyPrincipal(pub(carol))},
		{"@carol", r, KeyPrincipal(pub(carol))},
	} {
		got, err := ParsePrincipal(tc.in, tc.r)
		if err != nil || got != tc.want {
			t.Errorf("ParsePrincipal(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		r    *roster.Roster
		want error
	}{
		{"role:root", r, roster.ErrUnknownRole},
		{"role:", r, roster.ErrUnknownRole},
		{"role:Member", r, roster.ErrUnknownRole},
		{"ed25519:xyz", r, proto.ErrBadKey},
		{"ed25519:" + strings.Repeat("A", 43), r, proto.ErrBadKey}, // the zero key
		{"nobody", r, roster.ErrNotMember},
		{"carol", nil, nil},
		{"", r, roster.ErrNotMember},
	} {
		_, err := ParsePrincipal(tc.in, tc.r)
		if err == nil {
			t.Errorf("ParsePrincipal(%q) accepted", tc.in)
			continue
		}
		if tc.want != nil {
			wantErr(t, err, tc.want)
		}
	}

	// An ambiguous query lists every match and picks none. Rosters built
	// with Add keep names unique, so make two members share one directly.
	amb := r.Next()
	for i := range amb.Members {
		if k := amb.Members[i].Key; k == pub(bob) || k == pub(carol) {
			amb.Members[i].Name = "twin"
		}
	}
	_, err := ParsePrincipal("twin", amb)
	wantErr(t, err, roster.ErrAmbiguous)
	for _, k := range []proto.PubKey{pub(bob), pub(carol)} {
		if !strings.Contains(err.Error(), k.Fingerprint()) {
			t.Fatalf("ambiguity error %q does not list %s", err, k.Fingerprint())
		}
	}

	// Round trip of the text forms, and JSON-style text marshalling.
	for _, p := range []Principal{RolePrincipal(roster.RoleObserver), RolePrincipal(roster.RoleAdmin), KeyPrincipal(pub(bob))} {
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q Principal
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Fatalf("text round trip of %v: %v, %v", p, q, err)
		}
		if string(b) != p.String() {
			t.Fatalf("MarshalText %q, String %q", b, p)
		}
	}
	if _, err := (Principal{}).MarshalText(); err == nil {
		t.Fatal("empty principal marshalled")
	}
	if got := KeyPrincipal(pub(bob)).Label(r); got != "bob ("+fp+")" {
		t.Fatalf("label %q", got)
	}
}

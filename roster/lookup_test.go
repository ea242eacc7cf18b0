package roster

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

func TestLookup(t *testing.T) {
	_, v2, _, _ := fixture(t)
	fp := func(k proto.PubKey) string { return k.Fingerprint() }
	for _, tc := range []struct {
		query string
		want  []proto.PubKey
		err   error
	}{
		{pub(bob).String(), []proto.PubKey{pub(bob)}, nil},
		{fp(pub(carol)), []proto.PubKey{pub(carol)}, nil},
		{strings.ToUpper(fp(pub(carol))), []proto.PubKey{pub(carol)}, nil},
		{fp(pub(dave))[:8], []proto.PubKey{pub(dave)}, nil},
		{pub(alice).NodeID().String(), []proto.PubKey{pub(alice)}, nil},
		{"alice", []proto.PubKey{pub(alice)}, nil},
		{"bob", []proto.PubKey{pub(bob)}, nil},
		{fp(pub(dave))[:7], nil, ErrNotMember},     // too short for a prefix
		{"Alice", []proto.PubKey{pub(alice)}, nil}, // no exact name: case is ignored
		{"BOB", []proto.PubKey{pub(bob)}, nil},
		{"", nil, ErrNotMember},
		{pub(eve).String(), nil, ErrNotMember},
		{fp(pub(eve)), nil, ErrNotMember},
		{"ed25519:nonsense", nil, proto.ErrBadKey},
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, err := v2.Lookup(tc.query)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Lookup error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("Lookup = %v, %v", got, err)
			}
			for i := range got {
				if !got[i].Key.Equal(tc.want[i]) {
					t.Fatalf("Lookup = %v", got)
				}
			}
		})
	}
}

func TestLookupAmbiguous(t *testing.T) {
	// Names need not be unique in a received roster, and a name may look
	// like another member's fingerprint.
	r := &Roster{Org: "acme", Version: 1, Members: []Member{
		{Key: pub(bob), Role: RoleMember, Name: "sam"},
		{Key: pub(alice), Role: RoleAdmin, Name: "sam"},
		{Key: pub(carol), Role: RoleMember, Name: pub(alice).Fingerprint()},
	}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"sam", pub(alice).Fingerprint()} {
		got, err := r.Lookup(q)
		var amb *AmbiguousError
		if !errors.Is(err, ErrAmbiguous) || !errors.As(err, &amb) || len(got) != 2 || len(amb.Matches) != 2 {
			t.Fatalf("Lookup(%q) = %v, %v", q, got, err)
		}
		if !strings.Contains(err.Error(), "matches 2 members") || !strings.Contains(err.Error(), pub(alice).Fingerprint()) {
			t.Errorf("message %q", err)
		}
	}
}

// TestLookupCaseExactFirst: an exact name wins over names that differ
// only in case; without an exact one, every case-insensitive match is
// ambiguous.
func TestLookupCaseExactFirst(t *testing.T) {
	r := &Roster{Org: "acme", Version: 1, Members: []Member{
		{Key: pub(bob), Role: RoleMember, Name: "Sam"},
		{Key: pub(alice), Role: RoleAdmin, Name: "sam"},
	}}
	if got, err := r.Lookup("sam"); err != nil || len(got) != 1 || !got[0].Key.Equal(pub(alice)) {
		t.Fatalf("exact name: %v, %v", got, err)
	}
	if _, err := r.Lookup("SAM"); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("two names in other case: %v, want ErrAmbiguous", err)
	}
}

package channel

import (
	"bytes"
	"crypto/ed25519"
	"slices"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

func TestACL(t *testing.T) {
	r := testRoster(t)
	everyone := map[string]ed25519.PrivateKey{
		"alice(admin)": alice, "carol(admin)": carol, "frank(operator)": frank,
		"bob(member)": bob, "dave(observer)": dave, "eve(non-member)": eve,
	}
	role := func(x roster.Role) Principal { return RolePrincipal(x) }
	key := func(k ed25519.PrivateKey) Principal { return KeyPrincipal(pub(k)) }
	type keys = []ed25519.PrivateKey
	for _, tc := range []struct {
		name   string
		acl    []Principal
		read   keys // who may read with acl as readers
		writes keys // who may write with acl as writers
	}{
		{"role:observer", []Principal{role(roster.RoleObserver)},
			keys{alice, carol, frank, bob, dave}, keys{alice, carol, frank, bob}},
		{"role:member", []Principal{role(roster.RoleMember)},
			keys{alice, carol, frank, bob}, keys{alice, carol, frank, bob}},
		{"role:operator", []Principal{role(roster.RoleOperator)},
			keys{alice, carol, frank}, keys{alice, carol, frank}},
		{"role:admin", []Principal{role(roster.RoleAdmin)},
			keys{alice, carol}, keys{alice, carol}},
		{"empty", nil, nil, nil},
		{"key of a member", []Principal{key(bob)}, keys{bob}, keys{bob}},
		{"key of an observer", []Principal{key(dave)}, keys{dave}, nil},
		{"key of an operator", []Principal{key(frank)}, keys{frank}, keys{frank}},
		{"key of a non-member", []Principal{key(eve)}, nil, nil},
		{"keys and a role", []Principal{key(bob), key(dave), role(roster.RoleAdmin)},
			keys{alice, carol, bob, dave}, keys{alice, carol, bob}},
		{"observer by key and by role", []Principal{key(dave), role(roster.RoleObserver)},
			keys{alice, carol, frank, bob, dave}, keys{alice, carol, frank, bob}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPolicy(idGeneral, "general")
			p.ReadACL, p.WriteACL = tc.acl, tc.acl
			for who, k := range everyone {
				if got, want := p.CanRead(r, pub(k)), contains(tc.read, k); got != want {
					t.Errorf("CanRead(%s) = %v, want %v", who, got, want)
				}
				if got, want := p.CanWrite(r, pub(k)), contains(tc.writes, k); got != want {
					t.Errorf("CanWrite(%s) = %v, want %v", who, got, want)
				}
			}
			if got, want := p.Readers(r), sortedKeys(tc.read); !slices.Equal(got, want) {
				t.Errorf("Readers = %v, want %v", fps(got), fps(want))
			}
			if got, want := p.Writers(r), sortedKeys(tc.writes); !slices.Equal(got, want) {
				t.Errorf("Writers = %v, want %v", fps(got), fps(want))
			}
		})
	}
}

// TestACLFollowsRoster: access is decided by the roster at the time of
// the check, not when the policy was made.
func TestACLFollowsRoster(t *testing.T) {
	r := testRoster(t)
	p := testPolicy(idGeneral, "general")
	p.ReadACL = []Principal{KeyPrincipal(pub(bob)), RolePrincipal(roster.RoleOperator)}
	p.WriteACL = []Principal{KeyPrincipal(pub(bob)), RolePrincipal(roster.RoleOperator)}
	if !p.CanWrite(r, pub(bob)) || !p.CanRead(r, pub(frank)) {
		t.Fatal("baseline")
	}
	r2 := r.Next()
	if err := r2.SetRole(pub(bob), roster.RoleObserver); err != nil { // listed by key, now an observer
		t.Fatal(err)
	}
	if err := r2.SetRole(pub(frank), roster.RoleMember); err != nil { // below the role principal now
		t.Fatal(err)
	}
	if err := r2.Remove(pub(dave)); err != nil {
		t.Fatal(err)
	}
	if p.CanWrite(r2, pub(bob)) || !p.CanRead(r2, pub(bob)) {
		t.Fatal("a demoted observer listed by key must read but not write")
	}
	if p.CanRead(r2, pub(frank)) || p.CanWrite(r2, pub(frank)) {
		t.Fatal("a demoted operator kept role access")
	}
	p.ReadACL = append(p.ReadACL, KeyPrincipal(pub(dave)))
	if p.CanRead(r2, pub(dave)) {
		t.Fatal("a removed member kept access")
	}
}

func TestPrincipalOrder(t *testing.T) {
	// The canonical encodings: {0: bstr(32) key} and {1: role}.
	k := pub(bob)
	if got, want := KeyPrincipal(k).encoded(), cat([]byte{0xa1, 0x00, 0x58, 0x20}, k[:]); !bytes.Equal(got, want) {
		t.Fatalf("key principal %x, want %x", got, want)
	}
	if got, want := RolePrincipal(roster.RoleOperator).encoded(), []byte{0xa1, 0x01, 0x03}; !bytes.Equal(got, want) {
		t.Fatalf("role principal %x, want %x", got, want)
	}
	in := []Principal{
		RolePrincipal(roster.RoleAdmin), KeyPrincipal(pub(carol)), RolePrincipal(roster.RoleObserver),
		KeyPrincipal(pub(bob)), RolePrincipal(roster.RoleAdmin), KeyPrincipal(pub(alice)),
	}
	got, err := SortPrincipals(in)
	if err != nil {
		t.Fatal(err)
	}
	// bob < alice < carol bytewise; keys before roles; roles ascending.
	want := []Principal{
		KeyPrincipal(pub(bob)), KeyPrincipal(pub(alice)), KeyPrincipal(pub(carol)),
		RolePrincipal(roster.RoleObserver), RolePrincipal(roster.RoleAdmin),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sorted %v\nwant %v", got, want)
	}
	if in[0] != RolePrincipal(roster.RoleAdmin) {
		t.Fatal("SortPrincipals modified its input")
	}
	if _, err := SortPrincipals([]Principal{{}}); err == nil {
		t.Fatal("empty principal sorted")
	}
}

func contains(ks []ed25519.PrivateKey, k ed25519.PrivateKey) bool {
	return slices.ContainsFunc(ks, func(x ed25519.PrivateKey) bool { return x.Equal(k) })
}

func sortedKeys(ks []ed25519.PrivateKey) []proto.PubKey {
	var out []proto.PubKey
	for _, k := range ks {
		out = append(out, pub(k))
	}
	slices.SortFunc(out, func(a, b proto.PubKey) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func fps(ks []proto.PubKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Fingerprint()
	}
	return out
}

// TestACLFollowsRotatedKey: a policy that lists a member by key admits
// the member's new key while the roster keeps the listed key as its
// previous one, and the old key itself only inside its window.
func TestACLFollowsRotatedKey(t *testing.T) {
	r := testRoster(t).Next()
	if err := r.Rekey(pub(bob), pub(eve), time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	p := testPolicy(idGeneral, "general")
	p.ReadACL = []Principal{KeyPrincipal(pub(bob))}
	p.WriteACL = []Principal{KeyPrincipal(pub(bob))}
	for _, k := range []proto.PubKey{pub(eve), pub(bob)} {
		if !p.CanRead(r, k) || !p.CanWrite(r, k) {
			t.Fatalf("%s: the rotated member lost access", k.Fingerprint())
		}
	}
	if got := p.Readers(r); !slices.Equal(got, []proto.PubKey{pub(eve)}) {
		t.Fatalf("Readers = %v, want the new key", fps(got))
	}
	expired := testRoster(t).Next()
	if err := expired.Rekey(pub(bob), pub(eve), time.Now().Add(-time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if p.CanRead(expired, pub(bob)) {
		t.Fatal("the old key kept access after its window")
	}
	if !p.CanRead(expired, pub(eve)) {
		t.Fatal("the new key lost access while the roster still names the old one")
	}
	revoked := testRoster(t).Next()
	if err := revoked.Rekey(pub(bob), pub(eve), 0); err != nil {
		t.Fatal(err)
	}
	if p.CanRead(revoked, pub(eve)) || p.CanRead(revoked, pub(bob)) {
		t.Fatal("a policy naming a revoked key admits someone")
	}
}

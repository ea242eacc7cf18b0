package roster

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

func TestNew(t *testing.T) {
	before := time.Now().UnixMilli()
	r, err := New("acme", alice, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if r.Org != "acme" || r.Version != 1 || r.Timestamp < before || r.Quorum() != 1 || len(r.Members) != 1 {
		t.Fatalf("New = %+v", r)
	}
	if m := r.Members[0]; !m.Key.Equal(pub(alice)) || m.Role != RoleAdmin || m.Name != "alice" {
		t.Fatalf("member %+v", m)
	}
	if err := CheckBootstrap(reparse(t, r)); err != nil {
		t.Fatal(err)
	}
	for _, org := range []string{"", string(make([]byte, MaxOrgLen+1)), "a\tb"} {
		if _, err := New(org, alice, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%q): %v, want ErrInvalid", org, err)
		}
	}
	if _, err := New("acme", alice[:32], ""); err == nil {
		t.Error("New accepted a 32-byte private key")
	}
}

func TestNextAndSign(t *testing.T) {
	_, v2, v3, _ := fixture(t)
	n := v3.Next()
	if n.Version != v3.Version+1 || n.Doc != nil || n.Org != v3.Org || n.Threshold != v3.Threshold {
		t.Fatalf("Next = %+v", n)
	}
	// Next copies the members: editing the copy leaves v3 alone.
	if err := n.SetRole(pub(bob), RoleOperator); err != nil {
		t.Fatal(err)
	}
	if r, _ := v3.Role(pub(bob)); r != RoleMember {
		t.Fatal("Next shares members with its source")
	}

	// A second signature leaves the body bytes and the first signature alone.
	mustSign(t, n, alice)
	body := bytes.Clone(n.Doc.Body)
	first := n.Doc.Sigs[0]
	mustSign(t, n, carol)
	if !bytes.Equal(n.Doc.Body, body) || len(n.Doc.Sigs) != 2 {
		t.Fatalf("second signature changed the body or was not added: %d sigs", len(n.Doc.Sigs))
	}
	// Signing again with the same key replaces, not duplicates.
	mustSign(t, n, alice)
	if len(n.Doc.Sigs) != 2 {
		t.Fatalf("%d signatures after re-signing", len(n.Doc.Sigs))
	}
	p := reparse(t, n)
	if err := CheckUpdate(v3, p); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range p.Doc.Sigs {
		found = found || s == first
	}
	if !found {
		t.Fatal("first signature lost")
	}

	// Sign on a parsed roster (the roster sign command) keeps the exact bytes.
	wire := mustEncode(t, v2)
	got, err := Parse(wire)
	if err != nil {
		t.Fatal(err)
	}
	mustSign(t, got, carol)
	if !bytes.Equal(got.Doc.Body, v2.Doc.Body) || len(got.Doc.Sigs) != 2 {
		t.Fatal("signing a parsed roster changed its body")
	}

	// Editing after signing re-encodes and drops the stale signatures.
	if err := n.SetQuorum(1); err != nil {
		t.Fatal(err)
	}
	mustSign(t, n, bob)
	if bytes.Equal(n.Doc.Body, body) || len(n.Doc.Sigs) != 1 || !n.Doc.Sigs[0].Signer.Equal(pub(bob)) {
		t.Fatalf("stale signatures kept after an edit: %+v", n.Doc.Sigs)
	}
	if got := n.Signers(); len(got) != 1 || !got[0].Equal(pub(bob)) {
		t.Fatalf("Signers = %v", got)
	}
}

func TestEdits(t *testing.T) {
	_, v2, v3, _ := fixture(t)

	r := v2.Next()
	if err := r.Add(Member{Key: pub(eve), Role: RoleOperator, Name: "eve", Archive: true}); err != nil {
		t.Fatal(err)
	}
	if m, ok := r.Member(pub(eve)); !ok || m.Role != RoleOperator || !m.Archive || m.Name != "eve" {
		t.Fatalf("Member(eve) = %+v, %v", m, ok)
	}
	if err := r.Sign(alice); err != nil { // validates sort order among others
		t.Fatal(err)
	}
	if err := r.Remove(pub(dave)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Member(pub(dave)); ok {
		t.Fatal("dave still a member")
	}
	if err := r.SetName(pub(bob), "robert"); err != nil {
		t.Fatal(err)
	}
	if err := CheckUpdate(v2, reparse(t, mustSign(t, r, alice))); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		base *Roster
		edit func(*Roster) error
		want error
	}{
		{"add existing key", v2, func(r *Roster) error { return r.Add(Member{Key: pub(bob), Role: RoleAdmin}) }, ErrDuplicateMember},
		{"add taken name", v2, func(r *Roster) error { return r.Add(Member{Key: pub(eve), Role: RoleMember, Name: "bob"}) }, ErrDuplicateName},
		{"add zero key", v2, func(r *Roster) error { return r.Add(Member{Role: RoleMember}) }, nil},
		{"add role 0", v2, func(r *Roster) error { return r.Add(Member{Key: pub(eve)}) }, ErrUnknownRole},
		{"add bad name", v2, func(r *Roster) error { return r.Add(Member{Key: pub(eve), Role: RoleMember, Name: "a\nb"}) }, nil},
		{"remove non-member", v2, func(r *Roster) error { return r.Remove(pub(eve)) }, ErrNotMember},
		{"remove last admin", v2, func(r *Roster) error { return r.Remove(pub(alice)) }, ErrLastAdmin},
		{"demote last admin", v2, func(r *Roster) error { return r.SetRole(pub(alice), RoleMember) }, ErrLastAdmin},
		{"remove admin the quorum needs", v3, func(r *Roster) error { return r.Remove(pub(carol)) }, ErrQuorum},
		{"demote admin the quorum needs", v3, func(r *Roster) error { return r.SetRole(pub(carol), RoleOperator) }, ErrQuorum},
		{"set role of non-member", v2, func(r *Roster) error { return r.SetRole(pub(eve), RoleMember) }, ErrNotMember},
		{"set invalid role", v2, func(r *Roster) error { return r.SetRole(pub(bob), 7) }, ErrUnknownRole},
		{"quorum above admins", v2, func(r *Roster) error { return r.SetQuorum(2) }, ErrQuorum},
		{"negative quorum", v2, func(r *Roster) error { return r.SetQuorum(-1) }, nil},
		{"rename to taken name", v2, func(r *Roster) error { return r.SetName(pub(bob), "alice") }, ErrDuplicateName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.base.Next()
			before := len(r.Members)
			err := tc.edit(r)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if len(r.Members) != before {
				t.Fatal("failed edit changed the members")
			}
		})
	}

	// Quorum 1 is stored as 0, the form the wire omits.
	r = v3.Next()
	if err := r.SetQuorum(1); err != nil || r.Threshold != 0 || r.Quorum() != 1 {
		t.Fatalf("SetQuorum(1): %v, threshold %d", err, r.Threshold)
	}
	// Demoting an admin is fine while enough remain.
	if err := r.SetRole(pub(carol), RoleMember); err != nil {
		t.Fatal(err)
	}
	if got := r.Admins(); len(got) != 1 || !got[0].Equal(pub(alice)) {
		t.Fatalf("Admins = %v", got)
	}
}

func TestAddTooMany(t *testing.T) {
	// Keys 01 xx xx ... sort before alice's (8a ...), so appending keeps order.
	r := &Roster{Org: "big", Version: 1}
	for i := 1; i < MaxMembers; i++ {
		var k proto.PubKey
		k[0], k[1], k[2] = 0x01, byte(i>>8), byte(i)
		r.Members = append(r.Members, Member{Key: k, Role: RoleObserver})
	}
	r.Members = append(r.Members, Member{Key: pub(alice), Role: RoleAdmin})
	if err := r.Add(Member{Key: pub(eve), Role: RoleMember}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Add beyond MaxMembers: %v", err)
	}
	if err := r.Sign(alice); err != nil {
		t.Fatalf("a roster of exactly MaxMembers: %v", err)
	}
	if _, err := Parse(mustEncode(t, r)); err != nil {
		t.Fatalf("Parse of MaxMembers: %v", err)
	}
	r.Members = append(r.Members, Member{Key: proto.PubKey{0xff}, Role: RoleMember})
	if err := r.Sign(alice); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Sign of MaxMembers+1: %v", err)
	}
}

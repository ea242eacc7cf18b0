package roster

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// setNow makes the roster clock read t for the rest of the test.
func setNow(t *testing.T, at time.Time) {
	t.Helper()
	old := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = old })
}

// rekeyed returns an alice-signed roster with alice (admin) and bob, bob
// moved to frank's key with his old key valid until until.
func rekeyed(t *testing.T, until int64) *Roster {
	t.Helper()
	r := &Roster{Org: "acme", Version: 1, Timestamp: t0, Members: []Member{
		{Key: pub(bob), Role: RoleOperator, Name: "bob", Archive: true},
		{Key: pub(alice), Role: RoleAdmin, Name: "alice"},
	}}
	if err := r.Rekey(pub(bob), pub(frank), until); err != nil {
		t.Fatal(err)
	}
	return mustSign(t, r, alice)
}

func TestRekeyKeepsNameRoleArchive(t *testing.T) {
	until := t0 + 3_600_000
	r := rekeyed(t, until)
	m, ok := r.Member(pub(frank))
	if !ok || m.Name != "bob" || m.Role != RoleOperator || !m.Archive || m.PrevKey != pub(bob) || m.PrevUntil != until {
		t.Fatalf("Member(new) = %+v, %v", m, ok)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(mustEncode(t, r))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, _ := parsed.Known(pub(bob)); got.Key != pub(frank) {
		t.Fatalf("Known(old) = %+v", got)
	}
	if ms, err := parsed.Lookup("bob"); err != nil || ms[0].Key != pub(frank) {
		t.Fatalf("Lookup(bob) = %v, %v", ms, err)
	}
}

func TestPrevKeyWindow(t *testing.T) {
	until := t0 + 3_600_000
	r := rekeyed(t, until)
	deadline := time.UnixMilli(until).Add(PrevKeySkew)
	for _, tc := range []struct {
		name string
		at   time.Time
		want bool
	}{
		{"inside", time.UnixMilli(t0), true},
		{"at prev_until, within the skew", time.UnixMilli(until), true},
		{"just before the deadline", deadline.Add(-time.Millisecond), true},
		{"at the deadline", deadline, false},
		{"a day later", deadline.Add(24 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setNow(t, tc.at)
			m, ok := r.Member(pub(bob))
			if ok != tc.want {
				t.Fatalf("Member(old key) ok = %v, want %v", ok, tc.want)
			}
			if ok && (m.Key != pub(frank) || m.Role != RoleOperator) {
				t.Fatalf("Member(old key) = %+v", m)
			}
			if role, ok := r.Role(pub(bob)); ok != tc.want || (ok && role != RoleOperator) {
				t.Fatalf("Role(old key) = %v, %v", role, ok)
			}
			// The new key is a member throughout; the old one is always
			// known for names, never an admin.
			if _, ok := r.Member(pub(frank)); !ok {
				t.Fatal("new key not a member")
			}
			if _, ok := r.Previous(pub(bob)); !ok {
				t.Fatal("Previous(old key) not found")
			}
			if got := r.Label(pub(bob)); got != "bob ("+pub(bob).Fingerprint()+")" {
				t.Fatalf("Label(old key) = %q", got)
			}
		})
	}
	if d, ok := r.NextPrevDeadline(time.UnixMilli(t0)); !ok || !d.Equal(deadline) {
		t.Fatalf("NextPrevDeadline = %v, %v; want %v", d, ok, deadline)
	}
	if _, ok := r.NextPrevDeadline(deadline); ok {
		t.Fatal("NextPrevDeadline after the deadline reports one")
	}
}

func TestPrevKeyOfAdminSignsNothing(t *testing.T) {
	setNow(t, time.UnixMilli(t0))
	cur := &Roster{Org: "acme", Version: 1, Timestamp: t0, Members: []Member{
		{Key: pub(alice), Role: RoleAdmin, Name: "alice"},
	}}
	if err := cur.Rekey(pub(alice), pub(frank), t0+3_600_000); err != nil {
		t.Fatal(err)
	}
	mustSign(t, cur, frank)
	if !cur.IsAdmin(pub(frank)) || cur.IsAdmin(pub(alice)) {
		t.Fatalf("IsAdmin(new, old) = %v, %v", cur.IsAdmin(pub(frank)), cur.IsAdmin(pub(alice)))
	}
	if _, ok := cur.Member(pub(alice)); !ok {
		t.Fatal("old key is not a member in its window")
	}
	next := cur.Next()
	mustSign(t, next, alice)
	if err := CheckUpdate(cur, next); !errors.Is(err, ErrUnknownSigner) {
		t.Fatalf("update signed by the old admin key: %v, want ErrUnknownSigner", err)
	}
	next = cur.Next()
	mustSign(t, next, frank)
	if err := CheckUpdate(cur, next); err != nil {
		t.Fatalf("update signed by the new admin key: %v", err)
	}
}

func TestRekeyGraceZeroRevokes(t *testing.T) {
	r := rekeyed(t, 0)
	if _, ok := r.Member(pub(bob)); ok {
		t.Fatal("old key still a member after rekey with no grace")
	}
	if _, ok := r.Known(pub(bob)); ok {
		t.Fatal("old key still known after rekey with no grace")
	}
	m, _ := r.Member(pub(frank))
	if !m.PrevKey.IsZero() || m.PrevUntil != 0 || m.Name != "bob" {
		t.Fatalf("member = %+v", m)
	}
}

func TestRekeyRefuses(t *testing.T) {
	setNow(t, time.UnixMilli(t0))
	r := rekeyed(t, t0+3_600_000)
	for _, tc := range []struct {
		name      string
		old, next proto.PubKey
		want      error
		msg       string
	}{
		{"old not a member", pub(eve), pub(dave), ErrNotMember, ""},
		{"old is only a previous key", pub(bob), pub(dave), ErrNotMember, ""},
		{"next is a member", pub(frank), pub(alice), ErrDuplicateMember, "alice"},
		{"next is a previous key", pub(alice), pub(bob), ErrDuplicateMember, "previous key of bob"},
		{"next is zero", pub(alice), proto.PubKey{}, nil, "zero key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Next().Rekey(tc.old, tc.next, t0+1)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Rekey = %v, want %v %q", err, tc.want, tc.msg)
			}
		})
	}
	if err := r.Next().Add(Member{Key: pub(bob), Role: RoleMember}); !errors.Is(err, ErrDuplicateMember) {
		t.Fatalf("Add(previous key) = %v", err)
	}
}

func TestRekeyAgainReplacesPrev(t *testing.T) {
	setNow(t, time.UnixMilli(t0))
	r := rekeyed(t, t0+3_600_000)
	if err := r.Rekey(pub(frank), pub(dave), t0+7_200_000); err != nil {
		t.Fatal(err)
	}
	m, _ := r.Member(pub(dave))
	if m.PrevKey != pub(frank) || m.Name != "bob" {
		t.Fatalf("member = %+v", m)
	}
	if _, ok := r.Member(pub(bob)); ok {
		t.Fatal("the key before the previous one is still a member")
	}
}

func TestNextDropsExpiredPrevKeys(t *testing.T) {
	until := t0 + 3_600_000
	r := rekeyed(t, until)
	setNow(t, time.UnixMilli(until))
	if m, _ := r.Next().Member(pub(frank)); m.PrevKey.IsZero() {
		t.Fatal("Next dropped a previous key inside its window")
	}
	setNow(t, time.UnixMilli(until).Add(PrevKeySkew))
	next := r.Next()
	m, _ := next.Member(pub(frank))
	if !m.PrevKey.IsZero() || m.PrevUntil != 0 {
		t.Fatalf("expired previous key kept by Next: %+v", m)
	}
	if m, _ := r.Member(pub(frank)); m.PrevKey.IsZero() {
		t.Fatal("Next changed the roster it copied")
	}
}

func TestParseRejectsBadPrevKeys(t *testing.T) {
	pa, pb, pf := pub(alice), pub(bob), pub(frank)
	aliceAdmin := cmember(alice, RoleAdmin, "alice")
	until := head(0, uint64(t0))
	// bob's entry (sorted first) with extra prev fields.
	bobWith := func(n int, extra ...[]byte) []byte {
		return cat(cmap(2+n), cuint(0), cbstr(pb[:]), cuint(1), cuint(2), cat(extra...))
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
		msg  string
	}{
		{"prev_key alone", body("acme", 1, bobWith(1, cuint(4), cbstr(pf[:])), aliceAdmin), ErrInvalid, "without a positive prev_until"},
		{"prev_until alone", body("acme", 1, bobWith(1, cuint(5), until), aliceAdmin), ErrInvalid, "prev_until without prev_key"},
		{"negative prev_until", body("acme", 1, bobWith(2, cuint(4), cbstr(pf[:]), cuint(5), h("20")), aliceAdmin), ErrInvalid, "positive prev_until"},
		{"prev_key is own key", body("acme", 1, bobWith(2, cuint(4), cbstr(pb[:]), cuint(5), until), aliceAdmin), ErrInvalid, "own key"},
		{"prev_key is a member", body("acme", 1, bobWith(2, cuint(4), cbstr(pa[:]), cuint(5), until), aliceAdmin), ErrInvalid, "is a member's key"},
		{"prev_key twice", body("acme", 1, bobWith(2, cuint(4), cbstr(pf[:]), cuint(5), until),
			cat(cmap(4), cuint(0), cbstr(pa[:]), cuint(1), cuint(4), cuint(4), cbstr(pf[:]), cuint(5), until)), ErrInvalid, "listed twice"},
		{"explicit prev_until 0", body("acme", 1, bobWith(1, cuint(5), cuint(0)), aliceAdmin), proto.ErrNonCanonical, ""},
		{"short prev_key", body("acme", 1, bobWith(2, cuint(4), cbstr(pf[:31]), cuint(5), until), aliceAdmin), nil, ""},
		{"unknown member key 6", body("acme", 1, bobWith(1, cuint(6), cuint(1)), aliceAdmin), proto.ErrMalformed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(signDoc(t, tc.body, alice))
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Parse = %v, want %v %q", err, tc.want, tc.msg)
			}
		})
	}
}

// TestRekeyWireForm pins a rotated member's encoding byte for byte:
// {0: key, 1: role, 2: name, 3: archive, 4: prev_key, 5: prev_until}.
func TestRekeyWireForm(t *testing.T) {
	r := rekeyed(t, t0)
	pf, pb := pub(frank), pub(bob)
	want := cat(h("a6 00 5820"), pf[:], h("01 03 02 63 626f62 03 f5 04 5820"), pb[:], h("05 1b 0000019b76daa800"))
	if !bytes.Contains(r.Doc.Body, want) {
		t.Fatalf("body %x\ndoes not hold %x", r.Doc.Body, want)
	}
}

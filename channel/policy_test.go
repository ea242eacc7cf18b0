package channel

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

func TestNewRoundTrip(t *testing.T) {
	r := testRoster(t)
	p, err := New("acme", " #Deploys", nil, nil, true, alice)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "deploys" || p.Version != 1 || p.Org != "acme" || !p.AllowHistory {
		t.Fatalf("new policy %+v", p)
	}
	if p.ID.Version() != 7 {
		t.Fatalf("channel id %s is not a UUIDv7", p.ID)
	}
	if d := time.Since(time.UnixMilli(p.Timestamp)); d < 0 || d > time.Minute {
		t.Fatalf("timestamp %d is not now", p.Timestamp)
	}
	wantRead := []Principal{RolePrincipal(roster.RoleObserver)}
	wantWrite := []Principal{RolePrincipal(roster.RoleMember)}
	if !reflect.DeepEqual(p.ReadACL, wantRead) || !reflect.DeepEqual(p.WriteACL, wantWrite) {
		t.Fatalf("default ACL: readers %v writers %v", p.ReadACL, p.WriteACL)
	}
	if !reflect.DeepEqual(p.Admins, []proto.PubKey{pub(alice)}) || !reflect.DeepEqual(p.Signers(), []proto.PubKey{pub(alice)}) {
		t.Fatalf("admins %v signers %v", p.Admins, p.Signers())
	}
	b := mustEncode(t, p)
	q := mustParse(t, b)
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", q, p)
	}
	if err := Check(r, q); err != nil {
		t.Fatal(err)
	}

	// Explicit lists are kept, put in canonical order and deduplicated.
	p, err = New("acme", "ops", []Principal{RolePrincipal(roster.RoleOperator), KeyPrincipal(pub(dave)), KeyPrincipal(pub(dave))},
		[]Principal{KeyPrincipal(pub(frank))}, false, carol)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Principal{KeyPrincipal(pub(dave)), RolePrincipal(roster.RoleOperator)}; !reflect.DeepEqual(p.ReadACL, want) {
		t.Fatalf("readers %v, want %v", p.ReadACL, want)
	}
	q = mustParse(t, mustEncode(t, p))
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", q, p)
	}
	// Two channels never share an id.
	p2, err := New("acme", "ops", nil, nil, false, carol)
	if err != nil {
		t.Fatal(err)
	}
	if p2.ID == p.ID {
		t.Fatal("two new channels with one id")
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		org     string
		channel string
		readers []Principal
		key     []byte
		want    error
	}{
		{"bad name", "acme", "dé", nil, alice, ErrBadName},
		{"empty name", "acme", "#", nil, alice, ErrBadName},
		{"bad org", "", "ops", nil, alice, ErrInvalid},
		{"org with newline", "ac\nme", "ops", nil, alice, ErrInvalid},
		{"both fields", "acme", "ops", []Principal{{Key: pub(bob), MinRole: roster.RoleMember}}, alice, ErrInvalid},
		{"unknown role", "acme", "ops", []Principal{RolePrincipal(9)}, alice, roster.ErrUnknownRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.org, tc.channel, tc.readers, nil, false, tc.key)
			wantErr(t, err, tc.want)
		})
	}
	if _, err := New("acme", "ops", nil, nil, false, alice[:10]); err == nil {
		t.Fatal("short private key accepted")
	}
}

func TestNextAndSign(t *testing.T) {
	r := testRoster(t)
	cur := mustSign(t, testPolicy(idGeneral, "general"), alice)
	next := cur.Next()
	if next.Version != 2 || next.Doc != nil || next.ID != cur.ID {
		t.Fatalf("next %+v", next)
	}
	// The copy is deep: editing it leaves cur alone.
	next.ReadACL[0] = KeyPrincipal(pub(bob))
	next.Admins[0] = pub(carol)
	if cur.ReadACL[0] != RolePrincipal(roster.RoleObserver) || cur.Admins[0] != pub(alice) {
		t.Fatal("Next shares lists with its original")
	}
	if _, err := next.Encode(); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("unsigned encode: %v", err)
	}
	// Sign sorts and deduplicates what an editor appended.
	next.ReadACL = append(next.ReadACL, RolePrincipal(roster.RoleAdmin), KeyPrincipal(pub(dave)), KeyPrincipal(pub(bob)))
	next.Admins = append(next.Admins, pub(alice), pub(carol))
	mustSign(t, next, carol)
	if want := []Principal{KeyPrincipal(pub(bob)), KeyPrincipal(pub(dave)), RolePrincipal(roster.RoleAdmin)}; !reflect.DeepEqual(next.ReadACL, want) {
		t.Fatalf("readers %v, want %v", next.ReadACL, want)
	}
	if want := []proto.PubKey{pub(alice), pub(carol)}; !reflect.DeepEqual(next.Admins, want) {
		t.Fatalf("admins %v", next.Admins)
	}
	if err := CheckUpdate(r, cur, next); err != nil {
		t.Fatal(err)
	}
	// A second admin co-signs: the body is kept and both signatures verify.
	body := bytes.Clone(next.Doc.Body)
	mustSign(t, next, alice)
	if !bytes.Equal(body, next.Doc.Body) || len(next.Doc.Sigs) != 2 {
		t.Fatalf("co-signing changed the body or lost a signature")
	}
	q := mustParse(t, mustEncode(t, next))
	if !reflect.DeepEqual(q.Signers(), []proto.PubKey{pub(alice), pub(carol)}) {
		t.Fatalf("signers %v", q.Signers())
	}
	// Editing after signing: Encode and Check refuse until signed again,
	// and signing again drops the signatures over the old body.
	q.AllowHistory = !q.AllowHistory
	if _, err := q.Encode(); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("encode after edit: %v", err)
	}
	wantErr(t, Check(r, q), ErrUnsigned)
	mustSign(t, q, carol)
	if len(q.Doc.Sigs) != 1 {
		t.Fatalf("old signatures kept over a new body: %v", q.Signers())
	}
	if err := Check(r, mustParse(t, mustEncode(t, q))); err != nil {
		t.Fatal(err)
	}
}

func TestEffectiveRetention(t *testing.T) {
	p := testPolicy(idGeneral, "general")
	if d, n := p.EffectiveRetention(); d != 72*time.Hour || n != 10_000 {
		t.Fatalf("defaults: %v %d", d, n)
	}
	p.RetentionHours, p.RetentionMessages = 1, 5
	if d, n := p.EffectiveRetention(); d != time.Hour || n != 5 {
		t.Fatalf("custom: %v %d", d, n)
	}
	p.RetentionHours, p.RetentionMessages = MaxRetentionHours, MaxRetentionMessages
	if d, n := p.EffectiveRetention(); d != MaxRetentionHours*time.Hour || n != MaxRetentionMessages {
		t.Fatalf("limits: %v %d", d, n)
	}
}

// TestParseRejects feeds Parse documents that break one rule each.
func TestParseRejects(t *testing.T) {
	good := cmap(fullFields()...)
	f := fullFields()
	body := func(kvs ...kv) []byte { return cmap(kvs...) }
	field := func(k uint64, v []byte) []byte { return body(withField(f, k, v)...) }
	v4 := uuid.MustParse("6f1d5c8e-1b0a-4c3e-9d2f-000000000001")
	long := strings.Repeat("a", MaxNameLen+1)

	// A body that differs from the good one by one byte, signed for the
	// good one: a tampered document.
	tampered := bytes.Clone(good)
	i := bytes.Index(tampered, []byte("deploys"))
	tampered[i] = 'e'
	doc := &proto.SignedDoc{Body: good}
	doc.AddSignature(alice, proto.DomainPolicy)
	doc.Body = tampered
	tamperedDoc, _ := doc.Encode()

	sigFlipped := signDoc(t, good, alice)
	sigFlipped[len(sigFlipped)-1] ^= 1

	// alice as signer, bob's signature.
	wrongSigner := &proto.SignedDoc{Body: good, Sigs: []proto.DocSig{{Signer: pub(alice), Sig: proto.Sign(bob, proto.DomainPolicy, good)}}}
	wrongSignerDoc, _ := wrongSigner.Encode()
	// A valid and an invalid signature: refused as a whole.
	oneBad := &proto.SignedDoc{Body: good}
	oneBad.AddSignature(alice, proto.DomainPolicy)
	oneBad.Sigs = append(oneBad.Sigs, proto.DocSig{Signer: pub(carol), Sig: proto.Sign(carol, proto.DomainRoster, good)})
	oneBadDoc, _ := oneBad.Encode()

	goodDoc := signDoc(t, good, alice)
	// The wrapper with the body's byte-string length in a non-minimal form.
	rest := goodDoc[bytes.Index(goodDoc, good)+len(good):]
	wrapNonMin := cat([]byte{0xa2, 0x00, 0x5a, 0, 0}, []byte{byte(len(good) >> 8), byte(len(good))}, good, rest)

	for _, tc := range []struct {
		name string
		doc  []byte
		want []error
	}{
		{"tampered body", tamperedDoc, []error{proto.ErrBadSignature}},
		{"tampered signature", sigFlipped, []error{proto.ErrBadSignature}},
		{"signature by another key", wrongSignerDoc, []error{proto.ErrBadSignature}},
		{"one bad signature among good", oneBadDoc, []error{proto.ErrBadSignature}},
		{"uppercase name", signDoc(t, field(1, ctstr("Deploys")), alice), []error{ErrBadName}},
		{"name with #", signDoc(t, field(1, ctstr("#deploys")), alice), []error{ErrBadName}},
		{"empty name", signDoc(t, field(1, ctstr("")), alice), []error{ErrBadName}},
		{"name starting with -", signDoc(t, field(1, ctstr("-x")), alice), []error{ErrBadName}},
		{"name too long", signDoc(t, field(1, ctstr(long)), alice), []error{ErrBadName}},
		{"name not UTF-8", signDoc(t, field(1, ctstr("a\xff")), alice), []error{proto.ErrMalformed}},
		{"unsorted readers", signDoc(t, field(2, carr(ckey(dave), ckey(bob))), alice), []error{ErrInvalid, proto.ErrNonCanonical}},
		{"role before key", signDoc(t, field(2, carr(crole(roster.RoleMember), ckey(bob))), alice), []error{ErrInvalid, proto.ErrNonCanonical}},
		{"unsorted roles", signDoc(t, field(3, carr(crole(roster.RoleOperator), crole(roster.RoleMember))), alice), []error{ErrInvalid, proto.ErrNonCanonical}},
		{"duplicate reader", signDoc(t, field(2, carr(ckey(bob), ckey(bob))), alice), []error{ErrInvalid}},
		{"duplicate role", signDoc(t, field(3, carr(crole(roster.RoleMember), crole(roster.RoleMember))), alice), []error{ErrInvalid}},
		{"principal with both", signDoc(t, field(2, carr(cmap(kv{0, cpub(bob)}, kv{1, cuint(2)}))), alice), []error{ErrInvalid}},
		{"principal with neither", signDoc(t, field(2, carr(cmap())), alice), []error{ErrInvalid}},
		{"principal role 0", signDoc(t, field(2, carr(crole(0))), alice), []error{ErrInvalid, roster.ErrUnknownRole}},
		{"principal role 5", signDoc(t, field(2, carr(crole(5))), alice), []error{ErrInvalid, roster.ErrUnknownRole}},
		{"principal role 256", signDoc(t, field(2, carr(cmap(kv{1, cuint(256)}))), alice), []error{proto.ErrMalformed}},
		{"principal zero key", signDoc(t, field(2, carr(cmap(kv{0, cbstr(make([]byte, 32))}))), alice), []error{ErrInvalid}},
		{"principal short key", signDoc(t, field(2, carr(cmap(kv{0, cbstr(make([]byte, 31))}))), alice), []error{proto.ErrMalformed}},
		{"principal unknown field", signDoc(t, field(2, carr(cmap(kv{2, cuint(1)}))), alice), []error{proto.ErrMalformed}},
		{"principal null key", signDoc(t, field(2, carr(cmap(kv{0, []byte{0xf6}}))), alice), []error{proto.ErrNonCanonical}},
		{"unsorted admins", signDoc(t, field(4, carr(cpub(carol), cpub(alice))), alice), []error{ErrInvalid, proto.ErrNonCanonical}},
		{"duplicate admin", signDoc(t, field(4, carr(cpub(alice), cpub(alice))), alice), []error{ErrInvalid}},
		{"no admin", signDoc(t, field(4, carr()), alice), []error{ErrInvalid}},
		{"zero admin key", signDoc(t, field(4, carr(cbstr(make([]byte, 32)))), alice), []error{ErrInvalid}},
		{"nil channel id", signDoc(t, field(0, cid(uuid.Nil)), alice), []error{ErrInvalid}},
		{"v4 channel id", signDoc(t, field(0, cid(v4)), alice), []error{ErrInvalid}},
		{"short channel id", signDoc(t, field(0, cbstr(idDeploys[:15])), alice), []error{proto.ErrMalformed}},
		{"version 0", signDoc(t, field(8, cuint(0)), alice), []error{ErrInvalid}},
		{"retention hours over limit", signDoc(t, field(6, cuint(MaxRetentionHours+1)), alice), []error{ErrInvalid}},
		{"retention messages over limit", signDoc(t, field(7, cuint(MaxRetentionMessages+1)), alice), []error{ErrInvalid}},
		{"retention beyond uint32", signDoc(t, field(6, cuint(1<<32)), alice), []error{proto.ErrMalformed}},
		{"empty org", signDoc(t, field(10, ctstr("")), alice), []error{ErrInvalid}},
		{"bool as int", signDoc(t, field(5, cuint(0)), alice), []error{proto.ErrMalformed}},
		{"non-minimal integer", signDoc(t, field(8, []byte{0x18, 0x03}), alice), []error{proto.ErrNonCanonical}},
		{"non-minimal string length", signDoc(t, field(10, []byte{0x78, 0x04, 'a', 'c', 'm', 'e'}), alice), []error{proto.ErrNonCanonical}},
		{"keys out of order", signDoc(t, body(append([]kv{f[1], f[0]}, f[2:]...)...), alice), []error{proto.ErrNonCanonical}},
		{"missing key", signDoc(t, body(append(append([]kv{}, f[:5]...), f[6:]...)...), alice), []error{proto.ErrNonCanonical}},
		{"unknown key", signDoc(t, body(append(append([]kv{}, f...), kv{11, cuint(0)})...), alice), []error{proto.ErrMalformed}},
		{"duplicate key", signDoc(t, body(append(append([]kv{}, f...), f[10])...), alice), []error{proto.ErrMalformed}},
		{"indefinite array", signDoc(t, field(3, cat([]byte{0x9f}, ckey(bob), []byte{0xff})), alice), []error{proto.ErrMalformed}},
		{"tag", signDoc(t, field(9, cat([]byte{0xc1}, cuint(uint64(t0/1000)))), alice), []error{proto.ErrMalformed}},
		{"body not a map", signDoc(t, carr(cuint(1)), alice), []error{proto.ErrMalformed}},
		{"body trailing bytes", signDoc(t, cat(good, []byte{0}), alice), []error{proto.ErrMalformed}},
		{"wrapper non-canonical", wrapNonMin, []error{proto.ErrNonCanonical}},
		{"wrapper trailing bytes", cat(goodDoc, []byte{0}), []error{proto.ErrMalformed}},
		{"empty input", nil, []error{proto.ErrMalformed}},
		{"too large", make([]byte, proto.MaxDocSize+1), []error{proto.ErrTooLarge}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.doc)
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			t.Log(err)
			for _, w := range tc.want {
				wantErr(t, err, w)
			}
		})
	}
	// The baseline the cases deviate from parses.
	if _, err := Parse(goodDoc); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	r := testRoster(t)
	for _, tc := range []struct {
		name    string
		p       *Policy
		want    error
		mention string
	}{
		{"signed by alice", mustSign(t, testPolicy(idGeneral, "general"), alice), nil, ""},
		{"signed by carol", mustSign(t, testPolicy(idGeneral, "general"), carol), nil, ""},
		{"signed by both admins", mustSign(t, testPolicy(idGeneral, "general"), carol, alice), nil, ""},
		{"signed by a member", mustSign(t, testPolicy(idGeneral, "general"), bob), ErrNotAdmin, pub(bob).Fingerprint()},
		{"signed by an operator", mustSign(t, testPolicy(idGeneral, "general"), frank), ErrNotAdmin, pub(frank).Fingerprint()},
		{"also signed by a non-member", mustSign(t, testPolicy(idGeneral, "general"), alice, eve), ErrNotAdmin, pub(eve).Fingerprint()},
		{"non-admin channel admin", func() *Policy {
			p := testPolicy(idGeneral, "general")
			p.Admins = append(p.Admins, pub(bob))
			return mustSign(t, p, alice)
		}(), ErrNotAdmin, pub(bob).Fingerprint()},
		{"non-member channel admin", func() *Policy {
			p := testPolicy(idGeneral, "general")
			p.Admins = []proto.PubKey{pub(eve)}
			return mustSign(t, p, alice)
		}(), ErrNotAdmin, pub(eve).Fingerprint()},
		{"wrong org", func() *Policy {
			p := testPolicy(idGeneral, "general")
			p.Org = "other"
			return mustSign(t, p, alice)
		}(), ErrWrongOrg, `"other"`},
		{"no signature", func() *Policy {
			p := mustSign(t, testPolicy(idGeneral, "general"), alice)
			p.Doc.Sigs = nil
			return p
		}(), ErrUnsigned, ""},
		{"never signed", testPolicy(idGeneral, "general"), ErrUnsigned, ""},
		{"forged signature in memory", func() *Policy {
			p := mustSign(t, testPolicy(idGeneral, "general"), alice)
			p.Doc.Sigs[0].Sig[0] ^= 1
			return p
		}(), proto.ErrBadSignature, pub(alice).Fingerprint()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(r, tc.p)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tc.want)
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q does not mention %q", err, tc.mention)
			}
		})
	}

	// A policy stops passing when its signer stops being an admin.
	p := mustSign(t, testPolicy(idGeneral, "general"), carol)
	r2 := r.Next()
	if err := r2.SetRole(pub(carol), roster.RoleMember); err != nil {
		t.Fatal(err)
	}
	if err := r2.Sign(alice); err != nil {
		t.Fatal(err)
	}
	wantErr(t, Check(r2, p), ErrNotAdmin)
}

func TestCheckUpdate(t *testing.T) {
	r := testRoster(t)
	cur := mustSign(t, testPolicy(idGeneral, "general"), alice)
	next := cur.Next()
	next.Name = "general2"
	mustSign(t, next, carol)
	if err := CheckUpdate(r, cur, next); err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckUpdate(r, next, cur), ErrRollback)
	wantErr(t, CheckUpdate(r, cur, cur), ErrRollback)
	same := cur.Next()
	same.Version = cur.Version
	same.AllowHistory = true
	mustSign(t, same, alice)
	wantErr(t, CheckUpdate(r, cur, same), ErrRollback)

	other := mustSign(t, testPolicy(idDeploys, "general"), alice)
	other.Version = 2
	mustSign(t, other, alice)
	wantErr(t, CheckUpdate(r, cur, other), ErrInvalid)

	byMember := cur.Next()
	mustSign(t, byMember, bob)
	wantErr(t, CheckUpdate(r, cur, byMember), ErrNotAdmin)
}

// TestEditQuorum: where the roster's quorum is 2, a new channel needs one
// admin signature and an edit (a tombstone included) two distinct ones;
// a non-admin's signature still spoils the document.
func TestEditQuorum(t *testing.T) {
	r := testRoster(t)
	r.Threshold = 2
	v1 := testPolicy(uuid.Must(uuid.NewV7()), "ops")
	if err := v1.Sign(alice); err != nil {
		t.Fatal(err)
	}
	if err := Check(r, v1); err != nil {
		t.Fatalf("v1 with one admin signature: %v", err)
	}
	for _, next := range []*Policy{v1.Next(), v1.Tombstone()} {
		if err := next.Sign(alice); err != nil {
			t.Fatal(err)
		}
		if err := next.Sign(alice); err != nil { // again: replaces, counts once
			t.Fatal(err)
		}
		err := Check(r, next)
		if !errors.Is(err, ErrTooFewSignatures) || !strings.Contains(err.Error(), "1 of 2") {
			t.Fatalf("v%d with one admin signature: %v, want too few (1 of 2)", next.Version, err)
		}
		if tl := CountSignatures(r, next); tl.Have != 1 || tl.Need != 2 || tl.Missing() != 1 {
			t.Fatalf("tally %+v", tl)
		}
		if err := next.Sign(carol); err != nil {
			t.Fatal(err)
		}
		if err := Check(r, next); err != nil {
			t.Fatalf("v%d signed by two admins: %v", next.Version, err)
		}
		if err := next.Sign(bob); err != nil {
			t.Fatal(err)
		}
		if err := Check(r, next); !errors.Is(err, ErrNotAdmin) {
			t.Fatalf("v%d also signed by a member: %v, want not admin", next.Version, err)
		}
	}
	// Quorum 1 (the default): one admin signs an edit, as before.
	r.Threshold = 1
	next := v1.Next()
	if err := next.Sign(alice); err != nil {
		t.Fatal(err)
	}
	if err := Check(r, next); err != nil {
		t.Fatalf("edit under quorum 1: %v", err)
	}
}

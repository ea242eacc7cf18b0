package roster

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

// body builds a roster body from its parts; members are given encoded.
func body(org string, version uint64, members ...[]byte) []byte {
	return cat(cmap(4), cuint(0), ctstr(org), cuint(1), cuint(version), cuint(2), head(0, uint64(t0)),
		cuint(4), carr(len(members)), cat(members...))
}

func TestParseValidBodies(t *testing.T) {
	aliceAdmin := cmember(alice, RoleAdmin, "alice")
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"minimal", body("acme", 1, cmember(alice, RoleAdmin, ""))},
		{"named", body("acme", 1, aliceAdmin)},
		{"two members", body("acme", 9, cmember(bob, RoleObserver, "bob"), aliceAdmin)},
		{"negative timestamp", cat(cmap(4), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), h("20"),
			cuint(4), carr(1), aliceAdmin)},
		{"max org and name", body(strings.Repeat("o", MaxOrgLen), 1, cmember(alice, RoleAdmin, strings.Repeat("n", MaxNameLen)))},
		{"unicode name", body("acme", 1, cmember(alice, RoleAdmin, "Zoë 🦫"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := signDoc(t, tc.body, alice)
			r, err := Parse(doc)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := mustEncode(t, r); !bytes.Equal(got, doc) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", got, doc)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	aliceAdmin := cmember(alice, RoleAdmin, "alice")
	bobMember := cmember(bob, RoleMember, "bob")
	pa := pub(alice)
	many := make([][]byte, MaxMembers+1)
	for i := range many {
		k := make([]byte, 32)
		k[0], k[1], k[2] = 1, byte(i>>8), byte(i)
		many[i] = cat(cmap(2), cuint(0), cbstr(k), cuint(1), cuint(4))
	}
	for _, tc := range []struct {
		name string
		body []byte
		want []error // every one must match with errors.Is
		msg  string  // substring of the message
	}{
		// Canonical form.
		{"unsorted members", body("acme", 1, aliceAdmin, bobMember), []error{ErrInvalid, proto.ErrNonCanonical}, "not sorted"},
		{"unsorted map keys", cat(cmap(4), cuint(1), cuint(1), cuint(0), ctstr("acme"), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, ""},
		{"unsorted member keys", body("acme", 1, cat(cmap(2), cuint(1), cuint(4), cuint(0), cbstr(pa[:]))), []error{proto.ErrNonCanonical}, ""},
		{"non-minimal version", cat(cmap(4), cuint(0), ctstr("acme"), cuint(1), h("1801"), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, ""},
		{"non-minimal map key", cat(cmap(4), h("1800"), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, ""},
		{"non-minimal string length", cat(cmap(4), cuint(0), h("7804"), []byte("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, ""},
		{"explicit quorum 0", cat(cmap(5), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(3), cuint(0), cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, ""},
		{"explicit quorum 1", cat(cmap(5), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(3), cuint(1), cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, "quorum 1"},
		{"explicit archive false", body("acme", 1, cat(cmap(3), cuint(0), cbstr(pa[:]), cuint(1), cuint(4), cuint(3), h("f4"))), []error{proto.ErrNonCanonical}, ""},
		{"explicit empty name", body("acme", 1, cat(cmap(3), cuint(0), cbstr(pa[:]), cuint(1), cuint(4), cuint(2), ctstr(""))), []error{proto.ErrNonCanonical}, ""},
		{"missing org", cat(cmap(3), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)), cuint(4), carr(1), aliceAdmin), []error{proto.ErrNonCanonical}, ""},
		{"missing members", cat(cmap(3), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0))), []error{proto.ErrNonCanonical}, ""},
		{"short key", body("acme", 1, cat(cmap(2), cuint(0), cbstr(pa[:31]), cuint(1), cuint(4))), nil, ""},
		{"long key", body("acme", 1, cat(cmap(2), cuint(0), cbstr(append(pa[:], 0)), cuint(1), cuint(4))), nil, ""},
		// Strict decoding.
		{"indefinite members", cat(cmap(4), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), h("9f"), aliceAdmin, h("ff")), []error{proto.ErrMalformed}, ""},
		{"indefinite map", cat(h("bf"), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin, h("ff")), []error{proto.ErrMalformed}, ""},
		{"duplicate map key", cat(cmap(5), cuint(0), ctstr("acme"), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrMalformed}, ""},
		{"tagged timestamp", cat(cmap(4), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), h("c1"), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrMalformed}, ""},
		{"tagged body", cat(h("d818"), body("acme", 1, aliceAdmin)), []error{proto.ErrMalformed}, ""},
		{"unknown field", cat(cmap(5), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin, cuint(5), cuint(0)), []error{proto.ErrMalformed}, ""},
		{"unknown member field", body("acme", 1, cat(cmap(3), cuint(0), cbstr(pa[:]), cuint(1), cuint(4), cuint(9), cuint(0))), []error{proto.ErrMalformed}, ""},
		{"text org as bytes", cat(cmap(4), cuint(0), cbstr([]byte("acme")), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrMalformed}, ""},
		{"invalid utf-8 org", body("ac\xffe", 1, aliceAdmin), []error{proto.ErrMalformed}, ""},
		{"negative version", cat(cmap(4), cuint(0), ctstr("acme"), cuint(1), h("20"), cuint(2), head(0, uint64(t0)),
			cuint(4), carr(1), aliceAdmin), []error{proto.ErrMalformed}, ""},
		{"role overflow", body("acme", 1, cat(cmap(2), cuint(0), cbstr(pa[:]), cuint(1), cuint(260))), []error{proto.ErrMalformed}, ""},
		{"trailing bytes", cat(body("acme", 1, aliceAdmin), h("00")), []error{proto.ErrMalformed}, ""},
		{"oversized member array", body("acme", 1, many...), []error{proto.ErrMalformed}, ""},
		{"not a map", h("80"), []error{proto.ErrMalformed}, ""},
		// Structure.
		{"version 0", body("acme", 0, aliceAdmin), []error{ErrInvalid}, "version 0"},
		{"empty org", body("", 1, aliceAdmin), []error{ErrInvalid}, "org id"},
		{"long org", body(strings.Repeat("o", MaxOrgLen+1), 1, aliceAdmin), []error{ErrInvalid}, "org id"},
		{"control character in org", body("ac\nme", 1, aliceAdmin), []error{ErrInvalid}, "control"},
		{"long name", body("acme", 1, cmember(alice, RoleAdmin, strings.Repeat("n", MaxNameLen+1))), []error{ErrInvalid}, "name"},
		{"newline in name", body("acme", 1, cmember(alice, RoleAdmin, "alice\nFrom: root")), []error{ErrInvalid}, "control"},
		{"no members", body("acme", 1), []error{ErrInvalid}, "no admin"},
		{"no admin", body("acme", 1, cmember(alice, RoleOperator, "")), []error{ErrInvalid}, "no admin"},
		{"role 0", body("acme", 1, aliceAdmin, cmember(dave, 0, "")), []error{ErrInvalid, ErrUnknownRole}, ""},
		{"role 5", body("acme", 1, aliceAdmin, cmember(dave, 5, "")), []error{ErrInvalid, ErrUnknownRole}, ""},
		{"duplicate member", body("acme", 1, aliceAdmin, aliceAdmin), []error{ErrInvalid}, "twice"},
		{"zero key", body("acme", 1, cat(cmap(2), cuint(0), cbstr(make([]byte, 32)), cuint(1), cuint(1)), aliceAdmin), []error{ErrInvalid}, "zero key"},
		{"quorum above admins", cat(cmap(5), cuint(0), ctstr("acme"), cuint(1), cuint(1), cuint(2), head(0, uint64(t0)),
			cuint(3), cuint(2), cuint(4), carr(1), aliceAdmin), []error{ErrInvalid, ErrQuorum}, "quorum 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(signDoc(t, tc.body, alice))
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not match %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
}

func TestParseSignatures(t *testing.T) {
	good := readHex(t, "v4-two-admins.hex")
	r, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	bodyAt := bytes.Index(good, r.Doc.Body)
	sigAt := bytes.Index(good, r.Doc.Sigs[1].Sig[:])
	if bodyAt < 0 || sigAt < 0 {
		t.Fatal("cannot locate body or signature")
	}
	nameAt := bytes.Index(good, []byte("carol"))

	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	// A signature by alice presented as carol's: the wrong key.
	wrongKey := func() []byte {
		d := &proto.SignedDoc{Body: r.Doc.Body}
		d.AddSignature(alice, proto.DomainRoster)
		d.AddSignature(carol, proto.DomainRoster)
		for i := range d.Sigs {
			if d.Sigs[i].Signer.Equal(pub(carol)) {
				d.Sigs[i].Sig = proto.Sign(alice, proto.DomainRoster, d.Body)
			}
		}
		b, _ := d.Encode()
		return b
	}()
	// A signature over the body under another domain.
	wrongDomain := func() []byte {
		d := &proto.SignedDoc{Body: r.Doc.Body}
		d.AddSignature(alice, proto.DomainPolicy)
		b, _ := d.Encode()
		return b
	}()

	for _, tc := range []struct {
		name string
		doc  []byte
		want error
	}{
		{"tampered name in body", flip(nameAt), proto.ErrBadSignature},
		{"tampered timestamp in body", flip(bodyAt + 14), proto.ErrBadSignature},
		{"tampered signature", flip(sigAt + 10), proto.ErrBadSignature},
		{"wrong key", wrongKey, proto.ErrBadSignature},
		{"wrong domain", wrongDomain, proto.ErrBadSignature},
		{"tampered structure", flip(bodyAt), proto.ErrMalformed},
		{"truncated", good[:len(good)-1], proto.ErrMalformed},
		{"empty", nil, proto.ErrMalformed},
		{"too large", make([]byte, proto.MaxDocSize+1), proto.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.doc)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse error %v, want %v", err, tc.want)
			}
		})
	}

	// The bad-signature error names the roster.
	_, err = Parse(flip(nameAt))
	if !strings.Contains(err.Error(), `"acme" v4`) {
		t.Errorf("error %q does not name the roster", err)
	}
}

func TestParseUnsignedDocument(t *testing.T) {
	// Parse checks structure and signatures; a document without any is
	// well-formed but has no authority.
	r, err := Parse(signDoc(t, body("acme", 1, cmember(alice, RoleAdmin, ""))))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := CheckBootstrap(r); !errors.Is(err, ErrTooFewSignatures) {
		t.Fatalf("CheckBootstrap: %v, want ErrTooFewSignatures", err)
	}
}

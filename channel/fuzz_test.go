package channel

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// FuzzParse: whatever Parse accepts is valid, encodes back to exactly
// the input (one accepted encoding per policy) and survives Check and the
// ACL without panicking. Seeded from the golden vectors.
func FuzzParse(f *testing.F) {
	for _, v := range goldenVectors(f) {
		f.Add(mustEncode(f, v.p))
	}
	f.Add(signDoc(f, cmap(withField(fullFields(), 2, carr(crole(0)))...), alice))
	f.Add(signDoc(f, cmap(fullFields()...), alice, carol, bob))
	r := testRoster(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("parsed an invalid policy: %v", err)
		}
		again, err := p.Encode()
		if err != nil {
			t.Fatalf("parsed policy does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted a non-canonical encoding:\n in %x\nout %x", b, again)
		}
		q, err := Parse(again)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("re-parse: %v", err)
		}
		_ = Check(r, p)
		for _, m := range r.Members {
			if p.CanWrite(r, m.Key) && m.Role == roster.RoleObserver {
				t.Fatal("an observer may write")
			}
			p.CanRead(r, m.Key)
		}
		p.Readers(r)
		p.EffectiveRetention()
	})
}

// FuzzParseBody fuzzes the body behind a valid signature, so the fuzzer
// explores the body rules instead of stopping at the signature: an
// accepted body must be exactly what signing the decoded fields produces.
func FuzzParseBody(f *testing.F) {
	for _, v := range goldenVectors(f) {
		f.Add(v.p.Doc.Body)
	}
	f.Add(cmap(withField(fullFields(), 3, carr(crole(roster.RoleMember), ckey(bob)))...))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) == 0 {
			return
		}
		d := &proto.SignedDoc{Body: body}
		d.AddSignature(alice, proto.DomainPolicy)
		b, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(b)
		if err != nil {
			return
		}
		q := p.clone()
		q.Doc = nil
		if err := q.Sign(alice); err != nil {
			t.Fatalf("re-sign: %v", err)
		}
		if !bytes.Equal(q.Doc.Body, body) {
			t.Fatalf("accepted body differs from its fields' encoding:\n in %x\nout %x", body, q.Doc.Body)
		}
	})
}

// FuzzText: the text forms of names and principals are stable.
func FuzzText(f *testing.F) {
	r := testRoster(f)
	for _, s := range []string{"#General", "ops.prod", "role:member", pub(bob).String(), "carol", "@carol", pub(bob).Fingerprint()} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := NormalizeName(s); err == nil {
			if CheckName(n) != nil {
				t.Fatalf("NormalizeName(%q) = %q, invalid", s, n)
			}
			if m, err := NormalizeName(n); err != nil || m != n {
				t.Fatalf("NormalizeName not idempotent on %q", n)
			}
		}
		p, err := ParsePrincipal(s, r)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParsePrincipal(%q) = invalid %v", s, p)
		}
		q, err := ParsePrincipal(p.String(), nil)
		if err != nil || q != p {
			t.Fatalf("text round trip of %v: %v %v", p, q, err)
		}
	})
}

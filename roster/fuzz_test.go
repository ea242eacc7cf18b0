package roster

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// is in its one canonical form: encoding it again gives the same bytes.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "v*.hex"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed vectors: %v", err)
	}
	for _, file := range files {
		f.Add(readHex(f, filepath.Base(file)))
	}
	f.Add(signDoc(f, body("acme", 1, cmember(alice, RoleAdmin, "alice"), cmember(bob, RoleMember, ""))))
	f.Add([]byte{0xa2, 0x00, 0x40, 0x01, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid roster: %v", err)
		}
		again, err := r.Encode()
		if err != nil {
			t.Fatalf("accepted roster does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, again)
		}
		// Lookups and checks must not panic on anything accepted.
		for _, m := range r.Members {
			_, _ = r.Lookup(m.Name)
			_, _ = r.Lookup(m.Key.Fingerprint())
		}
		_ = CheckBootstrap(r)
	})
}

// FuzzParseBody reaches the body decoder and the structural checks, which
// FuzzParse rarely does because mutated documents fail their signatures:
// it signs each input as a body, so only the body is under test.
func FuzzParseBody(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "v*.hex"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed vectors: %v", err)
	}
	for _, file := range files {
		r, err := Parse(readHex(f, filepath.Base(file)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(r.Doc.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) == 0 {
			return
		}
		doc := signDoc(t, body, alice)
		r, err := Parse(doc)
		if err != nil {
			return
		}
		again, err := r.encodeBody()
		if err != nil {
			t.Fatalf("accepted body does not encode: %v", err)
		}
		if !bytes.Equal(again, body) {
			t.Fatalf("body re-encoding differs:\n in  %x\n out %x", body, again)
		}
		if enc, err := r.Encode(); err != nil || !bytes.Equal(enc, doc) {
			t.Fatalf("document re-encoding differs: %v", err)
		}
		// An edit and a signature on anything accepted must still work.
		n := r.Next()
		if err := n.Sign(bob); err != nil {
			t.Fatalf("Sign of the next version: %v", err)
		}
		if err := CheckUpdate(r, reparseT(t, n)); err == nil && !r.IsAdmin(pub(bob)) {
			t.Fatal("update signed by a non-admin accepted")
		}
	})
}

func reparseT(t *testing.T, r *Roster) *Roster {
	t.Helper()
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(b)
	if err != nil {
		t.Fatalf("re-parse: %v", err)
	}
	return p
}

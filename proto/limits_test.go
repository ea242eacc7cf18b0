package proto

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"
)

func TestSignedDocSignatureCap(t *testing.T) {
	d := &SignedDoc{Body: []byte{0xa0}}
	for i := 0; i <= MaxDocSigs; i++ {
		seed := bytes.Repeat([]byte{byte(i + 1)}, ed25519.SeedSize)
		d.AddSignature(ed25519.NewKeyFromSeed(seed), DomainRoster)
	}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSignedDoc(b); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d signatures: %v, want ErrTooLarge", len(d.Sigs), err)
	}
	d.Sigs = d.Sigs[:MaxDocSigs]
	b, _ = d.Encode()
	if _, err := ParseSignedDoc(b); err != nil {
		t.Fatalf("%d signatures refused: %v", MaxDocSigs, err)
	}
}

func TestHandshakePayloadRejectsControlCharsAndBadListen(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	base := func() HandshakePayload {
		p := HandshakePayload{Version: ProtocolVersion, Org: "acme", Name: "n", Listen: []string{"tcp://10.0.0.1:7437", "unix:///tmp/x.sock"}}
		p.BindStatic(key, bytes.Repeat([]byte{9}, 32))
		return p
	}
	p := base()
	b, _ := p.Encode()
	if _, err := ParseHandshakePayload(b); err != nil {
		t.Fatalf("valid payload refused: %v", err)
	}
	for name, mut := range map[string]func(*HandshakePayload){
		"newline in name": func(p *HandshakePayload) { p.Name = "evil\nFrom: admin" },
		"control in org":  func(p *HandshakePayload) { p.Org = "ac\x00me" },
	} {
		p := base()
		mut(&p)
		b, _ := p.Encode()
		if _, err := ParseHandshakePayload(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

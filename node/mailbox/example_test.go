package mailbox

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// exampleFile is the complete mailbox file of docs/PROTOCOL.md, Appendix
// A: testdata/mailbox/example-dm.txt at the root of the repository.
const exampleFile = "../../testdata/mailbox/example-dm.txt"

// exampleItem is the DM the example shows: from bob (seed 32 x 0x02) to
// alice (seed 32 x 0x01), with the fixed inputs of the test vectors, and
// a body holding a "---" line and an armor line, which are not escaped.
func exampleItem(t *testing.T) Item {
	t.Helper()
	bob := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	alice := proto.PubKeyOf(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)))
	parent := uuid.MustParse("018bcfe5-6800-7000-8000-000000000001")
	e := &proto.Envelope{
		ID:    uuid.MustParse("018bcfe5-6800-7000-8000-0000000000e1"),
		From:  proto.PubKeyOf(bob),
		To:    proto.ToPeer(alice),
		Kind:  proto.KindMessage,
		TS:    1700000000000,
		TTL:   proto.DefaultTTL,
		Seq:   7,
		Epoch: uuid.MustParse("9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"),
		Message: &proto.Message{InReplyTo: &parent, Body: "Deploy notes:\n---\n" +
			"The line above is part of the body, and so is the next one.\n" +
			ArmorBegin + "\nOnly the last such line of the file starts the armor."},
	}
	se, err := proto.SignEnvelope(bob, e)
	if err != nil {
		t.Fatal(err)
	}
	return Item{Env: se, Priority: "high", FromName: "bob", ToText: "@alice"}
}

// TestProtocolExampleFile: the example file is what the mirror writes for
// its envelope, it verifies, and docs/PROTOCOL.md shows it verbatim.
func TestProtocolExampleFile(t *testing.T) {
	it := exampleItem(t)
	b, err := Render(it)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(exampleFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exampleFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := os.ReadFile(exampleFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(stored, b) {
		t.Fatalf("%s differs from the rendering of its envelope:\n%s", exampleFile, b)
	}
	v, err := Verify(stored, VerifyOptions{})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if v.Env.Message.Body != it.Env.Message.Body || v.Name != "bob" || v.To != "@alice" || v.Priority != "high" {
		t.Fatalf("verified %+v", v)
	}
	doc, err := os.ReadFile("../../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append(append([]byte("```\n"), stored...), "```\n"...)) {
		t.Errorf("docs/PROTOCOL.md, Appendix A, lacks %s verbatim in a code block", exampleFile)
	}
}

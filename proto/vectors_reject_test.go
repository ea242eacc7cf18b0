package proto

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// rejectDir holds the negative vectors: envelopes every implementation
// must refuse. A file's name starts with the failure class (§1.2) that
// the refusal belongs to: malformed-, non-canonical- or invalid-.
const rejectDir = vectorDir + "/reject"

// rejectVector signs the canonical encoding of e without validating it,
// so the signature is good and only the rule the vector names is broken.
func rejectVector(t testing.TB, file, title string, key ed25519.PrivateKey, e Envelope, notes ...string) vector {
	t.Helper()
	signed, err := Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	sig := Sign(key, DomainEnvelope, signed)
	raw, err := Marshal(wireEnvelope{Signed: signed, Sig: sig})
	if err != nil {
		t.Fatal(err)
	}
	pub := PubKeyOf(key)
	return vector{
		file: file, title: title, notes: append(describe(&e), notes...),
		fields: []vecField{
			{"seed", seedOf(key)},
			{"pubkey", pub[:]},
			{"domain", []byte(DomainEnvelope)},
			{"signed", signed},
			{"signing_input", SigningInput(DomainEnvelope, signed)},
			{"sig", sig[:]},
			{"raw", raw},
		},
	}
}

func buildRejectVectors(t testing.TB) []vector {
	t.Helper()
	hdr := func(id byte, from PubKey, to Destination, kind Kind, seq uint64, epoch [16]byte) Envelope {
		return Envelope{ID: idN(id), From: from, To: to, Kind: kind, TS: fixedTS, TTL: DefaultTTL, Seq: seq, Epoch: epoch}
	}
	var vs []vector
	e := hdr(0x21, alice, ToOrg("acme"), KindMessage, 1, epochA)
	e.Message = &Message{Body: "hello, everyone"}
	vs = append(vs, rejectVector(t, "invalid-message-to-org.txt", "Message addressed to the org", keyAlice, e,
		"refused: a Message goes to a channel or a peer; only Presence goes to the org (§4.2)"))

	e = hdr(0x22, bob, ToPeer(alice), KindMessage, 1, epochB)
	e.Message = &Message{Body: "hi alice", InReplyTo: ptr(uuid.Nil)}
	vs = append(vs, rejectVector(t, "invalid-nil-in-reply-to.txt", "DM whose in_reply_to is the nil UUID", keyBob, e,
		"refused: in_reply_to names an envelope, and no envelope has the nil id; omit the key instead (§6.1)"))

	e = hdr(0x23, alice, ToPeer(bob), KindRequest, 1, epochA)
	e.Request = &Request{RequestID: reqID, Intent: "run-tests", ReplyTo: ptr(uuid.Nil), Hop: 1}
	vs = append(vs, rejectVector(t, "invalid-nil-reply-to.txt", "follow-up Request whose reply_to is the nil UUID", keyAlice, e,
		"refused: reply_to names the parent request, and no request has the nil id (§6.2)"))

	e = hdr(0x24, alice, ToPeer(bob), KindMessage, 1, epochA)
	a, _ := attachmentOf(t, "../../.ssh/authorized_keys", "text/plain", []byte("ssh-ed25519 AAAA\n"))
	e.Message = &Message{Body: "see attached", Attachments: []Attachment{a}}
	vs = append(vs, rejectVector(t, "invalid-attachment-name-path.txt", "DM whose attachment name holds path separators", keyAlice, e,
		"refused: an attachment name is one file name, without \"/\" or \"\\\" (§6.8)"))
	return vs
}

// rejectClass is the failure class a negative vector's file name names.
func rejectClass(t testing.TB, file string) error {
	for prefix, class := range map[string]error{"malformed-": ErrMalformed, "non-canonical-": ErrNonCanonical, "invalid-": ErrInvalid} {
		if strings.HasPrefix(file, prefix) {
			return class
		}
	}
	t.Fatalf("%s: name does not start with a failure class", file)
	return nil
}

func TestRejectVectors(t *testing.T) {
	vs := buildRejectVectors(t)
	if *update {
		if err := os.MkdirAll(rejectDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if err := os.WriteFile(filepath.Join(rejectDir, v.file), v.format(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]bool{}
	for _, v := range vs {
		want[v.file] = true
		t.Run(strings.TrimSuffix(v.file, ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(rejectDir, v.file))
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(data, v.format()) {
				t.Fatalf("%s differs from what the fixed inputs generate", v.file)
			}
			f, err := parseVectorFile(data)
			if err != nil {
				t.Fatal(err)
			}
			// The signature is good: the refusal is for the rule alone.
			if !ed25519.Verify(f["pubkey"], f["signing_input"], f["sig"]) ||
				!bytes.Equal(f["signing_input"], append(bytes.Clone(f["domain"]), f["signed"]...)) {
				t.Fatal("signature fields do not check out")
			}
			class := rejectClass(t, v.file)
			se, err := ParseEnvelope(f["raw"])
			if se != nil || !errors.Is(err, class) {
				t.Fatalf("ParseEnvelope: %v, want %v", err, class)
			}
			for _, other := range []error{ErrMalformed, ErrNonCanonical, ErrInvalid} {
				if other != class && errors.Is(err, other) {
					t.Fatalf("error %v is also %v", err, other)
				}
			}
		})
	}
	ents, err := os.ReadDir(rejectDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !want[e.Name()] {
			t.Errorf("stray file %s in %s", e.Name(), rejectDir)
		}
	}
}

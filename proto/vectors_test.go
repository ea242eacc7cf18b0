package proto

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors from the fixed inputs")

// vectorDir holds the known-answer vectors (relative to this package).
const vectorDir = "../testdata/vectors"

type vecField struct {
	name string
	val  []byte
}

// vector is one known-answer vector: named hex fields plus what decoding
// the stored raw bytes must give back.
type vector struct {
	file   string
	title  string
	notes  []string
	fields []vecField

	env  *Envelope         // expected decoding of raw for envelope vectors
	doc  *SignedDoc        // ... for the signed document vector
	hs   *HandshakePayload // ... for the handshake vector
	card *Card             // ... for the agent card vector
	blob blobFrames        // ... for the blob frames vector (unsigned)
}

func (v *vector) get(name string) []byte {
	for _, f := range v.fields {
		if f.name == name {
			return f.val
		}
	}
	return nil
}

// format renders a vector file. The layout is part of what the test
// compares, so keep it stable.
func (v *vector) format() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# meshd known-answer vector: %s\n", v.title)
	b.WriteString("# Generated from fixed inputs by proto/vectors_test.go (go test ./proto -run Vectors -update).\n")
	b.WriteString("# Each field is lowercase hex on one line; docs/PROTOCOL.md, \"Test vectors\", explains them.\n")
	if len(v.notes) > 0 {
		b.WriteString("#\n")
	}
	for _, n := range v.notes {
		fmt.Fprintf(&b, "# %s\n", n)
	}
	b.WriteString("\n")
	for _, f := range v.fields {
		fmt.Fprintf(&b, "%s: %s\n", f.name, hex.EncodeToString(f.val))
	}
	return b.Bytes()
}

// parseVectorFile reads the named hex fields of a vector file.
func parseVectorFile(data []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("line %q is not 'name: hex'", line)
		}
		b, err := hex.DecodeString(val)
		if err != nil {
			return nil, fmt.Errorf("field %s: %v", name, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("field %s twice", name)
		}
		out[name] = b
	}
	return out, sc.Err()
}

func seedOf(k ed25519.PrivateKey) []byte { return k.Seed() }

// envVector signs e with key and records every stage of the result.
func envVector(t testing.TB, file, title string, key ed25519.PrivateKey, e Envelope, notes ...string) vector {
	t.Helper()
	se := mustSign(t, key, &e)
	pub := PubKeyOf(key)
	return vector{
		file: file, title: title, notes: append(describe(&e), notes...), env: &e,
		fields: []vecField{
			{"seed", seedOf(key)},
			{"pubkey", pub[:]},
			{"domain", []byte(DomainEnvelope)},
			{"signed", se.Signed},
			{"signing_input", SigningInput(DomainEnvelope, se.Signed)},
			{"sig", se.Sig[:]},
			{"raw", se.Raw},
		},
	}
}

// describe lists an envelope's inputs in words for the vector's header.
func describe(e *Envelope) []string {
	names := map[PubKey]string{alice: "alice (seed 32 x 0x01)", bob: "bob (seed 32 x 0x02)", carol: "carol (seed 32 x 0x03)"}
	to := e.To.String()
	if e.To.Kind == DestPeer {
		to = "peer " + names[e.To.Peer]
	}
	out := []string{
		fmt.Sprintf("id %s, from %s, to %s", e.ID, names[e.From], to),
		fmt.Sprintf("kind %s (%d), ts %d, ttl_secs %d, sender_seq %d, sender_epoch %s", e.Kind, e.Kind, e.TS, e.TTL, e.Seq, e.Epoch),
	}
	switch {
	case e.Message != nil:
		s := fmt.Sprintf("message: body %q", e.Message.Body)
		if e.Message.InReplyTo != nil {
			s += ", in_reply_to " + e.Message.InReplyTo.String()
		}
		out = append(out, s)
		for _, a := range e.Message.Attachments {
			out = append(out, fmt.Sprintf("  attachment: name %q, size %d, media_type %q, sha256 %s, chunk_root %s", a.Name, a.Size, a.MediaType, a.SHA256, a.ChunkRoot))
		}
	case e.Request != nil:
		r := e.Request
		params := "absent (no key 2)"
		if r.Params != nil {
			js, _ := CBORToJSON(r.Params)
			params = string(js)
		}
		s := fmt.Sprintf("request: request_id %s, intent %q, params %s, hop %d", r.RequestID, r.Intent, params, r.Hop)
		if r.ReplyTo != nil {
			s += ", reply_to " + r.ReplyTo.String()
		}
		out = append(out, s)
	case e.Response != nil:
		js, _ := CBORToJSON(e.Response.Result)
		out = append(out, fmt.Sprintf("response: request_id %s, status %s (%d), result %s", e.Response.RequestID, e.Response.Status, e.Response.Status, js))
	case e.Presence != nil:
		out = append(out, fmt.Sprintf("presence: state %s (%d), seq %d", e.Presence.State, e.Presence.State, e.Presence.Seq))
	case e.HistoryRequest != nil:
		h := e.HistoryRequest
		out = append(out, fmt.Sprintf("history_request: channel_id %s, since_ts %d, max_messages %d, max_bytes %d", h.ChannelID, h.SinceTS, h.MaxMessages, h.MaxBytes))
		for _, m := range h.SinceSeqBySender {
			out = append(out, fmt.Sprintf("  since_seq_by_sender: sender %s, epoch %s, last_seq %d", names[m.Sender], m.Epoch, m.LastSeq))
		}
	case e.HistoryResponse != nil:
		h := e.HistoryResponse
		out = append(out, fmt.Sprintf("history_response: channel_id %s, in_reply_to %s, status %s (%d), %d message(s), more %v",
			h.ChannelID, h.InReplyTo, h.Status, h.Status, len(h.Messages), h.More))
	}
	return out
}

// rosterMember and rosterBody mirror the roster document of
// docs/PROTOCOL.md, only to give the SignedDoc vector a realistic body.
type rosterMember struct {
	Key     PubKey `cbor:"0,keyasint"`
	Role    uint8  `cbor:"1,keyasint"`
	Name    string `cbor:"2,keyasint,omitempty"`
	Archive bool   `cbor:"3,keyasint,omitempty"`
}

type rosterBody struct {
	Org     string         `cbor:"0,keyasint"`
	Version uint64         `cbor:"1,keyasint"`
	TS      int64          `cbor:"2,keyasint"`
	Quorum  uint64         `cbor:"3,keyasint,omitempty"`
	Members []rosterMember `cbor:"4,keyasint"`
}

// buildVectors makes every vector from fixed inputs.
func buildVectors(t testing.TB) []vector {
	t.Helper()
	hdr := func(id byte, from PubKey, to Destination, kind Kind, seq uint64, epoch [16]byte) Envelope {
		return Envelope{ID: idN(id), From: from, To: to, Kind: kind, TS: fixedTS, TTL: DefaultTTL, Seq: seq, Epoch: epoch}
	}
	var vs []vector

	e := hdr(1, alice, ToChannel(chanID), KindMessage, 1, epochA)
	e.Message = &Message{Body: "hello, mesh"}
	chanMsg := envVector(t, "01-message-channel.txt", "channel Message", keyAlice, e)
	vs = append(vs, chanMsg)

	e = hdr(2, bob, ToPeer(alice), KindMessage, 1, epochB)
	e.Message = &Message{Body: "hi alice", InReplyTo: ptr(idN(1))}
	vs = append(vs, envVector(t, "02-message-dm.txt", "direct Message (DM) with in_reply_to", keyBob, e))

	e = hdr(3, alice, ToPeer(bob), KindRequest, 1, epochA)
	e.Request = &Request{RequestID: reqID, Intent: "run-tests", ReplyTo: ptr(parentReq), Hop: 1,
		Params: mustJSON(t, `{"pkg":"./proto","race":true,"count":3,"timeout_s":1.5}`)}
	vs = append(vs, envVector(t, "03-request.txt", "follow-up Request with params", keyAlice, e))

	e = hdr(4, bob, ToPeer(alice), KindResponse, 2, epochB)
	e.Response = &Response{RequestID: reqID, Status: StatusCompleted,
		Result: mustJSON(t, `{"passed":42,"failed":0,"delta":-3,"log":["ok ./proto"]}`)}
	vs = append(vs, envVector(t, "04-response.txt", "Response with result", keyBob, e))

	e = hdr(5, alice, ToOrg("acme"), KindPresence, 1, epochA)
	e.Presence = &Presence{State: Online, Seq: 17}
	vs = append(vs, envVector(t, "05-presence.txt", "Presence", keyAlice, e))

	// HistoryRequests and HistoryResponses are in no stream: sender_seq 0.
	e = hdr(6, alice, ToPeer(bob), KindHistoryRequest, 0, epochA)
	e.HistoryRequest = &HistoryRequest{ChannelID: chanID, SinceTS: fixedTS - 3600_000,
		SinceSeqBySender: []SeqMark{{Sender: bob, Epoch: epochB, LastSeq: 3}, {Sender: carol, Epoch: epochA, LastSeq: 12}},
		MaxMessages:      DefaultHistoryMessages, MaxBytes: MaxHistoryBytes}
	vs = append(vs, envVector(t, "06-history-request.txt", "HistoryRequest", keyAlice, e))

	e = hdr(7, bob, ToPeer(alice), KindHistoryResponse, 0, epochB)
	e.HistoryResponse = &HistoryResponse{ChannelID: chanID, InReplyTo: idN(6), Status: HistoryOK,
		Messages: [][]byte{chanMsg.get("raw")}}
	vs = append(vs, envVector(t, "07-history-response.txt", "HistoryResponse carrying one envelope", keyBob, e,
		"messages[0] is the raw field of 01-message-channel.txt, still signed by alice"))

	// JSON-model keys are exempt from omit-when-zero: a zero value is
	// written, and differs from the absent key.
	e = hdr(10, alice, ToPeer(bob), KindRequest, 2, epochA)
	e.Request = &Request{RequestID: idN(0xa2), Intent: "count", Params: mustJSON(t, `0`)}
	vs = append(vs, envVector(t, "10-request-params-zero.txt", "Request whose params is the zero value 0", keyAlice, e,
		"params 0 is present (key 2, value 00): omit-when-zero does not apply to JSON-model values"))

	e = hdr(11, bob, ToPeer(alice), KindResponse, 3, epochB)
	e.Response = &Response{RequestID: idN(0xa2), Status: StatusCompleted, Result: mustJSON(t, `[]`)}
	vs = append(vs, envVector(t, "11-response-result-empty.txt", "Response whose result is the empty array", keyBob, e,
		"result [] is present (key 2, value 80): omit-when-zero does not apply to JSON-model values"))

	// A SignedDoc signed by two keys under DomainRoster.
	body, err := Marshal(&rosterBody{Org: "acme", Version: 1, TS: fixedTS, Quorum: 2, Members: []rosterMember{
		{Key: bob, Role: 4, Name: "bob"},
		{Key: alice, Role: 4, Name: "alice"},
		{Key: carol, Role: 1, Name: "carol", Archive: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	doc := &SignedDoc{Body: body}
	doc.AddSignature(keyAlice, DomainRoster)
	doc.AddSignature(keyBob, DomainRoster)
	raw, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sigOf := func(k PubKey) []byte {
		for _, s := range doc.Sigs {
			if s.Signer == k {
				return bytes.Clone(s.Sig[:])
			}
		}
		t.Fatal("missing signature")
		return nil
	}
	vs = append(vs, vector{
		file: "08-signed-doc.txt", title: "SignedDoc with two signatures (DomainRoster)", doc: doc,
		notes: []string{
			"signed is the document body: a roster of org \"acme\", version 1, ts 1700000000000, quorum 2,",
			"  members bob (admin, \"bob\"), alice (admin, \"alice\"), carol (observer, \"carol\", archive)",
			"seed/pubkey/sig is alice, seed2/pubkey2/sig2 is bob; raw lists bob's signature first",
			"  because signatures are sorted bytewise by signer key",
		},
		fields: []vecField{
			{"seed", seedOf(keyAlice)},
			{"pubkey", alice[:]},
			{"seed2", seedOf(keyBob)},
			{"pubkey2", bob[:]},
			{"domain", []byte(DomainRoster)},
			{"signed", body},
			{"signing_input", SigningInput(DomainRoster, body)},
			{"sig", sigOf(alice)},
			{"sig2", sigOf(bob)},
			{"raw", raw},
		},
	})

	// A handshake payload binding a fixed Noise static key.
	hs := &HandshakePayload{Version: ProtocolVersion, Org: "acme", RosterVersion: 1,
		Listen: []string{"tcp://192.0.2.10:7946"}, PolicyDigest: bytes.Repeat([]byte{0xd1}, 32), Name: "alice"}
	hs.BindStatic(keyAlice, fixedStatic)
	raw, err = hs.Encode()
	if err != nil {
		t.Fatal(err)
	}
	vs = append(vs, vector{
		file: "09-handshake.txt", title: "HandshakePayload binding a Noise static key", hs: hs,
		notes: []string{
			"signed is the 32-byte Noise static public key (32 x 0x5a); sig is static_sig",
			"payload: version 1, identity alice, org \"acme\", roster_version 1,",
			"  listen [\"tcp://192.0.2.10:7946\"], policy_digest 32 x 0xd1, name \"alice\"",
			"prologue is the Noise prologue for org \"acme\"",
		},
		fields: []vecField{
			{"seed", seedOf(keyAlice)},
			{"pubkey", alice[:]},
			{"domain", []byte(DomainNoiseStatic)},
			{"signed", fixedStatic},
			{"signing_input", SigningInput(DomainNoiseStatic, fixedStatic)},
			{"sig", hs.StaticSig[:]},
			{"prologue", Prologue("acme")},
			{"raw", raw},
		},
	})

	// A payload announcing one address outside the §12.2 grammar: it is
	// valid, and the receiver keeps only the other address.
	hs2 := &HandshakePayload{Version: ProtocolVersion, Org: "acme", RosterVersion: 1,
		Listen: []string{"quic://192.0.2.10:7946", "tcp://192.0.2.10:7946"}, Name: "alice"}
	hs2.BindStatic(keyAlice, fixedStatic)
	raw, err = hs2.Encode()
	if err != nil {
		t.Fatal(err)
	}
	kept := *hs2
	kept.Listen, kept.IgnoredListen = []string{"tcp://192.0.2.10:7946"}, 1
	vs = append(vs, vector{
		file: "12-handshake-unusable-listen.txt", title: "HandshakePayload announcing an unusable listen address", hs: &kept,
		notes: []string{
			"as 09, but listen [\"quic://192.0.2.10:7946\", \"tcp://192.0.2.10:7946\"] and no policy_digest",
			"the payload is valid: the receiver skips the quic:// address (outside the grammar of",
			"  PROTOCOL.md 12.2) and keeps listen [\"tcp://192.0.2.10:7946\"]",
		},
		fields: []vecField{
			{"seed", seedOf(keyAlice)},
			{"pubkey", alice[:]},
			{"domain", []byte(DomainNoiseStatic)},
			{"signed", fixedStatic},
			{"signing_input", SigningInput(DomainNoiseStatic, fixedStatic)},
			{"sig", hs2.StaticSig[:]},
			{"prologue", Prologue("acme")},
			{"raw", raw},
		},
	})

	// A joiner's payload presenting an invite (PROTOCOL.md 14.9).
	hs3 := &HandshakePayload{Version: ProtocolVersion, Org: "acme", Name: "dave",
		Invite: &InviteProof{ID: bytes.Repeat([]byte{0x1d}, InviteIDLen), Secret: bytes.Repeat([]byte{0x5e}, InviteSecretLen)}}
	hs3.BindStatic(keyBob, fixedStatic)
	raw, err = hs3.Encode()
	if err != nil {
		t.Fatal(err)
	}
	vs = append(vs, vector{
		file: "13-handshake-invite.txt", title: "HandshakePayload of a joiner presenting an invite", hs: hs3,
		notes: []string{
			"the identity is bob's key, not yet a member: roster_version 0, no listen, name \"dave\"",
			"invite: id 8 x 0x1d, secret 32 x 0x5e (sent only in handshake message 3)",
		},
		fields: []vecField{
			{"seed", seedOf(keyBob)},
			{"pubkey", bob[:]},
			{"domain", []byte(DomainNoiseStatic)},
			{"signed", fixedStatic},
			{"signing_input", SigningInput(DomainNoiseStatic, fixedStatic)},
			{"sig", hs3.StaticSig[:]},
			{"prologue", Prologue("acme")},
			{"raw", raw},
		},
	})
	return append(vs, cardVector(t), progressVector(t), knockVector(t), presenceNoteVector(t), attachVector(t), blobFramesVector(t))
}

func TestVectors(t *testing.T) {
	vs := buildVectors(t)
	if *update {
		if err := os.MkdirAll(vectorDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if err := os.WriteFile(filepath.Join(vectorDir, v.file), v.format(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	kinds := map[Kind]bool{}
	for _, v := range vs {
		t.Run(strings.TrimSuffix(v.file, ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(vectorDir, v.file))
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			// 1. Regenerating from the fixed inputs gives the stored file
			// byte for byte: any change to an encoding rule, a domain or
			// a key derivation fails here.
			if want := v.format(); !bytes.Equal(data, want) {
				stored, _ := parseVectorFile(data)
				for _, f := range v.fields {
					if !bytes.Equal(stored[f.name], f.val) {
						t.Errorf("field %s:\nstored    %x\ngenerated %x", f.name, stored[f.name], f.val)
					}
				}
				t.Fatalf("%s differs from what the fixed inputs generate", v.file)
			}
			// 2. The stored bytes check out on their own.
			f, err := parseVectorFile(data)
			if err != nil {
				t.Fatal(err)
			}
			checkStoredVector(t, &v, f)
			if v.env != nil {
				kinds[v.env.Kind] = true
			}
		})
	}
	for k := KindMessage; k <= KindHistoryResponse; k++ {
		if !kinds[k] {
			t.Errorf("no vector covers kind %s", k)
		}
	}
}

// checkStoredVector verifies a stored vector's fields against each other
// with the stdlib alone, then parses raw with this package.
func checkStoredVector(t *testing.T, v *vector, f map[string][]byte) {
	t.Helper()
	if v.blob != nil {
		checkBlobFramesVector(t, v, f)
		return
	}
	key := ed25519.NewKeyFromSeed(f["seed"])
	if !bytes.Equal(key.Public().(ed25519.PublicKey), f["pubkey"]) {
		t.Fatal("pubkey is not the key of seed")
	}
	if !bytes.Equal(f["signing_input"], append(bytes.Clone(f["domain"]), f["signed"]...)) {
		t.Fatal("signing_input is not domain || signed")
	}
	if !ed25519.Verify(f["pubkey"], f["signing_input"], f["sig"]) {
		t.Fatal("sig does not verify over signing_input")
	}
	if !bytes.Equal(ed25519.Sign(key, f["signing_input"]), f["sig"]) {
		t.Fatal("sig is not the deterministic Ed25519 signature")
	}
	raw := f["raw"]
	switch {
	case v.env != nil:
		se, err := ParseEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := se.Verify(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(se.Signed, f["signed"]) || !bytes.Equal(se.Sig[:], f["sig"]) || !bytes.Equal(se.From[:], f["pubkey"]) {
			t.Fatal("raw does not carry signed, sig and pubkey")
		}
		if !reflect.DeepEqual(&se.Envelope, v.env) {
			t.Fatalf("raw decodes to\n %+v\nwant\n %+v", se.Envelope, *v.env)
		}
		if v.env.HistoryResponse != nil {
			for _, m := range se.HistoryResponse.Messages {
				in, err := ParseEnvelope(m)
				if err != nil {
					t.Fatal(err)
				}
				if err := in.Verify(); err != nil {
					t.Fatal(err)
				}
			}
		}
	case v.doc != nil:
		d, err := ParseSignedDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Body, f["signed"]) {
			t.Fatal("raw does not carry the body")
		}
		signers, err := d.ValidSigners(DomainRoster)
		if err != nil {
			t.Fatal(err)
		}
		want := []PubKey{PubKey(f["pubkey"]), PubKey(f["pubkey2"])}
		slices.SortFunc(want, func(a, b PubKey) int { return bytes.Compare(a[:], b[:]) })
		if !reflect.DeepEqual(signers, want) {
			t.Fatalf("signers %v, want %v", signers, want)
		}
		key2 := ed25519.NewKeyFromSeed(f["seed2"])
		if !bytes.Equal(key2.Public().(ed25519.PublicKey), f["pubkey2"]) || !ed25519.Verify(f["pubkey2"], f["signing_input"], f["sig2"]) {
			t.Fatal("second signature does not check out")
		}
		if !reflect.DeepEqual(d, v.doc) {
			t.Fatal("raw decodes to another document")
		}
	case v.hs != nil:
		p, err := ParseHandshakePayload(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.VerifyStatic(f["signed"]); err != nil {
			t.Fatal(err)
		}
		wantPrologue := Prologue(p.Org)
		if f["marker"] != nil {
			wantPrologue = KnockPrologue()
			if !bytes.Equal(f["marker"], KnockMarker) || !bytes.Equal(f["fresh"], p.Fresh) {
				t.Fatal("knock marker or fresh roster")
			}
		}
		if !bytes.Equal(f["prologue"], wantPrologue) {
			t.Fatal("prologue")
		}
		if !reflect.DeepEqual(p, v.hs) {
			t.Fatalf("raw decodes to %+v", p)
		}
	case v.card != nil:
		checkCardVector(t, v, f)
	default:
		t.Fatal("vector has no expected value")
	}
}

// TestVectorsNoStrays fails when testdata/vectors holds a file that no
// vector generates (a renamed or dropped vector).
func TestVectorsNoStrays(t *testing.T) {
	want := map[string]bool{}
	for _, v := range buildVectors(t) {
		want[v.file] = true
	}
	ents, err := os.ReadDir(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && e.Name() == "reject" {
			continue // TestRejectVectors checks it
		}
		if !want[e.Name()] {
			t.Errorf("stray file %s in %s", e.Name(), vectorDir)
		}
	}
}

// TestVectorsInProtocolDoc checks that the vector reproduced in
// docs/PROTOCOL.md is the stored one.
func TestVectorsInProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	v := buildVectors(t)[0]
	for _, f := range v.fields {
		line := fmt.Sprintf("%s: %s\n", f.name, hex.EncodeToString(f.val))
		if !bytes.Contains(doc, []byte(line)) {
			t.Errorf("docs/PROTOCOL.md lacks the line %q of %s", strings.TrimSpace(line)[:min(40, len(line)-1)]+"...", v.file)
		}
	}
}

package proto

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

// attachVector is the known-answer vector of a DM listing two attachments
// (§6.8): a two-chunk file, so its chunk root is over two chunk hashes,
// and an empty one.
func attachVector(t testing.TB) vector {
	t.Helper()
	patch, _ := attachmentOf(t, "fix.patch", "text/x-diff", bytes.Repeat([]byte("+ok\n"), ChunkSize/4+1))
	empty, _ := attachmentOf(t, "empty.log", "text/plain", nil)
	e := Envelope{ID: idN(0x18), From: alice, To: ToPeer(bob), Kind: KindMessage, TS: fixedTS, TTL: DefaultTTL, Seq: 3, Epoch: epochA}
	e.Message = &Message{Body: "please review", Attachments: []Attachment{patch, empty}}
	return envVector(t, "18-message-attachments.txt", "direct Message with two attachments", keyAlice, e,
		"attachments[0]: name \"fix.patch\", size 262148 (\"+ok\\n\" x 65537: two chunks of 262144 and 4 bytes),",
		"  media_type \"text/x-diff\", sha256 of the content, chunk_root = SHA-256(SHA-256(chunk 0) || SHA-256(chunk 1))",
		"attachments[1]: name \"empty.log\", size 0, media_type \"text/plain\", sha256 and chunk_root both SHA-256 of nothing")
}

func attachmentOf(t testing.TB, name, mt string, content []byte) (Attachment, []Hash) {
	t.Helper()
	size, sum, root, chunks, err := Digest(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return Attachment{Name: name, Size: size, MediaType: mt, SHA256: sum, ChunkRoot: root}, chunks
}

// TestDigestChunks: the chunk hashes cover ChunkSize pieces, the last one
// short, and the root is over their concatenation.
func TestDigestChunks(t *testing.T) {
	content := bytes.Repeat([]byte{7}, 2*ChunkSize+5)
	a, chunks := attachmentOf(t, "x", "application/octet-stream", content)
	if len(chunks) != 3 || a.Chunks() != 3 || ChunkLen(a.Size, 2) != 5 || ChunkLen(a.Size, 3) != 0 {
		t.Fatalf("chunks %d, count %d, last len %d", len(chunks), a.Chunks(), ChunkLen(a.Size, 2))
	}
	if chunks[2] != sha256.Sum256(content[2*ChunkSize:]) {
		t.Error("last chunk hash")
	}
	var cat []byte
	for _, c := range chunks {
		cat = append(cat, c[:]...)
	}
	if a.ChunkRoot != sha256.Sum256(cat) || a.SHA256 != sha256.Sum256(content) {
		t.Error("root or sum")
	}
	e, _ := attachmentOf(t, "e", "text/plain", nil)
	if e.Size != 0 || e.Chunks() != 0 || e.SHA256 != sha256.Sum256(nil) || e.ChunkRoot != sha256.Sum256(nil) {
		t.Errorf("empty blob: %+v", e)
	}
}

// TestAttachmentRules: names are file names, media types type/subtype,
// at most MaxAttachments with distinct names, each within the wire size.
func TestAttachmentRules(t *testing.T) {
	ok, _ := attachmentOf(t, "a.txt", "text/plain", []byte("x"))
	with := func(f func(a *Attachment)) []Attachment {
		a := ok
		f(&a)
		return []Attachment{a}
	}
	for _, c := range []struct {
		name string
		as   []Attachment
		ok   bool
	}{
		{"plain", []Attachment{ok}, true},
		{"unicode name", with(func(a *Attachment) { a.Name = "résumé v2.pdf" }), true},
		{"255 bytes", with(func(a *Attachment) { a.Name = strings.Repeat("n", 255) }), true},
		{"256 bytes", with(func(a *Attachment) { a.Name = strings.Repeat("n", 256) }), false},
		{"empty name", with(func(a *Attachment) { a.Name = "" }), false},
		{"slash", with(func(a *Attachment) { a.Name = "../etc/passwd" }), false},
		{"backslash", with(func(a *Attachment) { a.Name = `..\x` }), false},
		{"dot", with(func(a *Attachment) { a.Name = "." }), false},
		{"dotdot", with(func(a *Attachment) { a.Name = ".." }), false},
		{"newline", with(func(a *Attachment) { a.Name = "a\nb" }), false},
		{"nul", with(func(a *Attachment) { a.Name = "a\x00b" }), false},
		{"bidi", with(func(a *Attachment) { a.Name = "txt.\u202eexe" }), false},
		{"no subtype", with(func(a *Attachment) { a.MediaType = "text" }), false},
		{"params", with(func(a *Attachment) { a.MediaType = "text/plain; charset=utf-8" }), false},
		{"empty type", with(func(a *Attachment) { a.MediaType = "" }), false},
		{"vendor type", with(func(a *Attachment) { a.MediaType = "application/vnd.meshd+json" }), true},
		{"max size", with(func(a *Attachment) { a.Size = MaxAttachmentSize }), true},
		{"over size", with(func(a *Attachment) { a.Size = MaxAttachmentSize + 1 }), false},
		{"duplicate", []Attachment{ok, ok}, false},
		{"too many", func() []Attachment {
			var as []Attachment
			for i := range MaxAttachments + 1 {
				a := ok
				a.Name = strings.Repeat("x", i+1)
				as = append(as, a)
			}
			return as
		}(), false},
	} {
		err := checkAttachments(c.as)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !errors.Is(err, ErrAttachment)) {
			t.Errorf("%s: %v is not ErrInvalid and ErrAttachment", c.name, err)
		}
	}
}

// TestAttachmentsOnEveryKind: a Message, Request and Response each carry
// a list, which round-trips; without attachments the payload keeps the
// keys older nodes know.
func TestAttachmentsOnEveryKind(t *testing.T) {
	a, _ := attachmentOf(t, "log.txt", "text/plain", []byte("FAIL"))
	for _, e := range []Envelope{
		{Kind: KindMessage, To: ToChannel(chanID), Message: &Message{Body: "b", Attachments: []Attachment{a}}},
		{Kind: KindRequest, To: ToPeer(bob), Request: &Request{RequestID: reqID, Intent: "review", Attachments: []Attachment{a}}},
		{Kind: KindResponse, To: ToPeer(bob), Response: &Response{RequestID: reqID, Status: StatusCompleted, Attachments: []Attachment{a}}},
	} {
		e.ID, e.From, e.TS, e.TTL, e.Seq, e.Epoch = idN(0x30), alice, fixedTS, DefaultTTL, 1, epochA
		se := mustSign(t, keyAlice, &e)
		got, err := ParseEnvelope(se.Raw)
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if as := got.Attachments(); len(as) != 1 || as[0] != a {
			t.Errorf("%s: attachments %+v", e.Kind, as)
		}
	}
	b, _ := Marshal(&Response{RequestID: reqID, Status: StatusCompleted})
	if b[0] != 0xa2 {
		t.Errorf("response without attachments encodes as % x", b)
	}
}

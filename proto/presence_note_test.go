package proto

import (
	"errors"
	"strings"
	"testing"
)

// presenceNoteVector is the known-answer vector of a Presence with a
// note (§6.4), as a presence-note frame carries it (§14.7).
func presenceNoteVector(t testing.TB) vector {
	t.Helper()
	e := Envelope{ID: idN(16), From: alice, To: ToOrg("acme"), Kind: KindPresence, TS: fixedTS, TTL: DefaultTTL, Seq: 2, Epoch: epochA}
	e.Presence = &Presence{State: Online, Seq: 18, Note: "running tests on main"}
	return envVector(t, "17-presence-note.txt", "Presence with a note", keyAlice, e,
		"presence: state online (1), seq 18, note \"running tests on main\" (key 2); sent only in a presence-note frame (type 11)")
}

// TestPresenceNoteRules: a note is at most 256 bytes on one line, with no
// control characters; the empty note is no note, and is never encoded.
func TestPresenceNoteRules(t *testing.T) {
	for _, c := range []struct {
		note string
		ok   bool
	}{
		{"", true},
		{"running tests on main", true},
		{strings.Repeat("é", 128), true}, // 256 bytes
		{strings.Repeat("x", 257), false},
		{"two\nlines", false},
		{"tab\there", false},
		{"esc\x1b[31m", false},
		{"line\u2028sep", false},
		{"bidi\u202eoverride", false},
		{"bad \xff utf-8", false},
	} {
		err := (&Presence{State: Away, Seq: 1, Note: c.note}).validate()
		if (err == nil) != c.ok {
			t.Errorf("note %q: err %v, want ok %v", c.note, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !errors.Is(err, ErrPresenceNote)) {
			t.Errorf("note %q: %v is not ErrInvalid and ErrPresenceNote", c.note, err)
		}
	}
	// No note: the wire form is the two-key map of older nodes.
	b, err := Marshal(&Presence{State: Online, Seq: 17})
	if err != nil {
		t.Fatal(err)
	}
	if got := b; len(got) != 5 || got[0] != 0xa2 {
		t.Fatalf("presence without a note encodes as % x, want a two-key map", got)
	}
}

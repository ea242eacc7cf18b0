package mailbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseReadFile: a "Kind: read" file lists Message-IDs, one a line,
// skipping blanks and comments; anything else in it is refused, saying
// what.
func TestParseReadFile(t *testing.T) {
	const a, b = "01a1fe40-8b6f-7607-895e-1540d393bec2", "01a1fe40-8b6f-7607-895e-1540d393bec3"
	m, err := ParseOutgoing([]byte("kind: READ\n---\n" + a + "\n\n# done\n  " + b + "  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Read) != 2 || m.Read[0].String() != a || m.Read[1].String() != b || m.Kind != 0 {
		t.Fatalf("parsed %+v", m)
	}
	many := strings.Repeat(a+"\n", MaxReadIDs+1)
	for _, c := range []struct{ file, want string }{
		{"Kind: read\n---\n", "lists no Message-ID"},
		{"Kind: read\n---\nnope\n", `body line 1: "nope" is not a Message-ID`},
		{"Kind: read\n---\n00000000-0000-0000-0000-000000000000\n", "is not a Message-ID"},
		{"To: @bob\nKind: read\n---\n" + a + "\n", "the one header Kind: read"},
		{"Kind: read\nIntent: x\n---\n" + a + "\n", "the one header Kind: read"},
		{"Kind: read\n---\n" + many, fmt.Sprintf("more than %d ids", MaxReadIDs)},
		{"Kind: reed\n---\n" + a + "\n", "want message, request, response or read"},
	} {
		_, err := ParseOutgoing([]byte(c.file))
		if err == nil || !errors.Is(err, ErrBadOutgoing) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file[:min(len(c.file), 60)], err, c.want)
		}
	}
}

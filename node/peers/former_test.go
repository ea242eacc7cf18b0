package peers

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// TestFormerMembersPersist: a member a roster update drops is remembered
// across a reload of the file, and forgotten once added back.
func TestFormerMembersPersist(t *testing.T) {
	key := func() proto.PubKey { pub, _, _ := ed25519.GenerateKey(nil); return proto.PubKey(pub) }
	a, b := key(), key()
	both := &roster.Roster{Members: []roster.Member{{Key: a}, {Key: b}}}
	onlyA := &roster.Roster{Members: []roster.Member{{Key: a}}}
	path := filepath.Join(t.TempDir(), FormerMembersFile)
	f, err := LoadFormerMembers(path)
	if err != nil || f.Has(b) {
		t.Fatalf("fresh set: %v, has b %v", err, f.Has(b))
	}
	if err := f.NoteRemoved(both, onlyA); err != nil {
		t.Fatal(err)
	}
	g, err := LoadFormerMembers(path)
	if err != nil || !g.Has(b) || g.Has(a) {
		t.Fatalf("reloaded: %v, has b %v, has a %v", err, g.Has(b), g.Has(a))
	}
	if err := g.NoteRemoved(onlyA, both); err != nil || g.Has(b) {
		t.Fatalf("added back: %v, has b %v", err, g.Has(b))
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Fatalf("file after b came back: %q %v", b, err)
	}
	var none *FormerMembers
	if none.Has(a) {
		t.Fatal("a nil set holds a key")
	}
}

package rostergossip

import (
	"crypto/ed25519"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// TestNameIndexFollowsRoster checks that the keeper's name index answers
// for the roster it is asked about: "c", no member's name in v1, is
// unique once v2 adds a member named c, and asking about v1 again answers
// for v1.
func TestNameIndexFollowsRoster(t *testing.T) {
	g := newRig(t)
	if !g.k.NameIndex(g.v1).Unique("b") || g.k.NameIndex(g.v1).Unique("c") {
		t.Fatal(`v1 holds b and no c`)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	v2 := g.next(t, g.v1, func(r *roster.Roster) error {
		return r.Add(roster.Member{Key: proto.PubKeyOf(other), Name: "c", Role: roster.RoleMember})
	})
	if !g.k.NameIndex(v2).Unique("c") {
		t.Fatal(`v2 holds one c, reported not unique`)
	}
	if g.k.NameIndex(g.v1).Unique("c") {
		t.Fatal("the index of v1 was not rebuilt when asked about v1 again")
	}
}

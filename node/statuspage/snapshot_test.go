package statuspage

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

func TestStateSnapshot(t *testing.T) {
	_, hs := newTestServer(t, newFakeSource(), Config{})
	_, body := do(t, http.MethodGet, hs.URL+"/api/state", nil)
	var snap Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Self.Name != "alice" || len(snap.Peers) != 1 || len(snap.Roster.Members) != 4 ||
		len(snap.Channels) != 1 || snap.Time.IsZero() {
		t.Fatalf("snapshot %+v", snap)
	}
	if len(snap.Cards) != 1 || snap.Cards[0].Name != "bob" || snap.Cards[0].Intents[0].Name != "run-tests" {
		t.Fatalf("snapshot cards %+v", snap.Cards)
	}
	if len(snap.Graph.Nodes) != 4 || !snap.Graph.Nodes[0].Self || len(snap.Graph.Edges) != 2 {
		t.Fatalf("graph %+v", snap.Graph)
	}
}

func TestBuildGraph(t *testing.T) {
	f := newFakeSource()
	stranger := proto.PubKey{9}
	reports := map[proto.PubKey][]proto.PubKey{
		keyBob:   {keyCarol, keySelf, stranger, keyBob}, // self: already a link; stranger: not a member
		keyCarol: {keyBob},                              // the same pair again
		stranger: {keyDave},                             // from a non-member: ignored
	}
	g := buildGraph(f.StatusInfo(), f.RosterInfo(), f.PeerList(), f.PresenceTable(), reports)
	var names []string
	for _, n := range g.Nodes {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "alice,bob,carol,dave" {
		t.Fatalf("nodes %v: want this node first, then by name", names)
	}
	if !g.Nodes[1].Linked || g.Nodes[1].Presence != "away" || g.Nodes[2].Linked || g.Nodes[0].Presence != "online" {
		t.Fatalf("node flags %+v", g.Nodes)
	}
	if len(g.Edges) != 2 {
		t.Fatalf("edges %+v, want alice-bob (link) and bob-carol (reported)", g.Edges)
	}
	link, rep := g.Edges[0], g.Edges[1]
	if link.Kind != EdgeLink || link.Network != "tcp" || !sameEdge(link, keySelf, keyBob) {
		t.Errorf("link edge %+v", link)
	}
	if rep.Kind != EdgeReported || !sameEdge(rep, keyBob, keyCarol) {
		t.Errorf("reported edge %+v", rep)
	}
}

func sameEdge(e GraphEdge, a, b proto.PubKey) bool {
	return e.A.Equal(a) && e.B.Equal(b) || e.A.Equal(b) && e.B.Equal(a)
}

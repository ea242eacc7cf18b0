package node

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// signedCard signs c with key as a member would.
func signedCard(t *testing.T, c *proto.Card, key ed25519.PrivateKey) []byte {
	t.Helper()
	if err := proto.SignCard(c, key); err != nil {
		t.Fatal(err)
	}
	return c.Raw
}

// TestCardSpreadsPersistsAndClears: a card set on a reaches b within
// seconds, survives b's restart, and a cleared card replaces it.
func TestCardSpreadsPersistsAndClears(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	in := api.CardInput{Description: "CI runner", Tags: []string{"ci"}, Intents: []api.CardIntent{
		{Name: "run-tests", Summary: "go test", ParamsSchema: []byte(`{"type":"object"}`)}}}
	set, err := a.cards.SetCard(in)
	if err != nil {
		t.Fatal(err)
	}
	// The card and a's presence are separate envelopes: wait for both.
	waitFor(t, 5*time.Second, "card at b, a online", func() bool {
		c, err := b.cards.CardOf(m.ids[0].Pub.String())
		return err == nil && c.Version == set.Version && c.Presence == "online"
	})
	cs := b.cards.CardList("run-tests")
	if len(cs.Cards) != 1 || cs.Cards[0].Name != "a" || string(cs.Cards[0].Intents[0].ParamsSchema) != `{"type":"object"}` || cs.Cards[0].Presence != "online" {
		t.Fatalf("b's cards for run-tests: %+v", cs)
	}
	if got := b.cards.CardList("deploy"); len(got.Cards) != 0 {
		t.Fatalf("cards for deploy: %+v", got)
	}
	if _, err := b.cards.CardOf(""); err == nil {
		t.Fatal("b publishes no card, yet CardOf(\"\") answered")
	}

	// Clearing publishes a newer, empty card; it drops out of the list.
	cl, err := a.cards.ClearCard()
	if err != nil || !cl.Cleared || cl.Version <= set.Version {
		t.Fatalf("clear: %+v %v", cl, err)
	}
	waitFor(t, 5*time.Second, "cleared card at b", func() bool {
		c, err := b.cards.CardOf("a")
		return err == nil && c.Cleared
	})
	if got := b.cards.CardList(""); len(got.Cards) != 0 {
		t.Fatalf("cleared card still listed: %+v", got)
	}

	// A restart keeps the card (a is stopped first, so that nothing
	// dials b while it starts).
	a.Close()
	b.Close()
	b = m.start(1)
	if c, err := b.cards.CardOf("a"); err != nil || c.Version != cl.Version || !c.Cleared {
		t.Fatalf("after restart: %+v %v", c, err)
	}
	// Bad input from the operator is refused with the rule it breaks.
	if _, err := b.cards.SetCard(api.CardInput{Tags: []string{"x", "x"}}); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("duplicate tag: %v", err)
	}
	if _, err := b.cards.SetCard(api.CardInput{Intents: []api.CardIntent{{Name: "x", ParamsSchema: []byte(`[1]`)}}}); err == nil || !strings.Contains(err.Error(), "not an object") {
		t.Fatalf("array schema: %v", err)
	}
}

// TestCardReceiveChecks: each check of §19.3 refuses its card, counts it
// under card.rejected.<reason>, and leaves the held card as it was.
func TestCardReceiveChecks(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	var pl *peers.Link
	waitFor(t, 5*time.Second, "b's link to a", func() bool { pl = b.peers.Linked(m.ids[0].Pub); return pl != nil })
	frame := func(raw []byte) []byte { return append([]byte{byte(proto.FrameCard)}, raw...) }
	good := &proto.Card{Version: 100, Description: "v100", Intents: []proto.CardIntent{{Name: "run-tests"}}}
	b.handleFrame(pl, frame(signedCard(t, good, m.ids[0].Key)))
	if cardVersion(b, m.ids[0].Pub) != 100 || b.metrics.Get("card.accepted") != 1 {
		t.Fatalf("good card not taken: version %d", cardVersion(b, m.ids[0].Pub))
	}

	_, outsider, _ := ed25519.GenerateKey(nil)
	tampered := signedCard(t, &proto.Card{Version: 200, Description: "tampered"}, m.ids[0].Key)
	tampered[len(tampered)-1] ^= 1
	body, err := proto.Marshal(&proto.Card{Key: m.ids[1].Pub, Version: 300, Intents: []proto.CardIntent{}, Tags: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	doc := &proto.SignedDoc{Body: body}
	doc.AddSignature(m.ids[0].Key, proto.DomainCard)
	aboutOther, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	valid := signedCard(t, &proto.Card{Version: 400}, m.ids[0].Key)
	twoSigs := &proto.SignedDoc{Body: body}
	twoSigs.AddSignature(m.ids[1].Key, proto.DomainCard)
	twoSigs.AddSignature(m.ids[0].Key, proto.DomainCard)
	twoRaw, err := twoSigs.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		reason cards.Reason
		raw    []byte
	}{
		{"bad signature", cards.BadSignature, tampered},
		{"non-member", cards.NotMember, signedCard(t, &proto.Card{Version: 500}, outsider)},
		{"about someone else", cards.NotSelf, aboutOther},
		{"older version", cards.Stale, signedCard(t, &proto.Card{Version: 99}, m.ids[0].Key)},
		{"equal version", cards.Stale, signedCard(t, &proto.Card{Version: 100, Description: "other"}, m.ids[0].Key)},
		{"oversized", cards.TooLarge, make([]byte, proto.MaxCardSize+1)},
		{"malformed CBOR", cards.Malformed, []byte{0xff, 0x00}},
		{"non-canonical", cards.NonCanonical, append([]byte{0xb9, 0x00, 0x02}, valid[1:]...)},
		{"two signatures", cards.Invalid, twoRaw},
	}
	for _, tc := range cases {
		before := b.metrics.Get("card.rejected." + string(tc.reason))
		b.handleFrame(pl, frame(tc.raw))
		if got := b.metrics.Get("card.rejected." + string(tc.reason)); got != before+1 {
			t.Errorf("%s: card.rejected.%s %d, want %d", tc.name, tc.reason, got, before+1)
		}
		if c := b.cards.Held(m.ids[0].Pub); c == nil || c.Version != 100 || c.Description != "v100" {
			t.Errorf("%s changed the held card: %+v", tc.name, c)
		}
		if b.cards.Held(m.ids[1].Pub) != nil {
			t.Errorf("%s: a card about b was taken", tc.name)
		}
	}
	if got := b.metrics.Get("card.accepted"); got != 1 {
		t.Errorf("card.accepted %d after the refusals", got)
	}

	// A corrupt file in the home is skipped at start, and counted.
	a.Close()
	b.Close()
	bad := filepath.Join(m.home(1), cards.Dir, strings.Repeat("00", 32)+".card")
	if err := os.WriteFile(bad, []byte{0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	b = m.start(1)
	if b.metrics.Get("card.load_failed") != 1 || cardVersion(b, m.ids[0].Pub) != 100 {
		t.Fatalf("restart with a corrupt card file: load_failed %d, a's version %d", b.metrics.Get("card.load_failed"), cardVersion(b, m.ids[0].Pub))
	}
}

// bigCard returns a card of about MaxCardSize bytes, at version v.
func bigCard(v uint64) *proto.Card {
	c := &proto.Card{Version: v, Description: strings.Repeat("d", proto.MaxCardDescription)}
	for i := range proto.MaxCardIntents {
		c.Intents = append(c.Intents, proto.CardIntent{Name: fmt.Sprintf("intent-%02d-%s", i, strings.Repeat("n", 90)),
			Summary: strings.Repeat("s", 100)})
	}
	return c
}

// TestCardFloodPaced: a member streaming new versions of its card, each
// near MaxCardSize, gets at most one taken per second: the rest are held
// back, the newest of them taken when the second has passed, so a flood
// costs a signature check per card, not a durable write and a frame on
// every link.
func TestCardFloodPaced(t *testing.T) {
	t.Parallel()
	m, _, b := linkedPair(t)
	var pl *peers.Link
	waitFor(t, 5*time.Second, "b's link to a", func() bool { pl = b.peers.Linked(m.ids[0].Pub); return pl != nil })
	const n = 2000
	frames := make([][]byte, n)
	size := 0
	for i := range frames {
		raw := signedCard(t, bigCard(uint64(1000+i)), m.ids[0].Key)
		size = len(raw)
		frames[i] = append([]byte{byte(proto.FrameCard)}, raw...)
	}
	if size > proto.MaxCardSize || size < proto.MaxCardSize*3/4 {
		t.Fatalf("card of %d bytes", size)
	}
	start := time.Now()
	for _, f := range frames {
		b.handleFrame(pl, f)
	}
	sent := time.Since(start)
	accepted := b.metrics.Get("card.accepted")
	paced := b.metrics.Get("card.paced")
	took := time.Since(start) // until the counters were read
	// One card taken at once, then at most one a second while they came,
	// and one more for a boundary the timer of a loaded machine crossed
	// late. (A held-back card that is taken later counts in both.)
	if most := uint64(took/cards.Interval) + 3; accepted > most || paced < n-most {
		t.Fatalf("%d cards sent in %v (counted at %v): %d accepted, %d held back", n, sent, took, accepted, paced)
	}
	waitFor(t, 3*time.Second, "the newest card", func() bool { return cardVersion(b, m.ids[0].Pub) == 1000+n-1 })
	t.Logf("%d cards of %d bytes in %v (%.0f µs each): %d written and sent on, %d held back; the newest taken %v after the first",
		n, size, sent, float64(sent.Microseconds())/n, b.metrics.Get("card.accepted"), paced, time.Since(start).Round(time.Millisecond))
}

// cardVersion returns the version of the card n holds of k, or 0.
func cardVersion(n *Node, k proto.PubKey) uint64 {
	if c := n.cards.Held(k); c != nil {
		return c.Version
	}
	return 0
}

package promexport_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/promexport"
	"github.com/meshd/meshd/node/status"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// org is a set of homes sharing one roster: a is the admin, b and c are
// members. Nodes run for a and b; c's identity only holds a raw link.
type org struct {
	t      *testing.T
	dir    string
	ids    map[string]home.Identity
	roster *roster.Roster
}

func newOrg(t *testing.T, names ...string) *org {
	t.Helper()
	o := &org{t: t, dir: t.TempDir(), ids: map[string]home.Identity{}}
	for _, name := range names {
		id, _, err := home.Home{Dir: o.home(name)}.Init(name)
		if err != nil {
			t.Fatal(err)
		}
		o.ids[name] = id
	}
	admin := o.ids[names[0]]
	r, err := roster.New("acme", admin.Key, admin.Name)
	if err != nil {
		t.Fatal(err)
	}
	next := r.Next()
	for _, name := range names[1:] {
		if err := next.Add(roster.Member{Key: o.ids[name].Pub, Role: roster.RoleMember, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := next.Sign(admin.Key); err != nil {
		t.Fatal(err)
	}
	o.roster = next
	for _, name := range names {
		if err := (home.Home{Dir: o.home(name)}).SaveRoster(next); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func (o *org) home(name string) string { return filepath.Join(o.dir, name) }

func (o *org) start(name string, seeds ...transport.Addr) *node.Node {
	o.t.Helper()
	cfg := node.DefaultConfig()
	cfg.Home = o.home(name)
	cfg.MDNS = false
	cfg.NoUnixListener = true
	cfg.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
	cfg.Seeds = seeds
	cfg.DialBackoffMin = 50 * time.Millisecond
	cfg.DialBackoffMax = 500 * time.Millisecond
	n, err := node.New(cfg)
	if err != nil {
		o.t.Fatalf("start %s: %v", name, err)
	}
	o.t.Cleanup(func() { n.Close() })
	return n
}

func tcpAddr(t testing.TB, n *node.Node) transport.Addr {
	t.Helper()
	for _, s := range n.ListenAddrs() {
		if a, err := transport.ParseAddr(s); err == nil && a.Network == "tcp" {
			return a
		}
	}
	t.Fatal("node has no tcp listener")
	return transport.Addr{}
}

func serve(t *testing.T, n *node.Node) string {
	t.Helper()
	s, err := promexport.Serve(context.Background(), n.Backend(), promexport.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return "http://" + s.Addr().String() + "/metrics"
}

// waitScrape scrapes url until cond holds for the answer.
func waitScrape(t *testing.T, url, what string, cond func(exposition) bool) exposition {
	t.Helper()
	var e exposition
	var err error
	if !testwait.Until(10*time.Second, func() bool { e, err = tryScrape(url); return err == nil && cond(e) }) {
		t.Fatalf("timed out waiting for %s (last error %v)", what, err)
	}
	return e
}

// badSignature returns an envelope from c to b whose signature was made
// with another key.
func badSignature(t *testing.T, from ed25519.PrivateKey, to proto.PubKey) []byte {
	t.Helper()
	e := &proto.Envelope{
		ID: proto.NewID(), From: proto.PubKeyOf(from), To: proto.ToPeer(to), Kind: proto.KindMessage,
		TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
		Message: &proto.Message{Body: "forged"},
	}
	se, err := proto.SignEnvelope(from, e)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := proto.Sign(other, proto.DomainEnvelope, se.Signed)
	raw, err := proto.Marshal(map[int]any{0: se.Signed, 1: sig[:]})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// count returns a counter's value; a prefixed series (say a drop reason)
// appears with its first event, so absent means zero there.
func count(t *testing.T, e exposition, name string, labels map[string]string) float64 {
	t.Helper()
	if _, known := e[name]; !known && len(labels) == 0 {
		t.Fatalf("no family %s", name)
	}
	v, _ := e.value(name, labels)
	return v
}

// TestTwoNodesKnownTraffic runs two nodes, sends three DMs from a to b
// and one forged envelope to b over a raw link, and checks both nodes'
// endpoints report exactly that.
func TestTwoNodesKnownTraffic(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { checkNoLeak(t, before) })

	o := newOrg(t, "a", "b", "c")
	a := o.start("a")
	b := o.start("b", tcpAddr(t, a))
	urlA, urlB := serve(t, a), serve(t, b)

	linksOne := func(e exposition) bool { return e.sum("meshd_links") == 1 }
	waitScrape(t, urlA, "a's link to b", linksOne)
	waitScrape(t, urlB, "b's link to a", linksOne)

	const dms = 3
	for i := range dms {
		if _, err := a.Backend().Send(api.Send{To: "b", Body: fmt.Sprintf("dm %d", i)}); err != nil {
			t.Fatal(err)
		}
	}

	// c links to b directly and sends one envelope with a bad signature.
	cfg := transport.DefaultConfig()
	cfg.Identity = o.ids["c"].Key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: o.roster.Version} }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bkey := o.ids["b"].Pub
	raw, err := transport.Dial(ctx, tcpAddr(t, b), cfg, &bkey)
	if err != nil {
		t.Fatal(err)
	}
	raw.Start(func([]byte) {})
	waitScrape(t, urlB, "c's raw link", func(e exposition) bool { return e.sum("meshd_links") == 2 })
	if err := raw.Send(append([]byte{byte(proto.FrameEnvelope)}, badSignature(t, o.ids["c"].Key, bkey)...)); err != nil {
		t.Fatal(err)
	}

	waitScrape(t, urlB, "b to count the traffic", func(e exposition) bool {
		d, _ := e.value("meshd_envelopes_delivered_total", l("kind", "message"))
		x, _ := e.value("meshd_envelopes_dropped_total", l("reason", "bad_signature"))
		return d >= dms && x >= 1
	})
	raw.Close()
	eb := waitScrape(t, urlB, "c's link to go", linksOne)
	ea := waitScrape(t, urlA, "b's acks", func(e exposition) bool {
		v, _ := e.value("meshd_envelopes_acked_total", nil)
		return v >= dms
	})

	// Exact counts on the receiver.
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"meshd_envelopes_delivered_total", l("kind", "message"), dms},
		{"meshd_envelopes_dropped_total", l("reason", "bad_signature"), 1},
		{"meshd_envelopes_sent_total", l("kind", "message"), 0},
		{"meshd_roster_version", nil, float64(o.roster.Version)},
		{"meshd_roster_members", nil, 3},
	} {
		if got := count(t, eb, c.name, c.labels); got != c.want {
			t.Errorf("b: %s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if v := eb.sum("meshd_links"); v != 1 {
		t.Errorf("b: links = %g, want 1", v)
	}
	if v := eb.must(t, "meshd_history_envelopes", nil); v < dms {
		t.Errorf("b: history envelopes = %g, want at least %d", v, dms)
	}
	if v := eb.must(t, "meshd_history_db_bytes", nil); v <= 0 {
		t.Errorf("b: history db bytes = %g", v)
	}
	if v := eb.must(t, "meshd_handshakes_total", l("result", "accepted")); v < 1 {
		t.Errorf("b: accepted handshakes = %g, want c's at least", v)
	}
	if v := eb.must(t, "meshd_link_events_total", l("event", "up")); v < 2 {
		t.Errorf("b: link ups = %g, want a's and c's", v)
	}
	for _, q := range []string{status.QueueRxCommit, status.QueueMirror} {
		if v := eb.must(t, "meshd_queue_capacity", l("queue", q)); v <= 0 {
			t.Errorf("b: %s queue capacity = %g", q, v)
		}
		if v := eb.must(t, "meshd_queue_length", l("queue", q)); v < 0 {
			t.Errorf("b: %s queue length = %g", q, v)
		}
	}
	if v := eb.must(t, "meshd_uptime_seconds", nil); v <= 0 {
		t.Errorf("b: uptime = %g", v)
	}

	// Exact counts on the sender.
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"meshd_envelopes_sent_total", l("kind", "message"), dms},
		{"meshd_envelopes_acked_total", nil, dms},
		{"meshd_envelopes_delivered_total", l("kind", "message"), 0},
		{"meshd_envelopes_dropped_total", l("reason", "bad_signature"), 0},
		{"meshd_history_queued_envelopes", nil, 0},
	} {
		if got := count(t, ea, c.name, c.labels); got != c.want {
			t.Errorf("a: %s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if v := ea.sum("meshd_links"); v != 1 {
		t.Errorf("a: links = %g, want 1", v)
	}
	if v := ea.must(t, "meshd_links", l("network", "tcp", "direction", "inbound")); v != 1 {
		t.Errorf("a: inbound tcp links = %g, want 1 (b dialled a)", v)
	}
	if v := ea.must(t, "meshd_presence_members", l("state", "online")); v < 1 {
		t.Errorf("a: online members = %g, want at least a itself", v)
	}
}

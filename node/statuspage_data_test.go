package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/transport"
)

// TestStatusPageAccessors runs a three-node mesh with fast peer exchange
// and checks what the status page reads: the status equals the control
// socket's, and each node learns its neighbours' links.
func TestStatusPageAccessors(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	start := func(i int, seeds ...transport.Addr) *Node {
		m.writeRoster(i, m.roster)
		return m.startWith(i, func(c *Config) {
			c.NoUnixListener = true
			c.PeerExchangeInterval = 100 * time.Millisecond
		}, seeds...)
	}
	a := start(0)
	b := start(1, tcpAddr(t, a))
	c := start(2, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "full mesh", func() bool {
		return len(a.Backend().PeerList()) == 2 && len(b.Backend().PeerList()) == 2 && len(c.Backend().PeerList()) == 2
	})

	// a hears from b that b is linked to c, and from c that c is linked to b
	// (in peer updates, batched for a second and sent on the clock's
	// whole intervals, so allow for a busy machine).
	waitFor(t, 15*time.Second, "link reports", func() bool {
		r := a.Backend().LinkReports()
		return slices.ContainsFunc(r[b.Identity()], c.Identity().Equal) &&
			slices.ContainsFunc(r[c.Identity()], b.Identity().Equal)
	})
	// The reports name members only, never a itself (peers leave the
	// receiver out of the list they send it).
	for from, tos := range a.Backend().LinkReports() {
		if slices.ContainsFunc(tos, a.Identity().Equal) {
			t.Errorf("%s reported a link to the receiver", from.Fingerprint())
		}
	}

	// The status is the control socket's.
	cl := api.NewClient(a.ControlSocket())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := a.Backend().StatusInfo()
	if !got.Key.Equal(want.Key) || got.Name != want.Name || got.Role != want.Role || got.Org != want.Org ||
		got.RosterVersion != want.RosterVersion || got.Links != want.Links || got.Home != want.Home ||
		!slices.Equal(got.Listen, want.Listen) || !got.Started.Equal(want.Started) {
		t.Fatalf("StatusInfo %+v\nGET /v1/status %+v", got, *want)
	}
	if r := a.Backend().RosterInfo(); r.Version != m.roster.Version || len(r.Members) != 3 {
		t.Fatalf("RosterInfo %+v", r)
	}
	if ch := a.ChannelList(); ch == nil || len(ch) != 0 {
		t.Fatalf("ChannelList %v, want empty", ch)
	}
	if items, err := a.q.RecentItems(10); err != nil || items == nil {
		t.Fatalf("RecentItems: %v, %v", items, err)
	}
	// Oldest first, as the page's backlog expects.
	for _, body := range []string{"first", "second"} {
		if _, err := b.out.Send(api.Send{To: "a", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "two items", func() bool { items, _ := a.q.RecentItems(10); return len(items) == 2 })
	if items, _ := a.q.RecentItems(10); items[0].Body != "first" || items[1].Body != "second" {
		t.Fatalf("RecentItems order: %q, %q; want oldest first", items[0].Body, items[1].Body)
	}

	// A subscription is released once, however often it is cancelled.
	_, _, stop := a.q.SubscribeItems()
	if !a.q.Listening() {
		t.Fatal("no subscriber after SubscribeItems")
	}
	stop()
	stop()
	if a.q.Listening() {
		t.Fatal("subscriber left after cancel")
	}

	// A peer that goes away takes its report with it.
	c.Close()
	waitFor(t, 5*time.Second, "c's report dropped", func() bool {
		_, ok := a.Backend().LinkReports()[c.Identity()]
		return !ok
	})
}

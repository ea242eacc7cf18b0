package status

import (
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// fakeHost is a node without links or listeners: a roster, a set of
// former members, a skew, counters and queue fills.
type fakeHost struct {
	roster  *roster.Roster
	former  map[proto.PubKey]bool
	skew    time.Duration
	counter map[string]uint64
}

func (h *fakeHost) Roster() *roster.Roster                         { return h.roster }
func (h *fakeHost) Links() []*peers.Link                           { return nil }
func (h *fakeHost) NameUnique(*roster.Roster, string) bool         { return true }
func (h *fakeHost) Advertised() []string                           { return []string{"tcp:192.0.2.1:7000"} }
func (h *fakeHost) Former(k proto.PubKey) bool                     { return h.former[k] }
func (h *fakeHost) Listeners() []*transport.Listener               { return nil }
func (h *fakeHost) Discovering() bool                              { return false }
func (h *fakeHost) Skew(time.Time) time.Duration                   { return h.skew }
func (h *fakeHost) Outbox() *mailbox.Outbox                        { return nil }
func (h *fakeHost) Mailbox() *api.MailboxStatus                    { return &api.MailboxStatus{Files: 7} }
func (h *fakeHost) Queues() (int, int, int, int)                   { return 3, 1024, 1, 256 }
func (h *fakeHost) QuotaRefused(*roster.Roster) []api.QuotaRefusal { return nil }
func (h *fakeHost) Blocked() []api.Block                           { return nil }
func (h *fakeHost) Counters() map[string]uint64 {
	c := map[string]uint64{}
	for k, v := range h.counter {
		c[k] = v
	}
	return c
}

// TestReporterOverHost: the reporter works over its Host, the store and
// the presence table alone: the status names this node and its roster,
// zeroes a skew within the warning and reports one beyond it, says a
// removed node is removed (with the retry), copies the counters; the
// exporter's views give the queues, the presence of members only (not
// of a stranger) and the start time.
func TestReporterOverHost(t *testing.T) {
	store, err := history.Open(filepath.Join(t.TempDir(), "history.db"), history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, self, _ := ed25519.GenerateKey(nil)
	me := proto.PubKeyOf(self)
	r, err := roster.New("org", self, "me")
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{roster: r, former: map[proto.PubKey]bool{}, skew: time.Second, counter: map[string]uint64{"inbox.items": 2}}
	pres := presence.NewTable(time.Minute)
	started := time.Now().Add(-time.Minute)
	s := New(h, Config{Self: me, Name: "me", Home: "/home/me", Started: started, SkewWarn: 10 * time.Second}, store, pres)

	st := s.StatusInfo()
	if !st.Member || st.Role != "admin" || st.Org != "org" || st.Name != "me" || st.Removed || st.ClockSkewSeconds != 0 ||
		st.Counters["inbox.items"] != 2 || st.Mailbox.Files != 7 || st.UptimeSeconds < 60 || len(st.Advertised) != 1 {
		t.Fatalf("status %+v", st)
	}
	h.skew = -time.Minute
	if st := s.StatusInfo(); st.ClockSkewSeconds != -60 {
		t.Fatalf("a skew past the warning: %v", st.ClockSkewSeconds)
	}
	st.Counters["inbox.items"] = 99
	if s.Counters()["inbox.items"] != 2 {
		t.Fatal("a caller changed the node's counters through the status")
	}

	// Removed: not a member of the roster, and a former one.
	_, other, _ := ed25519.GenerateKey(nil)
	if h.roster, err = roster.New("org", other, "admin"); err != nil {
		t.Fatal(err)
	}
	h.former[me] = true
	if st := s.StatusInfo(); st.Member || !st.Removed || st.RetrySeconds != peers.RemovedRetry.Seconds() || st.Role != "none" {
		t.Fatalf("removed: %+v", st)
	}
	h.roster = r

	if q := s.QueueDepths(); len(q) != 3 || q[0] != (QueueDepth{QueueRxCommit, 3, 1024}) || q[1] != (QueueDepth{QueueMirror, 1, 256}) || q[2].Len != 0 {
		t.Fatalf("queues %+v", q)
	}
	now := time.Now()
	pres.Observe(me, proto.Presence{State: proto.Away, Seq: 1}, now)
	pres.Observe(proto.PubKeyOf(other), proto.Presence{State: proto.Online, Seq: 1}, now)
	if c := s.PresenceCounts(); len(c) != 1 || c["away"] != 1 {
		t.Fatalf("presence counts %v: want this node's only", c)
	}
	if !s.Started().Equal(started) || len(s.PeerList()) != 0 || len(s.LinkCounts()) != 0 || len(s.LinkReports()) != 0 {
		t.Fatal("views of a node without links")
	}
	if hs, err := s.HistoryStats(); err != nil || hs.FileSize == 0 {
		t.Fatalf("history stats %+v %v", hs, err)
	}
}

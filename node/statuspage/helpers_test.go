package statuspage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

var (
	keySelf  = proto.PubKey{1}
	keyBob   = proto.PubKey{2}
	keyCarol = proto.PubKey{3}
	keyDave  = proto.PubKey{4}
)

// fakeSource is a node with canned state and an item feed the test drives.
type fakeSource struct {
	mu      sync.Mutex
	subs    map[chan api.Delivered]*bool // guarded by mu: open subscriptions → lagged
	recent  []api.Item                   // guarded by mu
	reports map[proto.PubKey][]proto.PubKey
}

func newFakeSource() *fakeSource {
	return &fakeSource{subs: map[chan api.Delivered]*bool{},
		reports: map[proto.PubKey][]proto.PubKey{keyBob: {keyCarol, keySelf}}}
}

func member(k proto.PubKey, name, role string) api.Member {
	return api.Member{Key: k, Fingerprint: k.Fingerprint(), Name: name, Role: role}
}

func (f *fakeSource) StatusInfo() api.Status {
	return api.Status{Key: keySelf, Fingerprint: keySelf.Fingerprint(), Name: "alice", Role: "admin", Org: "acme",
		RosterVersion: 3, RosterMembers: 4, Links: 1, Counters: map[string]uint64{"rx.envelopes": 7, "drop.duplicate": 2}}
}

func (f *fakeSource) RosterInfo() api.Roster {
	return api.Roster{Org: "acme", Version: 3, Quorum: 1, Members: []api.Member{
		member(keySelf, "alice", "admin"), member(keyBob, "bob", "operator"),
		member(keyCarol, "carol", "member"), member(keyDave, "dave", "member")}}
}

func (f *fakeSource) PeerList() []api.Peer {
	return []api.Peer{{Key: keyBob, Fingerprint: keyBob.Fingerprint(), Name: "bob", Role: "operator",
		Network: "tcp", Direction: "outbound", Address: "127.0.0.1:7437"}}
}

func (f *fakeSource) PresenceTable() api.Presence {
	return api.Presence{TTLSeconds: 300, Entries: []api.PresenceEntry{
		{Party: api.Party{Key: keySelf, Name: "alice"}, State: "online", Self: true},
		{Party: api.Party{Key: keyBob, Name: "bob"}, State: "away"}}}
}

func (f *fakeSource) ChannelList() []api.Channel {
	return []api.Channel{{Name: "general", Subscription: "subscribed", CanRead: true, CanWrite: true}}
}

func (f *fakeSource) CardList(string) api.Cards {
	return api.Cards{Cards: []api.Card{{Party: api.Party{Fingerprint: "fp-bob", Name: "bob"}, Version: 1,
		Description: "CI runner", Intents: []api.CardIntent{{Name: "run-tests", Summary: "go test"}}, Presence: "online"}}}
}

func (f *fakeSource) LinkReports() map[proto.PubKey][]proto.PubKey { return f.reports }

func (f *fakeSource) RecentItems(limit int) ([]api.Item, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.recent) > limit {
		return append([]api.Item(nil), f.recent[len(f.recent)-limit:]...), nil
	}
	return append([]api.Item(nil), f.recent...), nil
}

func (f *fakeSource) SubscribeItems() (<-chan api.Delivered, func() bool, func()) {
	ch := make(chan api.Delivered, 4)
	lagged := new(bool)
	f.mu.Lock()
	f.subs[ch] = lagged
	f.mu.Unlock()
	return ch, func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			l := *lagged
			*lagged = false
			return l
		}, func() {
			f.mu.Lock()
			delete(f.subs, ch)
			f.mu.Unlock()
		}
}

// publish delivers it to every subscriber, marking full ones lagged.
func (f *fakeSource) publish(it api.Item) { f.publishDelivered(api.Rendered(it)) }

// readyNote is an "attachments present" note, which is no new item.
type readyNote struct{ api.Rendered }

func (r readyNote) Ready() api.AttachmentsReady {
	return api.AttachmentsReady{Kind: "attachments", ID: r.ID}
}

func (f *fakeSource) publishDelivered(d api.Delivered) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch, lagged := range f.subs {
		select {
		case ch <- d:
		default:
			*lagged = true
		}
	}
}

func (f *fakeSource) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func newTestServer(t *testing.T, src Source, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	s, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return s, hs
}

// testToken is the token of the servers newTestServer makes.
const testToken = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"

// do sends one request with the test token as a bearer token, unless
// header sets Authorization itself ("" sends none).
func do(t *testing.T, method, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("x=1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, what, cond)
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

type itemJSON struct {
	ID        string                `json:"id"`
	Kind      string                `json:"kind"`
	From      struct{ Name string } `json:"from"`
	To        string                `json:"to"`
	Priority  string                `json:"priority"`
	Wakes     bool                  `json:"wakes"`
	Read      bool                  `json:"read"`
	Body      string                `json:"body"`
	RequestID string                `json:"request_id"`
	Intent    string                `json:"intent"`
	Params    json.RawMessage       `json:"params"`
	Hop       *int                  `json:"hop"`
	Status    string                `json:"status"`
	Result    json.RawMessage       `json:"result"`
}

func compact(b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}

type inboxJSON struct {
	Items    []itemJSON `json:"items"`
	TimedOut bool       `json:"timed_out"`
}

// mesh4 is four real meshd processes on loopback with one roster:
// alice admin, bob and carol operators, dave member.
type mesh4 struct {
	t       *testing.T
	meshctl string
	homes   map[string]string
	keys    map[string]string
	ds      map[string]*daemon
}

func startMesh4(t *testing.T, extra ...string) *mesh4 {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	m := &mesh4{t: t, meshctl: meshctl, homes: map[string]string{}, keys: map[string]string{}, ds: map[string]*daemon{}}
	tmp := t.TempDir()
	names := []string{"alice", "bob", "carol", "dave"}
	for _, n := range names {
		m.homes[n] = filepath.Join(tmp, n)
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", m.homes[n], "init", "--name", n)
		m.keys[n] = id.Key
	}
	a := m.homes["alice"]
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	for n, role := range map[string]string{"bob": "operator", "carol": "operator", "dave": "member"} {
		meshctlOK(t, meshctl, "--home", a, "roster", "add", m.keys[n], "--role", role, "--name", n)
	}
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pinned, b, 0o644)
	base := append([]string{"--listen", "tcp://127.0.0.1:0", "--no-mdns"}, extra...)
	m.ds["alice"] = startDaemon(t, meshd, a, base...)
	seed := tcpListen(t, waitStatus(t, meshctl, a, m.ds["alice"]))
	for _, n := range names[1:] {
		m.ds[n] = startDaemon(t, meshd, m.homes[n], append(base, "--roster", pinned, "--seed", seed)...)
		waitStatus(t, meshctl, m.homes[n], m.ds[n])
	}
	for _, n := range names {
		waitPeers(t, meshctl, m.homes[n], 3, 15*time.Second)
	}
	return m
}

func (m *mesh4) ctl(who string, args ...string) string {
	m.t.Helper()
	return meshctlOK(m.t, m.meshctl, append([]string{"--home", m.homes[who]}, args...)...)
}

func (m *mesh4) run(who string, args ...string) result {
	m.t.Helper()
	return meshctlRun(m.t, m.meshctl, append([]string{"--home", m.homes[who]}, args...)...)
}

func (m *mesh4) inbox(who string, args ...string) inboxJSON {
	m.t.Helper()
	var in inboxJSON
	meshctlJSON(m.t, m.meshctl, &in, append([]string{"--home", m.homes[who], "inbox"}, args...)...)
	return in
}

// waitItem polls who's inbox (all items) until match finds one.
func (m *mesh4) waitItem(who string, within time.Duration, match func(itemJSON) bool) itemJSON {
	m.t.Helper()
	var found itemJSON
	if !testwait.Until(within, func() bool {
		for _, it := range m.inbox(who, "--all").Items {
			if match(it) {
				found = it
				return true
			}
		}
		return false
	}) {
		m.t.Fatalf("%s: no matching inbox item within %v; inbox: %+v", who, within, m.inbox(who, "--all").Items)
	}
	return found
}

// waitHistory polls who's history of channel ch until it holds a message
// with body.
func (m *mesh4) waitHistory(who, ch, body string) {
	m.t.Helper()
	var h api.History
	if !testwait.Until(5*time.Second, func() bool {
		h = api.History{}
		meshctlJSON(m.t, m.meshctl, &h, "--home", m.homes[who], "history", "#"+ch)
		for _, msg := range h.Messages {
			if msg.Body == body {
				return true
			}
		}
		return false
	}) {
		m.t.Fatalf("%s: no %q in #%s within 5 s; history: %+v", who, body, ch, h.Messages)
	}
}

func (m *mesh4) hasBody(who, body string) bool {
	for _, it := range m.inbox(who, "--all").Items {
		if it.Body == body {
			return true
		}
	}
	return false
}

func (m *mesh4) waitChannel(who, name string) {
	m.t.Helper()
	if !testwait.Until(10*time.Second, func() bool { return m.run(who, "channel", "show", name).code == 0 }) {
		m.t.Fatalf("%s never learnt channel %s", who, name)
	}
}

func TestMessagingEndToEnd(t *testing.T) {
	testpar.Parallel(t)
	m := startMesh4(t, "--presence-ttl", "3s")

	// Channels: #general (everyone reads, members write) and #secret (bob only).
	m.ctl("alice", "channel", "create", "general")
	m.ctl("alice", "channel", "create", "secret", "--readers", "bob")
	for _, n := range []string{"bob", "carol", "dave"} {
		m.waitChannel(n, "general")
	}
	m.ctl("bob", "subscribe", "general")
	m.ctl("carol", "mute", "general")
	// dave stays unsubscribed. dave may not subscribe to #secret.
	m.waitChannel("dave", "secret")
	if r := m.run("dave", "subscribe", "secret"); r.code != 1 || !strings.Contains(r.stderr, "not a reader") {
		t.Fatalf("dave subscribing to #secret: exit %d: %s", r.code, r.stderr)
	}

	t.Run("channel message reaches subscribed readers only", func(t *testing.T) {
		var sent struct {
			SentTo []string `json:"sent_to"`
		}
		meshctlJSON(t, m.meshctl, &sent, "--home", m.homes["alice"], "send", "#general", "deploy at noon")
		if len(sent.SentTo) != 3 {
			t.Fatalf("sent to %v, want all three readers", sent.SentTo)
		}
		it := m.waitItem("bob", 5*time.Second, func(it itemJSON) bool { return it.Body == "deploy at noon" })
		if it.Priority != "normal" || !it.Wakes || it.To != "#general" || it.From.Name != "alice" {
			t.Fatalf("bob's item: %+v", it)
		}
		// Muted: delivered at low priority and does not wake.
		it = m.waitItem("carol", 5*time.Second, func(it itemJSON) bool { return it.Body == "deploy at noon" })
		if it.Priority != "low" || it.Wakes {
			t.Fatalf("carol's muted item: %+v", it)
		}
		r := m.run("carol", "inbox", "--wait", "--timeout", "1s")
		if r.code != 3 && !strings.Contains(r.stdout, "deploy at noon") {
			t.Fatalf("muted item must not wake: exit %d, %s", r.code, r.stdout)
		}
		var in inboxJSON
		json.Unmarshal([]byte(meshctlRun(t, m.meshctl, "--home", m.homes["carol"], "inbox", "--wait", "--timeout", "1s", "--json").stdout), &in)
		if !in.TimedOut {
			t.Fatalf("carol's wait did not time out: %+v", in)
		}
		// Unsubscribed: stored (dave reads the channel) but not in the
		// inbox. Once it is stored, the inbox has had its chance.
		m.waitHistory("dave", "general", "deploy at noon")
		if m.hasBody("dave", "deploy at noon") {
			t.Fatal("unsubscribed dave got the channel message in the inbox")
		}
		// A non-reader gets nothing: #secret goes to bob only.
		meshctlJSON(t, m.meshctl, &sent, "--home", m.homes["alice"], "send", "#secret", "the password")
		if len(sent.SentTo) != 1 {
			t.Fatalf("#secret sent to %v, want bob only", sent.SentTo)
		}
		m.ctl("bob", "subscribe", "secret")
		m.ctl("alice", "send", "#secret", "the second password")
		m.waitItem("bob", 5*time.Second, func(it itemJSON) bool { return it.Body == "the second password" })
		for _, n := range []string{"carol", "dave"} {
			if m.hasBody(n, "the password") || m.hasBody(n, "the second password") {
				t.Fatalf("non-reader %s got a #secret message", n)
			}
		}
		// An observer-free refusal: dave (member) may write #general, but
		// nobody but members+ may; writing to an unknown channel is refused.
		if r := m.run("dave", "send", "#nope", "x"); r.code != 1 || !strings.Contains(r.stderr, "nope") {
			t.Fatalf("send to unknown channel: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("DM reaches only its peer", func(t *testing.T) {
		m.ctl("dave", "dm", "carol", "psst")
		it := m.waitItem("carol", 5*time.Second, func(it itemJSON) bool { return it.Body == "psst" })
		if it.Priority != "high" || !it.Wakes || it.Kind != "message" || it.From.Name != "dave" {
			t.Fatalf("carol's DM: %+v", it)
		}
		// carol's wait returns at once for the waking DM.
		if r := m.run("carol", "inbox", "--wait", "--timeout", "5s"); r.code != 0 || !strings.Contains(r.stdout, "psst") {
			t.Fatalf("wait with a waking DM: exit %d: %s", r.code, r.stdout)
		}
		m.ctl("carol", "read", it.ID)
		// dave then sends each of the others a DM of their own: once that
		// has arrived, a copy of carol's sent to them before it would have
		// too.
		for _, n := range []string{"alice", "bob"} {
			m.ctl("dave", "dm", n, "marker for "+n)
		}
		for _, n := range []string{"alice", "bob"} {
			m.waitItem(n, 5*time.Second, func(it itemJSON) bool { return it.Body == "marker for "+n })
			if m.hasBody(n, "psst") {
				t.Fatalf("%s saw carol's DM", n)
			}
		}
	})

	t.Run("request and response round trip, hop chain stops at 3", func(t *testing.T) {
		var sent struct {
			RequestID string `json:"request_id"`
			Hop       int    `json:"hop"`
		}
		meshctlJSON(t, m.meshctl, &sent, "--home", m.homes["alice"], "request", "bob", "run-tests", "--params", `{"branch":"main"}`)
		req := m.waitItem("bob", 5*time.Second, func(it itemJSON) bool { return it.RequestID == sent.RequestID })
		if req.Kind != "request" || req.Priority != "high" || req.Intent != "run-tests" || compact(req.Params) != `{"branch":"main"}` || *req.Hop != 0 {
			t.Fatalf("bob's request: %+v params %s", req, req.Params)
		}
		m.ctl("bob", "respond", sent.RequestID, "completed", "--result", `{"passed":42}`)
		resp := m.waitItem("alice", 5*time.Second, func(it itemJSON) bool { return it.Kind == "response" && it.RequestID == sent.RequestID })
		if resp.Status != "completed" || compact(resp.Result) != `{"passed":42}` || resp.Priority != "normal" {
			t.Fatalf("alice's response: %+v", resp)
		}
		// dave (member) may not send requests.
		if r := m.run("dave", "request", "alice", "deploy"); r.code != 1 || !strings.Contains(r.stderr, "role too low") {
			t.Fatalf("member request: exit %d: %s", r.code, r.stderr)
		}
		// The chain: alice→bob hop 0 (above), bob→carol 1, carol→alice 2,
		// alice→bob 3, and bob's follow-up (hop 4) is refused.
		parent := sent.RequestID
		chain := []struct{ from, to string }{{"bob", "carol"}, {"carol", "alice"}, {"alice", "bob"}}
		for i, c := range chain {
			meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[c.from], "request", c.to, "follow-up", "--reply-to", parent)
			if sent.Hop != i+1 {
				t.Fatalf("follow-up %d has hop %d", i+1, sent.Hop)
			}
			got := m.waitItem(c.to, 5*time.Second, func(it itemJSON) bool { return it.RequestID == sent.RequestID })
			if *got.Hop != i+1 {
				t.Fatalf("%s received hop %d, want %d", c.to, *got.Hop, i+1)
			}
			parent = sent.RequestID
		}
		r := m.run("bob", "request", "carol", "follow-up", "--reply-to", parent)
		if r.code != 1 || !strings.Contains(r.stderr, "hop limit") {
			t.Fatalf("hop 4 follow-up: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("presence spreads, and a killed node goes offline after the ttl", func(t *testing.T) {
		state := func(who, of string) string {
			var p struct {
				Entries []struct {
					Name  string `json:"name"`
					State string `json:"state"`
				} `json:"entries"`
			}
			meshctlJSON(t, m.meshctl, &p, "--home", m.homes[who], "presence")
			for _, e := range p.Entries {
				if e.Name == of {
					return e.State
				}
			}
			return ""
		}
		waitState := func(who, of, want string, within time.Duration) {
			t.Helper()
			if !testwait.Until(within, func() bool { return state(who, of) == want }) {
				t.Fatalf("%s sees %s as %q, want %q", who, of, state(who, of), want)
			}
		}
		waitState("alice", "bob", "online", 5*time.Second)
		m.ctl("bob", "presence", "set", "away")
		waitState("alice", "bob", "away", 5*time.Second)
		waitState("carol", "bob", "away", 5*time.Second)
		// Graceful shutdown announces offline at once.
		if err := m.ds["carol"].stop(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitState("alice", "carol", "offline", 2*time.Second)
		// SIGKILL says nothing: dave goes offline after the 3 s ttl.
		waitState("alice", "dave", "online", 5*time.Second)
		killed := time.Now()
		m.ds["dave"].stop(syscall.SIGKILL)
		if s := state("alice", "dave"); s != "online" {
			t.Fatalf("dave shown %q at once after a kill; the ttl decides", s)
		}
		waitState("alice", "dave", "offline", 8*time.Second)
		if el := time.Since(killed); el < 2*time.Second {
			t.Fatalf("dave offline after %v, before the ttl", el)
		}
	})
}

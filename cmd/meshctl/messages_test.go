package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

func hop(n int) *int { return &n }

// wantBody fails the test unless the request carried exactly the JSON want.
func wantBody(t *testing.T, r fakeRequest, want string) {
	t.Helper()
	if r.Body != want {
		t.Errorf("%s body\n got %s\nwant %s", r.Route, r.Body, want)
	}
	if r.ContentType != "application/json" {
		t.Errorf("%s content type %q", r.Route, r.ContentType)
	}
}

func TestSend(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	sent := api.Sent{ID: "0193a0c4-0000-7000-8000-000000000001", Kind: "message", To: "#x", Seq: 7, SentTo: []string{"a", "b", "c"}}
	f.answer("POST /v1/send", 200, sent)

	out := f.ok(t, "", "send", "#x", "hello")
	wantBody(t, f.one(t, "POST /v1/send"), `{"to":"#x","body":"hello"}`)
	if out != "sent 0193a0c4-0000-7000-8000-000000000001 to #x (3 peers)\n" {
		t.Errorf("send output %q", out)
	}

	// Stdin, all of it; the name is normalised; flags after the arguments.
	out = f.ok(t, "line one\nline two\n", "send", "#X", "-", "--in-reply-to", "0193a0c4-0000-7000-8000-000000000000")
	wantBody(t, f.one(t, "POST /v1/send"), `{"to":"#x","body":"line one\nline two\n","in_reply_to":"0193a0c4-0000-7000-8000-000000000000"}`)
	if !strings.HasPrefix(out, "sent ") {
		t.Errorf("send output %q", out)
	}

	got := decode[api.Sent](t, f.ok(t, "", "send", "#x", "hello", "--json"))
	if !reflect.DeepEqual(got, sent) {
		t.Errorf("send --json: %+v, want %+v", got, sent)
	}
	f.take()

	f.answer("POST /v1/send", 200, api.Sent{ID: "e1", To: "#x", SentTo: []string{"a"}})
	if out := f.ok(t, "", "send", "#x", "hi"); out != "sent e1 to #x (1 peer)\n" {
		t.Errorf("send output %q", out)
	}
	f.take()

	// Refused before anything is sent.
	f.fails(t, 2, []string{"send", "x", "hello"}, `"x" is not a channel: write '#x' for the channel, or use 'meshctl dm x TEXT'`, "usage: meshctl send")
	f.fails(t, 2, []string{"send", "#x"}, "missing argument")
	f.fails(t, 2, []string{"send"}, "missing '#NAME' and TEXT", "unquoted # starts a shell comment")
	f.fails(t, 2, []string{"send", "#x", "a", "b"}, `unexpected argument "b"`)
	f.fails(t, 2, []string{"send", "#bad!", "hi"}, "invalid channel name")
	f.fails(t, 2, []string{"send", "#", "hi"}, "invalid channel name")
	big := strings.Repeat("x", 256<<10+1)
	r := f.failsIn(t, 1, big, []string{"send", "#x", "-"}, "message on stdin is larger than 256 KiB")
	if !strings.Contains(r.stderr, "hint: ") {
		t.Errorf("no hint: %q", r.stderr)
	}
	f.failsIn(t, 1, "\xff\xfe", []string{"send", "#x", "-"}, "not valid UTF-8")
	f.none(t)
	// Exactly the limit is fine.
	f.ok(t, big[1:], "send", "#x", "-")
	if b := decode[api.Send](t, f.one(t, "POST /v1/send").Body); len(b.Body) != 256<<10 {
		t.Errorf("body of %d bytes sent", len(b.Body))
	}
}

func TestRemoteError(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.answer("POST /v1/request", 409, api.Error{Error: "role too low: members may not send requests",
		Hint: "ask an admin to make this node an operator"})
	r := f.fails(t, 1, []string{"request", "bob", "run-tests"})
	if r.stderr != "meshctl: role too low: members may not send requests\nhint: ask an admin to make this node an operator\n" {
		t.Errorf("stderr %q", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
	// Without a hint, and with a body that is not an error object.
	f.answer("POST /v1/send", 403, api.Error{Error: "not a writer of #x"})
	r = f.fails(t, 1, []string{"send", "#x", "hi"}, "meshctl: not a writer of #x\n")
	if strings.Contains(r.stderr, "hint:") {
		t.Errorf("stderr %q", r.stderr)
	}
	f.answer("GET /v1/channels", 500, "boom")
	f.fails(t, 1, []string{"channel", "list"}, "meshd answered 500 Internal Server Error")
}

func TestNoDaemon(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "h")
	for _, args := range [][]string{
		{"send", "#x", "hi"},
		{"dm", "bob", "hi"},
		{"request", "bob", "run-tests"},
		{"respond", "r1", "accepted"},
		{"channel", "list"},
		{"channel", "create", "x"},
		{"subscribe", "x"},
		{"inbox"},
		{"inbox", "--wait", "--timeout", "1s"},
		{"read", "e1"},
		{"presence"},
		{"presence", "set", "away"},
	} {
		fails(t, 1, append([]string{"--home", home}, args...), "meshd is not running", "hint: start it with: meshd --home "+home)
	}

	// A socket file nobody listens on, as a crashed meshd leaves behind.
	dir, err := os.MkdirTemp("", "meshctl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "meshd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	fails(t, 1, []string{"--home", dir, "inbox"}, "meshd is not running")
}

func TestDM(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.answer("POST /v1/send", 200, api.Sent{ID: "e2", Kind: "message", To: "@bob", Seq: 1, SentTo: []string{}, Queued: true})
	out := f.ok(t, "", "dm", "bob", "hi")
	wantBody(t, f.one(t, "POST /v1/send"), `{"to":"bob","body":"hi"}`)
	if out != "sent e2 to @bob\npeer offline: kept and delivered when it links (meshctl status e2 follows it)\n" {
		t.Errorf("dm output %q", out)
	}
	f.ok(t, "from stdin", "dm", "1a2b3c4d5e6f7a8b", "-")
	wantBody(t, f.one(t, "POST /v1/send"), `{"to":"1a2b3c4d5e6f7a8b","body":"from stdin"}`)

	f.answer("POST /v1/send", 200, api.Sent{ID: "e3", To: "@bob", SentTo: []string{"1a2b3c4d5e6f7a8b"}})
	if out := f.ok(t, "", "dm", "bob", "hi"); out != "sent e3 to @bob\n" {
		t.Errorf("dm output %q", out)
	}
	f.take()

	f.fails(t, 2, []string{"dm", "#x", "hi"}, "is a channel", "meshctl send '#x' TEXT")
	f.fails(t, 2, []string{"dm", "bob"}, "missing argument")
	f.fails(t, 2, []string{"dm", "@", "hi"}, "PEER is empty")
	f.none(t)
}

func TestRequest(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.unrecorded = []string{"GET /v1/cards/"} // no card: asked as before (TestRequestCardCheck)
	sent := api.Sent{ID: "e5", Kind: "request", To: "@bob", Seq: 3, RequestID: "r1", Hop: hop(0), SentTo: []string{"1a2b3c4d5e6f7a8b"}}
	f.answer("POST /v1/request", 200, sent)

	out := f.ok(t, "", "request", "bob", "run-tests", "--params", `{"branch": "main", "n": [1, 2.5]}`)
	wantBody(t, f.one(t, "POST /v1/request"), `{"to":"bob","intent":"run-tests","params":{"branch":"main","n":[1,2.5]}}`)
	if out != "sent request r1 to @bob (intent run-tests, hop 0, envelope e5)\n" {
		t.Errorf("request output %q", out)
	}
	f.ok(t, "[1,\n 2]\n", "request", "bob", "run-tests", "--params", "-", "--reply-to", "r0")
	wantBody(t, f.one(t, "POST /v1/request"), `{"to":"bob","intent":"run-tests","params":[1,2],"reply_to":"r0"}`)
	f.ok(t, "", "request", "bob", "ping", "--params", "null")
	wantBody(t, f.one(t, "POST /v1/request"), `{"to":"bob","intent":"ping","params":null}`)
	f.ok(t, "", "request", "bob", "ping")
	wantBody(t, f.one(t, "POST /v1/request"), `{"to":"bob","intent":"ping"}`)
	if got := decode[api.Sent](t, f.ok(t, "", "request", "bob", "ping", "--json")); !reflect.DeepEqual(got, sent) {
		t.Errorf("request --json: %+v", got)
	}
	f.take()

	f.answer("POST /v1/request", 200, api.Sent{ID: "e6", To: "@carol", RequestID: "r2", Hop: hop(1), Queued: true})
	out = f.ok(t, "", "request", "carol", "fetch-logs", "--reply-to", "r1")
	if out != "sent request r2 to @carol (intent fetch-logs, hop 1, envelope e6)\npeer offline: kept and delivered when it links (meshctl status e6 follows it)\n" {
		t.Errorf("request output %q", out)
	}
	f.take()

	deep := strings.Repeat("[", 15) + strings.Repeat("]", 15)
	for _, tc := range []struct {
		stdin string
		args  []string
		want  []string
	}{
		{"", []string{"request", "bob", "run-tests", "--params", `{"branch": main}`}, []string{"--params: invalid json: invalid character 'm'", "(at byte 12)", "usage: meshctl request"}},
		{"", []string{"request", "bob", "run-tests", "--params", `{}x`}, []string{"--params: invalid json: data after the value"}},
		{"", []string{"request", "bob", "run-tests", "--params", ``}, []string{"--params is empty"}},
		{"", []string{"request", "bob", "run-tests", "--params", deep}, []string{"nested more than 14 levels"}},
		{"{", []string{"request", "bob", "run-tests", "--params", "-"}, []string{"--params: invalid json"}},
		{"", []string{"request", "bob", "run-tests", "--params", "-"}, []string{"--params is empty"}},
		{"", []string{"request", "bob"}, []string{"missing argument"}},
		{"", []string{"request", "bob", ""}, []string{"INTENT must be 1 to 256 bytes"}},
		{"", []string{"request", "bob", strings.Repeat("i", 257)}, []string{"INTENT must be 1 to 256 bytes"}},
		{"", []string{"request", "#ops", "run-tests"}, []string{"is a channel"}},
	} {
		f.failsIn(t, 2, tc.stdin, tc.args, tc.want...)
	}
	f.none(t)
}

func TestRespond(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.answer("POST /v1/respond", 200, api.Sent{ID: "e7", Kind: "response", To: "@alice", RequestID: "r1", SentTo: []string{"5e6f7a8b1a2b3c4d"}})
	out := f.ok(t, "", "respond", "r1", "completed", "--result", `{"passed": 412, "failed": 0}`)
	wantBody(t, f.one(t, "POST /v1/respond"), `{"request_id":"r1","status":"completed","result":{"passed":412,"failed":0}}`)
	if out != "sent completed response to request r1 to @alice (envelope e7)\n" {
		t.Errorf("respond output %q", out)
	}
	for _, st := range []string{"accepted", "rejected", "failed"} {
		f.ok(t, "", "respond", "r1", st)
		wantBody(t, f.one(t, "POST /v1/respond"), `{"request_id":"r1","status":"`+st+`"}`)
	}
	f.ok(t, `"disk full"`, "respond", "r1", "failed", "--result", "-")
	wantBody(t, f.one(t, "POST /v1/respond"), `{"request_id":"r1","status":"failed","result":"disk full"}`)
	decode[api.Sent](t, f.ok(t, "", "respond", "r1", "accepted", "--json"))
	f.take()

	f.ok(t, "", "respond", "r1", "progress", "--note", "3 of 7 run")
	wantBody(t, f.one(t, "POST /v1/respond"), `{"request_id":"r1","status":"progress","result":"3 of 7 run"}`)
	f.fails(t, 2, []string{"respond", "r1", "completed", "--note", "x"}, "--note goes with STATUS progress")
	f.fails(t, 2, []string{"respond", "r1", "progress", "--note", "x", "--result", "1"}, "not both")
	f.fails(t, 2, []string{"respond", "r1", "progress", "--note", strings.Repeat("n", 2000)}, "--note is longer than")
	f.fails(t, 2, []string{"respond", "r1", "done"}, `unknown status "done"`, "accepted, progress, rejected, completed or failed", "usage: meshctl respond")
	f.fails(t, 2, []string{"respond", "r1", "Completed"}, "unknown status")
	f.fails(t, 2, []string{"respond", "r1"}, "missing argument")
	f.fails(t, 2, []string{"respond", "r1", "completed", "--result", "{"}, "--result: invalid json")
	f.none(t)
}

func TestChannelCommands(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	deploys := api.Channel{ID: "0193a0c4-0000-7000-8000-00000000000a", Name: "deploys", Version: 2,
		Readers: []string{"role:member", "alice (1a2b3c4d5e6f7a8b)"}, Writers: []string{"role:operator"}, Admins: []string{"alice (1a2b3c4d5e6f7a8b)"},
		AllowHistoryFetch: true, Subscription: "subscribed", CanRead: true, CanWrite: true}
	f.answer("POST /v1/channels", 200, deploys)
	out := f.ok(t, "", "channel", "create", "#Deploys", "--readers", "role:member, alice", "--readers", "bob", "--writers", "role:operator", "--no-history")
	wantBody(t, f.one(t, "POST /v1/channels"), `{"name":"deploys","readers":["role:member","alice","bob"],"writers":["role:operator"],"no_history":true}`)
	for _, want := range []string{"created #deploys\n", "readers        role:member, alice (1a2b3c4d5e6f7a8b)\n", "access         read/write\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	f.ok(t, "", "channel", "create", "ops")
	wantBody(t, f.one(t, "POST /v1/channels"), `{"name":"ops"}`)
	f.ok(t, "", "channel", "create", "ops", "--retention-hours", "24", "--retention-messages", "2000")
	wantBody(t, f.one(t, "POST /v1/channels"), `{"name":"ops","retention_hours":24,"retention_messages":2000}`)
	if got := decode[api.Channel](t, f.ok(t, "", "channel", "create", "ops", "--json")); !reflect.DeepEqual(got, deploys) {
		t.Errorf("create --json: %+v", got)
	}
	f.take()
	f.fails(t, 2, []string{"channel", "create", "x", "--readers", "role:king"}, "unknown role", "usage: meshctl channel create")
	f.fails(t, 2, []string{"channel", "create", "x", "--writers", ","}, "no principal")
	f.fails(t, 2, []string{"channel", "create", "x", "--writers", "ed25519:nope"}, "principal")
	f.fails(t, 2, []string{"channel", "create"}, "missing argument")
	f.fails(t, 2, []string{"channel", "create", "x", "--retention-messages", "-1"}, "--retention-messages -1")
	f.fails(t, 2, []string{"channel", "create", "x", "--retention-hours", "1000001"}, "--retention-hours 1000001")
	f.fails(t, 2, []string{"channel", "create", "a b"}, "invalid channel name")
	f.fails(t, 2, []string{"channel"}, "missing command", "channel create NAME")
	f.none(t)

	// show asks for the bare name, and prints every field.
	f.answer("GET /v1/channels/deploys", 200, deploys)
	out = f.ok(t, "", "channel", "show", "#deploys")
	f.one(t, "GET /v1/channels/deploys")
	want := `channel        #deploys
id             0193a0c4-0000-7000-8000-00000000000a
version        2
subscription   subscribed
access         read/write
readers        role:member, alice (1a2b3c4d5e6f7a8b)
writers        role:operator
admins         alice (1a2b3c4d5e6f7a8b)
history fetch  on
retention      72 hours or 10000 messages, whichever is reached first
`
	if out != want {
		t.Errorf("show output:\n%s\nwant:\n%s", out, want)
	}
	f.answer("GET /v1/channels/nope", 404, api.Error{Error: "unknown channel", Hint: "'meshctl channel list' lists channels"})
	f.fails(t, 1, []string{"channel", "show", "nope"}, "meshctl: unknown channel\nhint: 'meshctl channel list'")
	f.take()

	// list sorts by name.
	ops := api.Channel{ID: "c2", Name: "ops", Version: 1, Subscription: "muted", CanRead: true, RetentionHours: 24}
	audit := api.Channel{ID: "c3", Name: "audit", Version: 5, Subscription: "unsubscribed"}
	f.answer("GET /v1/channels", 200, api.Channels{Channels: []api.Channel{ops, deploys, audit}})
	out = f.ok(t, "", "channel", "list")
	f.one(t, "GET /v1/channels")
	want = `NAME      SUBSCRIPTION  READ/WRITE  VERSION  HISTORY
#audit    unsubscribed  none        5        off
#deploys  subscribed    read/write  2        on
#ops      muted         read        1        off
`
	if out != want {
		t.Errorf("list output:\n%s\nwant:\n%s", out, want)
	}
	if got := decode[api.Channels](t, f.ok(t, "", "channel", "list", "--json")); len(got.Channels) != 3 || got.Channels[0].Name != "ops" {
		t.Errorf("list --json: %+v", got)
	}
	f.answer("GET /v1/channels", 200, api.Channels{Channels: []api.Channel{}})
	if out := f.ok(t, "", "channel", "list"); !strings.HasPrefix(out, "no channels") {
		t.Errorf("empty list: %q", out)
	}
}

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	for _, tc := range []struct {
		cmd, state, out string
	}{
		{"subscribe", "subscribed", "subscribed to #deploys\n"},
		{"unsubscribe", "unsubscribed", "unsubscribed from #deploys: its messages no longer go to the inbox\n"},
		{"mute", "muted", "muted #deploys: its messages go to the inbox at low priority and do not wake\n"},
		{"unmute", "subscribed", "unmuted #deploys: subscribed\n"},
	} {
		f.answer("POST /v1/subscriptions", 200, api.Channel{Name: "deploys", Subscription: tc.state, CanRead: true})
		for _, name := range []string{"deploys", "#deploys"} {
			if out := f.ok(t, "", tc.cmd, name); out != tc.out {
				t.Errorf("%s %s: %q, want %q", tc.cmd, name, out, tc.out)
			}
			wantBody(t, f.one(t, "POST /v1/subscriptions"), `{"channel":"deploys","state":"`+tc.state+`"}`)
		}
		if ch := decode[api.Channel](t, f.ok(t, "", tc.cmd, "deploys", "--json")); ch.Subscription != tc.state {
			t.Errorf("%s --json: %+v", tc.cmd, ch)
		}
		f.take()
		f.fails(t, 2, []string{tc.cmd}, "missing argument", "usage: meshctl "+tc.cmd+" NAME")
		f.fails(t, 2, []string{tc.cmd, "#"}, "invalid channel name")
		f.none(t)
	}
	// A channel this node may not read gets a note.
	f.answer("POST /v1/subscriptions", 200, api.Channel{Name: "secret", Subscription: "subscribed"})
	if out := f.ok(t, "", "subscribe", "secret"); !strings.Contains(out, "note: this node may not read #secret") {
		t.Errorf("subscribe output %q", out)
	}
}

// inboxItems is an inbox with one item of each kind.
func inboxItems() ([]api.Item, time.Time) {
	at := time.Date(2026, 11, 21, 12, 0, 1, 0, time.UTC)
	alice := api.Party{Fingerprint: "1a2b3c4d5e6f7a8b", Name: "alice", Role: "operator"}
	return []api.Item{
		{ID: "e1", Kind: "request", From: alice, To: "@bob", Priority: "high", Wakes: true, Sent: at,
			RequestID: "r1", Intent: "run-tests", Params: json.RawMessage(`{"branch":"main","pkgs":["./..."]}`), Hop: hop(0)},
		{ID: "e2", Kind: "message", From: alice, To: "#deploys", Channel: "deploys", Priority: "normal", Read: true, Sent: at.Add(4 * time.Second),
			Body: "v1.4.2 is live"},
		{ID: "e3", Kind: "message", From: api.Party{Fingerprint: "5e6f7a8b1a2b3c4d"}, To: "@bob", Priority: "high", Sent: at.Add(8 * time.Second),
			Body: "two lines\nof text\n", InReplyTo: "e0"},
		{ID: "e4", Kind: "response", From: alice, To: "@bob", Priority: "normal", Sent: at.Add(9 * time.Second),
			RequestID: "r0", Status: "completed", Result: json.RawMessage(`42`), Expired: true},
		{ID: "e5", Kind: "message", From: alice, To: "#ops", Channel: "ops", Priority: "low", Sent: at.Add(10 * time.Second),
			Body: "\x1b[2Jgotcha\u202e", FromHistory: true},
	}, at
}

func TestInbox(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	items, at := inboxItems()
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: items})
	out := f.ok(t, "", "inbox")
	r := f.one(t, "GET /v1/inbox")
	if r.Query.Encode() != "cursor=start" {
		t.Errorf("inbox query %v", r.Query)
	}
	ts := func(d time.Duration) string { return at.Add(d).Local().Format("2006-01-02 15:04:05") }
	want := "* [high] " + ts(0) + " request from alice (1a2b3c4d5e6f7a8b) to @bob: intent=run-tests hop=0 id=e1 request_id=r1\n" +
		"    {\n" +
		"      \"branch\": \"main\",\n" +
		"      \"pkgs\": [\n" +
		"        \"./...\"\n" +
		"      ]\n" +
		"    }\n" +
		"  [normal] " + ts(4*time.Second) + " #deploys alice id=e2: v1.4.2 is live\n" +
		"* [high] " + ts(8*time.Second) + " dm from 5e6f7a8b1a2b3c4d to @bob id=e3 in_reply_to=e0:\n" +
		"    two lines\n" +
		"    of text\n" +
		"* [normal] " + ts(9*time.Second) + " response from alice (1a2b3c4d5e6f7a8b) to @bob: status=completed id=e4 request_id=r0 [expired]\n" +
		"    42\n" +
		"* [low] " + ts(10*time.Second) + " #ops alice id=e5 [from history]: \\x1b[2Jgotcha\\u202e\n"
	if out != want {
		t.Errorf("inbox output:\n%s\nwant:\n%s", out, want)
	}

	f.ok(t, "", "inbox", "--all", "--limit", "5")
	if q := f.one(t, "GET /v1/inbox").Query; q.Encode() != "all=1&limit=5" {
		t.Errorf("inbox query %v", q)
	}
	got := decode[api.Inbox](t, f.ok(t, "", "inbox", "--json"))
	var params bytes.Buffer
	if len(got.Items) != len(items) || got.Items[0].RequestID != "r1" || json.Compact(&params, got.Items[0].Params) != nil ||
		params.String() != `{"branch":"main","pkgs":["./..."]}` {
		t.Errorf("inbox --json: %+v", got)
	}
	f.take()

	f.answer("GET /v1/inbox", 200, api.Inbox{Items: []api.Item{}})
	if out := f.ok(t, "", "inbox"); out != "no unread items\n" {
		t.Errorf("empty inbox: %q", out)
	}
	if out := f.ok(t, "", "inbox", "--all"); out != "the inbox is empty\n" {
		t.Errorf("empty inbox --all: %q", out)
	}
	f.take()

	f.fails(t, 2, []string{"inbox", "--timeout", "5s"}, "--timeout needs --wait")
	f.fails(t, 2, []string{"inbox", "--wait", "--timeout", "0s"}, "--timeout must be positive")
	f.fails(t, 2, []string{"inbox", "--wait", "--timeout", "soon"}, "invalid value")
	f.fails(t, 2, []string{"inbox", "--limit", "-1"}, "--limit must not be negative")
	f.fails(t, 2, []string{"inbox", "unread"}, `unexpected argument "unread"`)
	f.none(t)
}

func TestInboxWait(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: []api.Item{}, TimedOut: true})
	r := f.mc(t, "", "inbox", "--wait", "--timeout", "2s")
	if r.code != 3 || r.stdout != "no new items\n" || r.stderr != "" {
		t.Fatalf("timed-out wait: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if q := f.one(t, "GET /v1/inbox").Query; q.Encode() != "cursor=start&timeout=2s&wait=1" {
		t.Errorf("inbox --wait query %v", q)
	}
	r = f.mc(t, "", "inbox", "--wait", "--json")
	if in := decode[api.Inbox](t, r.stdout); r.code != 3 || !in.TimedOut || r.stderr != "" {
		t.Fatalf("timed-out wait --json: exit %d, %+v, stderr %q", r.code, in, r.stderr)
	}
	if q := f.one(t, "GET /v1/inbox").Query; q.Get("timeout") != "30s" {
		t.Errorf("default timeout: query %v", q)
	}

	// An answer that comes later than the wait's own timeout (meshd answers
	// when it ends) still arrives: the call outlives the wait.
	items, _ := inboxItems()
	f.answerAfter("GET /v1/inbox", 1500*time.Millisecond, 200, api.Inbox{Items: items[:1]})
	out := f.ok(t, "", "inbox", "--wait", "--timeout", "1s", "--limit", "1")
	if !strings.Contains(out, "request from alice") {
		t.Errorf("wait output %q", out)
	}
	if q := f.one(t, "GET /v1/inbox").Query; q.Encode() != "limit=1&timeout=1s&wait=1" {
		t.Errorf("inbox --wait query %v", q)
	}
	// A wait that timed out with low-priority items still lists them, exit 0.
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: items[4:], TimedOut: true})
	if out := f.ok(t, "", "inbox", "--wait", "--timeout", "1s"); !strings.Contains(out, "#ops alice") {
		t.Errorf("wait output %q", out)
	}
}

func TestRead(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	alice := api.Party{Fingerprint: "1a2b3c4d5e6f7a8b", Name: "alice"}
	var lines []string
	for i := range 40 {
		lines = append(lines, strings.Repeat(string(rune('a'+i%26)), 60))
	}
	long := api.Item{ID: "e9", Kind: "message", From: alice, To: "#logs", Channel: "logs", Priority: "normal",
		Sent: time.Now(), Body: strings.Join(lines, "\n")}
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: []api.Item{long}})
	out := f.ok(t, "", "inbox")
	if !strings.Contains(out, "\n    "+lines[9]+"\n") || strings.Contains(out, lines[10]) ||
		!strings.HasSuffix(out, "    ... 1830 more bytes (meshctl read e9 shows all)\n") {
		t.Errorf("inbox preview:\n%s", out)
	}

	long.Read = true
	f.answer("POST /v1/inbox/e9/read", 200, long)
	out = f.ok(t, "", "read", "e9")
	req := f.take()
	if len(req) != 2 || req[1].Route != "POST /v1/inbox/e9/read" || req[1].Body != "" {
		t.Fatalf("requests %+v", req)
	}
	if !strings.HasPrefix(out, "  [normal] ") || !strings.HasSuffix(out, "#logs alice id=e9:\n    "+strings.Join(lines, "\n    ")+"\n") {
		t.Errorf("read output:\n%s", out)
	}
	if it := decode[api.Item](t, f.ok(t, "", "read", "e9", "--json")); !it.Read || it.Body != long.Body {
		t.Errorf("read --json: %+v", it)
	}
	f.take()

	f.answer("POST /v1/inbox/nope/read", 404, api.Error{Error: "no inbox item nope"})
	f.fails(t, 1, []string{"read", "nope"}, "meshctl: no inbox item nope")
	f.fails(t, 2, []string{"read"}, "missing argument")
}

func TestPresence(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	now := time.Now()
	f.answer("GET /v1/presence", 200, api.Presence{TTLSeconds: 300, Entries: []api.PresenceEntry{
		{Party: api.Party{Fingerprint: "1a2b3c4d5e6f7a8b", Name: "alice"}, State: "online", Announced: "online", Seq: 4, LastHeard: now, Self: true, Note: "tests\x1b[31m"},
		{Party: api.Party{Fingerprint: "5e6f7a8b1a2b3c4d"}, State: "offline", Announced: "away", Seq: 2, LastHeard: now.Add(-10 * time.Minute)},
		{Party: api.Party{Fingerprint: "0f0f0f0f0f0f0f0f", Name: "carol"}, State: "offline"},
	}})
	out := f.ok(t, "", "presence")
	f.one(t, "GET /v1/presence")
	lines := strings.Split(out, "\n")
	// alice was heard just now: "0s ago", "3ms ago" or "12ms ago" as the
	// test runs fast or slow, which moves the NOTE column.
	selfLine := regexp.MustCompile(`^alice \(self\)  1a2b3c4d5e6f7a8b  online   online     (0s|[0-9]+ms) ago +tests\\x1b\[31m$`)
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "NAME          FINGERPRINT       STATE    ANNOUNCED  LAST HEARD  NOTE") ||
		!selfLine.MatchString(lines[1]) ||
		lines[2] != "-             5e6f7a8b1a2b3c4d  offline  away       10m0s ago   -" ||
		lines[3] != "carol         0f0f0f0f0f0f0f0f  offline  -          never       -" ||
		lines[4] != "(offline after 5m0s without presence)" {
		t.Errorf("presence output:\n%s", out)
	}
	if p := decode[api.Presence](t, f.ok(t, "", "presence", "--json")); len(p.Entries) != 3 || !p.Entries[0].Self {
		t.Errorf("presence --json: %+v", p)
	}
	f.take()

	f.answer("POST /v1/presence", 200, api.Presence{TTLSeconds: 300})
	if out := f.ok(t, "", "presence", "set", "away"); out != "announced away\n" {
		t.Errorf("presence set output %q", out)
	}
	wantBody(t, f.one(t, "POST /v1/presence"), `{"state":"away"}`)
	f.fails(t, 2, []string{"presence", "set", "busy"}, `unknown presence state "busy"`, "usage: meshctl presence set")
	f.fails(t, 2, []string{"presence", "set"}, "missing argument")
	f.fails(t, 2, []string{"presence", "online"}, `unknown command "presence online"`)
	f.none(t)

	// help lists the group's own command and its subcommand.
	for _, args := range [][]string{{"help", "presence"}, {"presence", "-h"}, {"help"}} {
		out := ok(t, args...)
		if !strings.Contains(out, "  presence  ") && !strings.Contains(out, "  presence    ") || !strings.Contains(out, "presence set online|away|offline") {
			t.Errorf("%v:\n%s", args, out)
		}
	}
	if out := ok(t, "help", "presence", "set"); !strings.HasPrefix(out, "usage: meshctl presence set") {
		t.Errorf("help presence set:\n%s", out)
	}
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in        string
		multiline bool
		want      string
	}{
		{"plain text, ünïcode ✓", false, "plain text, ünïcode ✓"},
		{"a\nb\tc", true, "a\nb\tc"},
		{"a\nb\tc", false, `a\nb\tc`},
		{"\x1b[31mred\x07", true, `\x1b[31mred\a`},
		{"\r\u0085", true, `\r\u0085`},
		{"abc\u202edef\u2066", false, `abc\u202edef\u2066`},
		{"line\u2028sep", true, `line\u2028sep`},
		{"bad\xffutf8", false, `bad\xffutf8`},
	} {
		if got := printable(tc.in, tc.multiline); got != tc.want {
			t.Errorf("printable(%q, %v) = %q, want %q", tc.in, tc.multiline, got, tc.want)
		}
	}
}

// TestInboxPages: meshctl inbox follows the answers' next cursors and
// prints the pages as one listing: the text and the --json output are
// those of a single answer holding every item; --limit N asks for the
// newest N and stops at N items; a page that fails ends the JSON
// output well-formed and exits 1.
func TestInboxPages(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	items, _ := inboxItems()
	pages := map[string]api.Inbox{
		"start": {Items: items[:2], Next: "c1"},
		"":      {Items: items[:2], Next: "c1"},
		"c1":    {Items: items[2:4], Next: "c2"},
		"c2":    {Items: items[4:]},
	}
	f.answerQuery("GET /v1/inbox", func(q url.Values) fakeAnswer {
		p, ok := pages[q.Get("cursor")]
		if !ok {
			return fakeAnswer{status: 400, body: api.Error{Error: "bad cursor"}}
		}
		return fakeAnswer{status: 200, body: p}
	})
	cursors := func() []string {
		var out []string
		for _, r := range f.take() {
			out = append(out, r.Query.Encode())
		}
		return out
	}

	single := newFakeMeshd(t)
	single.answer("GET /v1/inbox", 200, api.Inbox{Items: items})
	if got, want := f.ok(t, "", "inbox"), single.ok(t, "", "inbox"); got != want {
		t.Errorf("paged text output:\n%s\nwant:\n%s", got, want)
	}
	if got, want := cursors(), []string{"cursor=start", "cursor=c1", "cursor=c2"}; !slices.Equal(got, want) {
		t.Errorf("queries %v, want %v", got, want)
	}
	want, err := json.MarshalIndent(api.Inbox{Items: items}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ok(t, "", "inbox", "--all", "--json"); got != string(want)+"\n" {
		t.Errorf("paged --json output:\n%s\nwant:\n%s", got, want)
	}
	if got, want := cursors(), []string{"all=1&cursor=start", "all=1&cursor=c1", "all=1&cursor=c2"}; !slices.Equal(got, want) {
		t.Errorf("queries %v, want %v", got, want)
	}
	// The wait goes with the first call only.
	f.ok(t, "", "inbox", "--wait", "--timeout", "1s")
	if got, want := cursors(), []string{"cursor=start&timeout=1s&wait=1", "cursor=c1", "cursor=c2"}; !slices.Equal(got, want) {
		t.Errorf("queries %v, want %v", got, want)
	}

	// --limit 3: the newest three, the second page asked for one more.
	got := decode[api.Inbox](t, f.ok(t, "", "inbox", "--limit", "3", "--json"))
	if len(got.Items) != 3 || got.Items[0].ID != "e1" || got.Items[2].ID != "e3" {
		t.Errorf("--limit 3: %+v", got.Items)
	}
	if got, want := cursors(), []string{"limit=3", "cursor=c1&limit=1"}; !slices.Equal(got, want) {
		t.Errorf("queries %v, want %v", got, want)
	}

	// A failing page: what was listed stays well-formed JSON, exit 1.
	pages["c1"] = api.Inbox{Items: items[2:4], Next: "gone"}
	r := f.mc(t, "", "inbox", "--json")
	if r.code != 1 || !strings.Contains(r.stderr, "bad cursor") {
		t.Fatalf("failing page: exit %d, stderr %q", r.code, r.stderr)
	}
	if in := decode[api.Inbox](t, r.stdout); len(in.Items) != 4 {
		t.Errorf("failing page: %d items listed, want 4", len(in.Items))
	}
	// The empty inbox, through the same path.
	pages["start"] = api.Inbox{Items: []api.Item{}}
	if out := f.ok(t, "", "inbox", "--json"); out != "{\n  \"items\": []\n}\n" {
		t.Errorf("empty --json: %q", out)
	}
	if out := f.ok(t, "", "inbox"); out != "no unread items\n" {
		t.Errorf("empty: %q", out)
	}
}

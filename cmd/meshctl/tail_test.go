package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// Items as meshd streams them.
var (
	tailDM = api.Item{
		ID: "0193a0c4-0000-7000-8000-0000000000d1", Kind: "message", To: "@bob", Priority: "high", Wakes: true,
		From: api.Party{Name: "alice", Fingerprint: "1a2b3c4d5e6f7a8b"},
		Sent: time.Date(2026, 11, 21, 12, 0, 1, 0, time.Local), Body: "lunch?",
	}
	tailChannel = api.Item{
		ID: "0193a0c4-0000-7000-8000-0000000000c1", Kind: "message", To: "#ops", Channel: "ops", Priority: "normal", Wakes: true,
		From: api.Party{Name: "carol", Fingerprint: "5e6f7a8b1a2b3c4d"},
		Sent: time.Date(2026, 11, 21, 12, 0, 2, 0, time.Local), Body: "deploy done",
	}
	tailRequest = api.Item{
		ID: "0193a0c4-0000-7000-8000-0000000000e1", Kind: "request", To: "@bob", Priority: "high", Wakes: true,
		From: api.Party{Name: "alice", Fingerprint: "1a2b3c4d5e6f7a8b"},
		Sent: time.Date(2026, 11, 21, 12, 0, 3, 0, time.Local), RequestID: "0193a0c4-0000-7000-8000-0000000000f1",
		Intent: "run-tests", Hop: hop(0), Params: json.RawMessage(`{"branch":"main"}`),
	}
	tailMuted = api.Item{
		ID: "0193a0c4-0000-7000-8000-0000000000a1", Kind: "message", To: "#random", Channel: "random", Priority: "low",
		From: api.Party{Name: "carol", Fingerprint: "5e6f7a8b1a2b3c4d"},
		Sent: time.Date(2026, 11, 21, 12, 0, 4, 0, time.Local), Body: "lunch at noon",
	}
)

// itemText is an item in the text form of 'meshctl inbox'.
func itemText(t *testing.T, it api.Item) string {
	t.Helper()
	var b strings.Builder
	if err := writeItem(&b, &it, false); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestTailText(t *testing.T) {
	// Not parallel: it replaces interruptContext, which every
	// command that runs until stopped reads.
	f := newFakeEvents(t)
	stdout, stderr, interrupt, _ := f.background(t, "tail")
	f.waitReader(t)
	f.item(t, tailDM)
	f.item(t, tailRequest)
	f.lagged()
	f.item(t, tailChannel)
	want := itemText(t, tailDM) + itemText(t, tailRequest) + itemText(t, tailChannel)
	stdout.waitFor(t, itemText(t, tailChannel))
	if code := interrupt(); code != 0 {
		t.Fatalf("tail after Ctrl-C: exit %d, stderr %q", code, stderr.String())
	}
	if got := stdout.String(); got != want {
		t.Errorf("tail output\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(stdout.String(), `    {`+"\n"+`      "branch": "main"`) {
		t.Errorf("request params not shown as 'meshctl inbox' shows them:\n%s", stdout)
	}
	if got := stderr.String(); !strings.HasPrefix(got, "meshctl: fell behind") || !strings.Contains(got, "meshctl inbox") || strings.Count(got, "\n") != 1 {
		t.Errorf("lagged notice %q", got)
	}
	if reqs := f.take(); len(reqs) != 0 {
		t.Errorf("tail made requests besides the stream: %+v", reqs)
	}
}

func TestTailJSON(t *testing.T) {
	// Not parallel: it replaces interruptContext, which every
	// command that runs until stopped reads.
	f := newFakeEvents(t)
	stdout, _, interrupt, _ := f.background(t, "tail", "--json")
	f.waitReader(t)
	items := []api.Item{tailDM, tailRequest, tailChannel}
	for _, it := range items {
		f.item(t, it)
	}
	stdout.waitFor(t, tailChannel.ID)
	if code := interrupt(); code != 0 {
		t.Fatalf("tail --json after Ctrl-C: exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != len(items) {
		t.Fatalf("tail --json printed %d lines, want %d:\n%s", len(lines), len(items), stdout)
	}
	for i, line := range lines {
		got := decode[api.Item](t, line)
		want := items[i]
		// Times travel as RFC 3339 text: compare the instant.
		if !got.Sent.Equal(want.Sent) {
			t.Errorf("line %d: sent %v, want %v", i, got.Sent, want.Sent)
		}
		got.Sent, want.Sent = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("line %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// TestTailHistory prints the newest items first, then the stream, and an
// item in both once.
func TestTailHistory(t *testing.T) {
	// Not parallel: it replaces interruptContext, which every
	// command that runs until stopped reads.
	f := newFakeEvents(t)
	read := tailDM
	read.Read = true
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: []api.Item{read, tailChannel}})
	stdout, _, interrupt, _ := f.background(t, "tail", "--all-history", "2")
	f.waitReader(t)
	stdout.waitFor(t, tailChannel.ID)
	f.item(t, tailChannel) // delivered as tail started: listed and streamed
	f.item(t, tailRequest)
	stdout.waitFor(t, tailRequest.ID)
	if code := interrupt(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := itemText(t, read) + itemText(t, tailChannel) + itemText(t, tailRequest)
	if got := stdout.String(); got != want {
		t.Errorf("tail --all-history output\n got %q\nwant %q", got, want)
	}
	if !strings.HasPrefix(want, "  [high]") {
		t.Errorf("a read item is not marked read: %q", want)
	}
	if q := f.one(t, "GET /v1/inbox").Query; q.Encode() != "all=1&limit=2" {
		t.Errorf("history query %v", q)
	}
}

// TestTailMeshdStops: when meshd goes away, tail says so and exits 1.
func TestTailMeshdStops(t *testing.T) {
	// Not parallel: it replaces interruptContext, which every
	// command that runs until stopped reads.
	f := newFakeEvents(t)
	stdout, stderr, _, done := f.background(t, "tail")
	f.waitReader(t)
	f.item(t, tailDM)
	stdout.waitFor(t, tailDM.ID)
	f.end()
	select {
	case code := <-done:
		if code != 1 {
			t.Fatalf("tail when meshd stops: exit %d, want 1", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tail did not end when meshd did")
	}
	if got := stderr.String(); !strings.HasPrefix(got, "meshctl: meshd ended the event stream") || !strings.Contains(got, "hint: meshd stopped; start it again with: meshd --home "+f.home) {
		t.Errorf("stderr %q", got)
	}
}

func TestTailErrors(t *testing.T) {
	t.Parallel()
	// No meshd: the usual message and hint.
	f := newFakeMeshd(t)
	dir := t.TempDir()
	fails(t, 1, []string{"--home", dir, "tail"}, "meshd is not running", "hint: start it with: meshd --home "+dir)
	// A refusal carries meshd's message and hint.
	f.answer("GET /v1/events", 403, api.Error{Error: "not allowed", Hint: "ask nicely"})
	f.fails(t, 1, []string{"tail"}, "meshctl: not allowed\nhint: ask nicely")
	f.fails(t, 2, []string{"tail", "extra"}, `unexpected argument "extra"`, "usage: meshctl tail")
	f.fails(t, 2, []string{"tail", "--all-history", "-1"}, "--all-history must not be negative")
}

func TestWait(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)

	// A waking item: exit 0, one line per waking item; muted ones and
	// read ones are left out, and content that follows the header is noted.
	read := tailChannel
	read.Read = true
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: []api.Item{read, tailMuted, tailDM, tailRequest}})
	out := f.ok(t, "", "wait")
	head := func(it api.Item) string { return strings.SplitN(itemText(t, it), "\n", 2)[0] }
	if want := head(tailDM) + "\n" + head(tailRequest) + " ...\n"; out != want {
		t.Errorf("wait output\n got %q\nwant %q", out, want)
	}
	if q := f.one(t, "GET /v1/inbox").Query; q.Encode() != "timeout=5m0s&wait=1" {
		t.Errorf("wait query %v", q)
	}
	got := decode[api.Inbox](t, f.ok(t, "", "wait", "--json", "--timeout", "10s"))
	if len(got.Items) != 2 || got.Items[0].ID != tailDM.ID || got.Items[1].ID != tailRequest.ID || got.TimedOut {
		t.Errorf("wait --json: %+v", got)
	}
	q := f.one(t, "GET /v1/inbox").Query
	if d, err := time.ParseDuration(q.Get("timeout")); err != nil || d > 10*time.Second || d < 9*time.Second || q.Get("wait") != "1" {
		t.Errorf("wait --timeout 10s query %v", q)
	}

	// The timeout passes with nothing that wakes: exit 3, after one poll.
	f.answerAfter("GET /v1/inbox", 100*time.Millisecond, 200, api.Inbox{Items: []api.Item{tailMuted}, TimedOut: true})
	r := f.mc(t, "", "wait", "--timeout", "1s")
	if r.code != 3 || r.stdout != "no new items\n" || r.stderr != "" {
		t.Fatalf("timed-out wait: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	f.one(t, "GET /v1/inbox")
	r = f.mc(t, "", "wait", "--timeout", "1s", "--json")
	if in := decode[api.Inbox](t, r.stdout); r.code != 3 || !in.TimedOut || len(in.Items) != 0 {
		t.Fatalf("timed-out wait --json: exit %d, %q", r.code, r.stdout)
	}
	f.take()

	f.fails(t, 2, []string{"wait", "--timeout", "0s"}, "--timeout must be positive")
	f.fails(t, 2, []string{"wait", "now"}, `unexpected argument "now"`)
	f.answer("GET /v1/inbox", 500, api.Error{Error: "store broken", Hint: "check the disk"})
	f.fails(t, 1, []string{"wait"}, "store broken", "hint: check the disk")
	dir := t.TempDir()
	fails(t, 1, []string{"--home", dir, "wait"}, "meshd is not running")
}

// TestTailAttachments: tail prints an "attachments" event with each
// file's path, or the command that fetches one not yet present.
func TestTailAttachments(t *testing.T) {
	// Not parallel: it replaces interruptContext.
	f := newFakeEvents(t)
	stdout, _, interrupt, _ := f.background(t, "tail")
	f.waitReader(t)
	f.send(`event: attachments` + "\n" + `data: {"kind":"attachments","id":"` + tailDM.ID + `","from":{"name":"alice","fingerprint":"1a2b3c4d5e6f7a8b"},` +
		`"attachments":[{"name":"change.patch","size":12,"sha256":"ab","path":"/home/m/change.patch"},{"name":"big.bin","size":9,"sha256":"cd"}]}` + "\n\n")
	stdout.waitFor(t, "big.bin")
	if code := interrupt(); code != 0 {
		t.Fatalf("tail after Ctrl-C: exit %d", code)
	}
	want := "attachments of " + tailDM.ID + " from alice (1a2b3c4d5e6f7a8b):\n" +
		"  change.patch (12 bytes, sha256 ab) /home/m/change.patch\n" +
		"  big.bin (9 bytes, sha256 cd) (not fetched: meshctl fetch " + tailDM.ID + " big.bin)\n\n"
	if got := stdout.String(); got != want {
		t.Errorf("tail output\n got %q\nwant %q", got, want)
	}
}

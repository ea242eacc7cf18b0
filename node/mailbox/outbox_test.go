package mailbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

// sender is a send function that records what it was given.
type sender struct {
	mu   sync.Mutex
	got  []*OutgoingMessage
	fail map[string]error // by file name
	n    int
}

func (s *sender) send(m *OutgoingMessage) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
	if err := s.fail[m.File]; err != nil {
		return Result{}, err
	}
	s.n++
	r := Result{MessageID: envID(s.n)}
	if m.Kind == proto.KindRequest {
		r.RequestID = reqID
	}
	return r, nil
}

func (s *sender) files() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.got {
		out = append(out, m.File)
	}
	return out
}

// outboxEnv is an outbox running in a test.
type outboxEnv struct {
	dir  string // the mailbox root
	o    *Outbox
	s    *sender
	stop func()
}

func startOutbox(t *testing.T, cfg OutboxConfig, s *sender, setup func(dir string)) *outboxEnv {
	t.Helper()
	return startOutboxIn(t, filepath.Join(t.TempDir(), "mailbox"), cfg, s, setup)
}

// startOutboxIn is startOutbox on the mailbox root dir, as a restart.
func startOutboxIn(t *testing.T, dir string, cfg OutboxConfig, s *sender, setup func(dir string)) *outboxEnv {
	t.Helper()
	if cfg.ScanInterval == 0 {
		cfg.ScanInterval = 20 * time.Millisecond
	}
	cfg.Now = func() time.Time { return t0 }
	o, err := OpenOutbox(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(dir)
	}
	if s == nil {
		s = &sender{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx, s.send) }()
	env := &outboxEnv{dir: dir, o: o, s: s}
	env.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(env.stop)
	return env
}

// drop writes a file the way agents should: a dot name, then a rename.
func (e *outboxEnv) drop(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(e.dir, OutboxDir, ".draft-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.dir, OutboxDir, name)); err != nil {
		t.Fatal(err)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	testwait.For(t, timeout, path+" to appear", func() bool { _, err := os.Stat(path); return err == nil })
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOutboxSend(t *testing.T) {
	e := startOutbox(t, OutboxConfig{}, nil, nil)
	content := "to: #General\nkind: Message\nIn-Reply-To: " + replyTo.String() + "\n---\nhello\n---\nFrom: x\n"
	e.drop(t, "note.txt", content)
	sent := filepath.Join(e.dir, SentDir, "note.txt")
	waitFile(t, sent, 5*time.Second)
	if got := readFile(t, sent); got != content {
		t.Errorf("sent file %q, want the agent's file unchanged", got)
	}
	wantSidecar := "Message-ID: " + envID(1).String() + "\nSent: 2026-11-21T12:00:01.123Z\n"
	if got := readFile(t, sent+".sent"); got != wantSidecar {
		t.Errorf(".sent %q, want %q", got, wantSidecar)
	}
	m := e.s.got[0]
	if m.File != "note.txt" || m.Channel != "general" || m.Peer != "" || m.Kind != proto.KindMessage ||
		m.Body != "hello\n---\nFrom: x" || m.InReplyTo == nil || *m.InReplyTo != replyTo {
		t.Errorf("message %+v", m)
	}

	// A request, and a second file of the same name.
	e.drop(t, "note.txt", "To: @bob\nKind: request\nIntent: run-tests\nReply-To: "+parentReqID.String()+"\n---\n{\"suite\": \"unit\"}\n")
	waitFile(t, filepath.Join(e.dir, SentDir, "note-2.txt"), 5*time.Second)
	sidecar := readFile(t, filepath.Join(e.dir, SentDir, "note-2.txt.sent"))
	if !strings.Contains(sidecar, "Request-ID: "+reqID.String()+"\n") {
		t.Errorf("request .sent %q lacks the Request-ID", sidecar)
	}
	m = e.s.got[1]
	if m.Kind != proto.KindRequest || m.Peer != "bob" || m.Intent != "run-tests" || *m.ReplyTo != parentReqID {
		t.Errorf("request %+v", m)
	}
	if js, _ := proto.CBORToJSON(m.Params); string(js) != `{"suite":"unit"}` {
		t.Errorf("params %s", js)
	}

	e.stop()
	st := e.o.Stats()
	if st.Picked != 2 || st.Sent != 2 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	if es, _ := os.ReadDir(filepath.Join(e.dir, processingDir)); len(es) != 0 {
		t.Errorf(".processing holds %v", es)
	}
}

func TestOutboxRefusals(t *testing.T) {
	s := &sender{fail: map[string]error{
		"send.txt": errors.New("no route to bob"),
		"hint.txt": &SendError{Reason: "unknown-peer", Hint: "check the roster with 'meshctl roster show'", Err: errors.New("no member named zed")},
	}}
	cases := []struct {
		file, content string
		reason        string // FailedByReason key
		errLine       string // the first line of the .error file, or a part of it
		hint          string // a part of the hint line; "" for none
	}{
		{"send.txt", "To: @bob\n---\nhi\n", ReasonSend, "no route to bob", ""},
		{"hint.txt", "To: @zed\n---\nhi\n", "unknown-peer", "no member named zed", "meshctl roster show"},
		{"malformed.txt", "To: @bob\nhello\n---\n", ReasonMalformed, `bad outbox file: line 2: "hello" is not a header (want Name: value)`, "a line ---"},
		{"unknown.txt", "To: @bob\nSubjet: hi\n---\n", ReasonMalformed, `bad outbox file: line 2: unknown header "Subjet" (want To, Kind, Intent, Reply-To, Request-ID, Status, In-Reply-To, Attach)`, "README.txt"},
		{"noto.txt", "Kind: message\n---\nhi\n", ReasonMalformed, "bad outbox file: missing To", "To: #general"},
		{"nointent.txt", "To: @bob\nKind: request\n---\n{}\n", ReasonMalformed, "bad outbox file: a request needs an Intent header", "Intent: run-tests"},
		{"badjson.txt", "To: @bob\nKind: request\nIntent: x\n---\n{\"a\": \n", ReasonMalformed, "bad outbox file: body: params: invalid json", "one JSON value"},
		{"nosep.txt", "To: @bob\n", ReasonMalformed, `bad outbox file: no "---" line after the headers`, "a line ---"},
		{"dup.txt", "To: @bob\nto: @carol\n---\n", ReasonMalformed, "bad outbox file: line 2: header To again (first on line 1)", ""},
		{"wrongkind.txt", "To: @bob\nIntent: x\n---\n", ReasonMalformed, "bad outbox file: line 2: header Intent applies to a request, not a message", ""},
		{"reqchan.txt", "To: #general\nKind: request\nIntent: x\n---\n", ReasonMalformed, "bad outbox file: line 1: a request goes to a peer, not to channel #general", ""},
		{"nostatus.txt", "To: @bob\nKind: response\nRequest-ID: " + reqID.String() + "\n---\n", ReasonMalformed, "a response needs a Status header", ""},
		{"badstatus.txt", "To: @bob\nKind: response\nRequest-ID: " + reqID.String() + "\nStatus: done\n---\n", ReasonMalformed, `line 4: unknown status "done"`, ""},
		{"badid.txt", "To: @bob\nIn-Reply-To: 42\n---\n", ReasonMalformed, `line 2: In-Reply-To "42" is not an id`, ""},
		{"badkey.txt", "To: ed25519:abc\n---\n", ReasonMalformed, "line 1: To: invalid public key", ""},
		{"badchan.txt", "To: #Bad Name!\n---\n", ReasonMalformed, "line 1: To:", ""},
		{"big.txt", "To: @bob\n---\n" + strings.Repeat("x", 2000), ReasonTooLarge, "file exceeds 1024 bytes", "256 KiB"},
	}
	e := startOutbox(t, OutboxConfig{MaxFileSize: 1024}, s, func(dir string) {
		for _, c := range cases {
			if err := os.WriteFile(filepath.Join(dir, OutboxDir, c.file), []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join(e.dir, FailedDir, c.file)
			waitFile(t, path, 5*time.Second)
			waitFile(t, path+errorSuffix, time.Second)
			if got := readFile(t, path); got != c.content {
				t.Errorf("failed file %q, want the agent's file unchanged", got)
			}
			lines := strings.Split(strings.TrimSuffix(readFile(t, path+errorSuffix), "\n"), "\n")
			if !strings.Contains(lines[0], c.errLine) {
				t.Errorf(".error %q, want %q", lines[0], c.errLine)
			}
			switch {
			case c.hint == "" && len(lines) != 1:
				t.Errorf(".error has %d lines, want 1: %q", len(lines), lines)
			case c.hint != "" && (len(lines) != 2 || !strings.HasPrefix(lines[1], "hint: ") || !strings.Contains(lines[1], c.hint)):
				t.Errorf(".error hint %q, want one containing %q", lines[1:], c.hint)
			}
		})
	}
	e.stop()
	st := e.o.Stats()
	want := map[string]uint64{}
	for _, c := range cases {
		want[c.reason]++
	}
	if st.Failed != uint64(len(cases)) || st.Sent != 0 || st.Malformed != want[ReasonMalformed] || !mapsEqual(st.FailedByReason, want) {
		t.Errorf("stats %+v, want failures %v", st, want)
	}
	// Only the files that parsed reached the send function.
	if got := e.s.files(); !slices.Equal(got, []string{"hint.txt", "send.txt"}) {
		t.Errorf("sent %q", got)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestOutboxIgnoresUntilRenamed(t *testing.T) {
	e := startOutbox(t, OutboxConfig{}, nil, nil)
	out := filepath.Join(e.dir, OutboxDir)
	for _, name := range []string{".draft-1", "x.tmp", ".hidden.txt", "notes.md"} {
		if err := os.WriteFile(filepath.Join(out, name), []byte("To: @bob\n---\nhi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(out, "x.tmp"), filepath.Join(out, "x.txt")); err != nil {
		t.Fatal(err)
	}
	// The scan that picks x.txt reads the whole folder, the files above
	// included: x.txt is the only file it may take.
	waitFile(t, filepath.Join(e.dir, SentDir, "x.txt"), 5*time.Second)
	if got := e.s.files(); len(got) != 1 || got[0] != "x.txt" {
		t.Fatalf("picked %q, want only x.txt", got)
	}
	for _, name := range []string{".draft-1", ".hidden.txt", "notes.md", "README.txt"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := readFile(t, filepath.Join(out, "README.txt")); got != readme {
		t.Errorf("README.txt changed")
	}
}

func TestOutboxRecovery(t *testing.T) {
	e := startOutbox(t, OutboxConfig{}, nil, func(dir string) {
		p := filepath.Join(dir, processingDir, "interrupted.txt")
		if err := os.WriteFile(p, []byte("To: @bob\n---\nagain\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	waitFile(t, filepath.Join(e.dir, SentDir, "interrupted.txt"), 5*time.Second)
	e.stop()
	if st := e.o.Stats(); st.Recovered != 1 || st.Picked != 1 || st.Sent != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestOutboxNotifyLatency: with fsnotify, a file is picked up at once, not
// at the next scan.
func TestOutboxNotifyLatency(t *testing.T) {
	e := startOutbox(t, OutboxConfig{ScanInterval: time.Hour}, nil, nil)
	// The first file proves the watch is set up (the initial scan may take
	// it, too).
	e.drop(t, "warmup.txt", "To: @bob\n---\nhi\n")
	waitFile(t, filepath.Join(e.dir, SentDir, "warmup.txt"), 5*time.Second)
	var worst time.Duration
	for i := range 5 {
		name := fmt.Sprintf("n%d.txt", i)
		start := time.Now()
		e.drop(t, name, "To: @bob\n---\nhi\n")
		waitFile(t, filepath.Join(e.dir, SentDir, name), 5*time.Second)
		worst = max(worst, time.Since(start))
	}
	t.Logf("worst pick-up latency %v", worst)
	// With a scan an hour apart, any pick-up within seconds came from the
	// watch; how fast it is (milliseconds on an idle machine) is for
	// benchmarks, not for a test that runs beside others.
	if worst > 2*time.Second {
		t.Errorf("pick-up took %v, want under 2s (the watch, not the hourly scan)", worst)
	}
}

// TestOutboxScanOnly: without fsnotify, the periodic scan finds files.
func TestOutboxScanOnly(t *testing.T) {
	e := startOutbox(t, OutboxConfig{NoNotify: true, ScanInterval: 30 * time.Millisecond}, nil, nil)
	e.drop(t, "a.txt", "To: @bob\n---\nhi\n")
	waitFile(t, filepath.Join(e.dir, SentDir, "a.txt"), 5*time.Second)
}

// TestOutboxWatchUnavailable: with no inotify instance left (as on a host
// running 200 nodes as one user), the outbox says so with the fix, and
// scans every ScanOnlyInterval rather than every ScanInterval.
func TestOutboxWatchUnavailable(t *testing.T) {
	saved := newWatcher
	newWatcher = func() (*fsnotify.Watcher, error) { return nil, fmt.Errorf("inotify_init1: %w", syscall.EMFILE) }
	defer func() { newWatcher = saved }()
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	e := startOutbox(t, OutboxConfig{ScanInterval: time.Hour, Logger: log}, nil, func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, OutboxDir, "first.txt"), []byte("To: @bob\n---\nhi\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	// The first scan, at start, takes first.txt; a file dropped after it
	// waits for the next scan, an hour away unless the short interval
	// applies.
	waitFile(t, filepath.Join(e.dir, SentDir, "first.txt"), 5*time.Second)
	if !e.o.Stats().ScanOnly {
		t.Error("Stats().ScanOnly not set")
	}
	e.drop(t, "late.txt", "To: @bob\n---\nhi\n")
	waitFile(t, filepath.Join(e.dir, SentDir, "late.txt"), 5*time.Second)
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "cannot watch for new files") || !strings.Contains(out, "fs.inotify.max_user_instances") {
		t.Errorf("warning without the fix:\n%s", out)
	}
}

// lockedWriter serializes writes to a buffer shared with the test.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestOutboxInterrupted: a send that fails because Run is stopping puts
// the file back in the outbox.
func TestOutboxInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mailbox")
	o, err := OpenOutbox(dir, OutboxConfig{ScanInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	send := func(m *OutgoingMessage) (Result, error) {
		close(entered)
		<-ctx.Done()
		return Result{}, ctx.Err()
	}
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx, send) }()
	(&outboxEnv{dir: dir}).drop(t, "slow.txt", "To: @bob\n---\nhi\n")
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatalf("not picked up; stats %+v", o.Stats())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, OutboxDir, "slow.txt")); err != nil {
		t.Errorf("file not put back: %v", err)
	}
	if es, _ := os.ReadDir(filepath.Join(dir, FailedDir)); len(es) != 0 {
		t.Errorf("failed/ holds %v", es)
	}
}

func TestOutboxClose(t *testing.T) {
	before := runtime.NumGoroutine()
	dir := filepath.Join(t.TempDir(), "mailbox")
	o, err := OpenOutbox(dir, DefaultOutboxConfig())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- o.Run(context.Background(), (&sender{}).send) }()
	testwait.For(t, 5*time.Second, "Run to start", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.running
	})
	if err := o.Run(context.Background(), (&sender{}).send); err == nil || errors.Is(err, ErrClosed) {
		t.Errorf("second Run: %v, want already running", err)
	}
	for range 2 {
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := o.Run(context.Background(), (&sender{}).send); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	// The watcher's goroutines are gone.
	if !testwait.Until(2*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
}

func TestOutboxOpenCleansTemps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mailbox")
	if _, err := OpenOutbox(dir, DefaultOutboxConfig()); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, SentDir, tempPrefix+"1")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutbox(dir, DefaultOutboxConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary file: %v", err)
	}
}

func TestParseOutgoing(t *testing.T) {
	key := pub(bob).String()
	for _, tc := range []struct {
		in   string
		want OutgoingMessage
	}{
		{"To: #general\n---\nhi", OutgoingMessage{To: "#general", Channel: "general", Kind: proto.KindMessage, Body: "hi"}},
		{"\uFEFFTo: bob\r\n---\r\nhi\r\n\n", OutgoingMessage{To: "bob", Peer: "bob", Kind: proto.KindMessage, Body: "hi\r\n"}},
		{"To: " + key + "\n---\n", OutgoingMessage{To: key, Peer: key, Kind: proto.KindMessage}},
		{"TO:   @34750f98bd59fcfc  \n---\n", OutgoingMessage{To: "@34750f98bd59fcfc", Peer: "34750f98bd59fcfc", Kind: proto.KindMessage}},
		{"To: @bob\nKind: request\nIntent: ping\n---\n  \n", OutgoingMessage{To: "@bob", Peer: "bob", Kind: proto.KindRequest, Intent: "ping"}},
		{"To: @bob\nKind: RESPONSE\nRequest-ID: " + reqID.String() + "\nStatus: Rejected\n---\n",
			OutgoingMessage{To: "@bob", Peer: "bob", Kind: proto.KindResponse, RequestID: reqID, Status: proto.StatusRejected}},
	} {
		got, err := ParseOutgoing([]byte(tc.in))
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got.To != tc.want.To || got.Channel != tc.want.Channel || got.Peer != tc.want.Peer || got.Kind != tc.want.Kind ||
			got.Body != tc.want.Body || got.Intent != tc.want.Intent || got.RequestID != tc.want.RequestID ||
			got.Status != tc.want.Status || got.Params != nil || got.Result != nil {
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "---\n", "To: @\n---\n", "To: @bob\n\n---\n", "To: @bob\nKind: note\n---\n",
		"To: @bob\nKind: response\nStatus: completed\n---\n", "To: @bob\nKind: request\nIntent: x\n---\n[1] [2]",
		"To: @bob\n---\n\xff", "To: @bob\nKind: request\nIntent: a\x01b\n---\n"} {
		if _, err := ParseOutgoing([]byte(bad)); !errors.Is(err, ErrBadOutgoing) {
			t.Errorf("%q: %v, want ErrBadOutgoing", bad, err)
		}
	}
}

func FuzzParseOutgoing(f *testing.F) {
	f.Add([]byte("To: #general\n---\nhi"))
	f.Add([]byte("To: @bob\nKind: request\nIntent: x\nReply-To: " + parentReqID.String() + "\n---\n{\"a\":[1,2]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseOutgoing(b)
		if err != nil {
			if !errors.Is(err, ErrBadOutgoing) {
				t.Fatalf("error %v does not wrap ErrBadOutgoing", err)
			}
			return
		}
		if (m.Channel == "") == (m.Peer == "") {
			t.Fatalf("channel %q and peer %q", m.Channel, m.Peer)
		}
	})
}

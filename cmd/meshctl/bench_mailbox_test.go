package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// TestMailboxWatchTimesFiles makes mirror-like files in a mailbox whose day
// and inbox directories appear after the watch starts, and in one that
// exists before: each wanted file is timed once, whether it appears
// before or after it is asked for, and one that never appears is counted.
func TestMailboxWatchTimesFiles(t *testing.T) {
	root := t.TempDir()
	mw, err := watchMailbox(root)
	if err != nil {
		t.Skipf("no inotify here: %v", err)
	}
	defer mw.close()
	day := time.Now().UTC().Format(time.DateOnly)
	inbox := filepath.Join(root, day, "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	id := func(i int) string {
		return "00000000-0000-0000-0000-0000000000" + string(rune('a'+i/10)) + string(rune('0'+i%10))
	}
	write := func(i int) {
		name := filepath.Join(inbox, "101530-"+id(i)[len(id(i))-12:]+".txt")
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Asked for before the file appears.
	mw.want(id(1), sent)
	// The directories were made after the watch: give it time to add the
	// inbox before the next file, which is asked for after it appears.
	deadline := time.Now().Add(5 * time.Second)
	for mw.pending() > 0 {
		write(1)
		if time.Now().After(deadline) {
			t.Fatal("the file asked for before it appeared was never seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	write(2)
	for {
		mw.mu.Lock()
		_, ok := mw.appeared[id(2)[len(id(2))-12:]]
		mw.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a file that appeared before it was asked for was not noted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mw.want(id(2), sent)
	mw.want(id(3), sent) // never written
	lat, missing := mw.finish()
	if len(lat) != 2 || missing != 1 {
		t.Fatalf("timed %d files, %d missing; want 2 and 1", len(lat), missing)
	}
	for _, l := range lat {
		if l <= 0 || l > 10*time.Second {
			t.Errorf("latency %v", l)
		}
	}
}

// TestDecodeBenchItem decodes items as meshd encodes them, through the
// fast path and the full decode, and gets the same fields either way.
func TestDecodeBenchItem(t *testing.T) {
	delivered := time.Date(2026, 11, 21, 10, 15, 30, 123456789, time.UTC)
	for _, body := range []string{
		"bench 0a1b2c3d 42 1763720130123456789 " + strings.Repeat("x", 1000),
		"bench 0a1b2c3d 7 1763720130123456789 with \"quotes\" and \\ later",
		"short",
		"",
		strings.Repeat("é", 100),
	} {
		item := api.Item{ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Kind: "message", To: "#bench", Channel: "bench",
			From: api.Party{Name: `a ,"body":" trick`}, Delivered: delivered, Body: body, Params: json.RawMessage(`{"body":"x"}`)}
		data, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		var it benchItem
		if err := decodeBenchItem(data, &it); err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if it.ID != item.ID || it.Channel != "bench" || !it.Delivered.Equal(delivered) {
			t.Errorf("%q: decoded %+v", body, it)
		}
		// The head of the body, as far as it goes without quote or escape.
		want := body
		if i := strings.IndexAny(want, `"\`); i >= 0 {
			want = want[:i]
		}
		if len(it.Body) < min(len(want), benchBodyHead-4) || !strings.HasPrefix(body, it.Body) {
			t.Errorf("%q: body %q", body, it.Body)
		}
	}
	// Not meshd's field order: decoded in full.
	var it benchItem
	if err := decodeBenchItem([]byte(`{"body":"bench x 1 2 y","id":"i","channel":"c"}`), &it); err != nil || it.Body != "bench x 1 2 y" || it.ID != "i" {
		t.Errorf("full decode: %+v %v", it, err)
	}
	if err := decodeBenchItem([]byte(`{"id":`), &it); err == nil {
		t.Error("a broken item decoded")
	}
}

package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
)

// bloatedStore makes a history store in home dir that held 3,000
// envelopes of 1 KiB, of which retention kept 10.
func bloatedStore(t *testing.T, dir string) (kept []*history.Stored) {
	t.Helper()
	h := home.Home{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := history.Open(h.DBPath(), history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key, _ := ed25519.GenerateKey(nil)
	ch, epoch := proto.NewID(), proto.NewEpoch()
	var batch []*proto.SignedEnvelope
	for i := 0; i < 3000; i++ {
		se, err := proto.SignEnvelope(key, &proto.Envelope{
			ID: proto.NewID(), From: proto.PubKeyOf(key), To: proto.ToChannel(ch), Kind: proto.KindMessage,
			TS: time.Now().UnixMilli(), TTL: 300, Seq: uint64(i + 1), Epoch: epoch,
			Message: &proto.Message{Body: strings.Repeat("x", 1024)},
		})
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, se)
		if len(batch) == 500 {
			if _, err := st.PutBatch(batch, false); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := st.Prune(ch, 0, 10, time.Now()); err != nil {
		t.Fatal(err)
	}
	msgs, err := st.ChannelMessages(ch, time.Time{}, 0)
	if err != nil || len(msgs) != 10 {
		t.Fatalf("%d messages kept (%v)", len(msgs), err)
	}
	for i := range msgs {
		kept = append(kept, &msgs[i])
	}
	return kept
}

func TestCompact(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "node")
	kept := bloatedStore(t, dir)
	h := home.Home{Dir: dir}
	before, _ := os.Stat(h.DBPath())

	// Refused while the home is locked, as by a running meshd.
	release, err := h.Lock()
	if err != nil {
		t.Fatal(err)
	}
	r := fails(t, 1, []string{"--home", dir, "compact"}, "in use")
	if !strings.Contains(r.stderr, "hint: stop meshd") {
		t.Errorf("stderr %q lacks the hint", r.stderr)
	}
	release()

	var res compactResult
	if err := json.Unmarshal([]byte(ok(t, "--home", dir, "compact", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(h.DBPath())
	if res.Before != before.Size() || res.After != after.Size() || after.Size() >= before.Size()/4 {
		t.Fatalf("compact: %+v; file %d → %d bytes, want it under a quarter", res, before.Size(), after.Size())
	}
	if _, err := os.Stat(h.DBPath() + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	// The compact store opens and holds what it held.
	st, err := history.Open(h.DBPath(), history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, m := range kept {
		got, err := st.Get(m.From, m.ID)
		if err != nil || string(got.Raw) != string(m.Raw) {
			t.Fatalf("envelope %s after compact: %v", m.ID, err)
		}
	}
	st.Close()

	if out := ok(t, "--home", dir, "compact"); !strings.HasPrefix(out, "compacted "+h.DBPath()+": ") {
		t.Errorf("compact output %q", out)
	}
	fails(t, 1, []string{"--home", filepath.Join(t.TempDir(), "empty"), "compact"}, "no history store")
	fails(t, 2, []string{"--home", dir, "compact", "now"}, `unexpected argument "now"`)
}

func TestSizeText(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 5 << 30: "5.0 GiB"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

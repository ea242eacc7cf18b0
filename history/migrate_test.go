package history

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// v1Manifest says what testdata/store-v1.db holds. The store and the
// manifest were made by the history package of meshd 9798b00 (schema 1),
// with the generator in testdata/genv1.
type v1Manifest struct {
	Envelopes []string            `json:"envelopes"`
	Pruned    []string            `json:"pruned"`
	Inbox     []v1InboxItem       `json:"inbox"`
	Queue     map[string][]string `json:"queue"`
	Channel   string              `json:"channel"`
	Epoch     string              `json:"epoch"`
	Counters  map[string]uint64   `json:"counters"`
}

type v1InboxItem struct {
	ID       string `json:"id"`
	From     string `json:"from"`
	Priority uint8  `json:"priority"`
	Read     bool   `json:"read"`
	Wakes    bool   `json:"wakes"`
}

func parseHexEnv(t *testing.T, h string) *proto.SignedEnvelope {
	t.Helper()
	raw, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	se, err := proto.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	return se
}

// copyV1 copies the schema 1 fixture into a temporary directory.
func copyV1(t *testing.T) (string, v1Manifest) {
	t.Helper()
	b, err := os.ReadFile("testdata/store-v1.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var man v1Manifest
	mb, err := os.ReadFile("testdata/store-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &man); err != nil {
		t.Fatal(err)
	}
	return path, man
}

func schemaAt(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := schemaOf(db)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUpgradeV1 opens a store written by the previous release (schema 1,
// envelopes keyed by id alone) and checks that every envelope, dedupe
// entry, sequence mark, inbox item, queue entry and send counter survives
// the upgrade to (id, sender) keys, and that the sender budgets are
// counted from what is stored.
func TestUpgradeV1(t *testing.T) {
	t.Parallel()
	path, man := copyV1(t)
	if v := schemaAt(t, path); v != 1 {
		t.Fatalf("fixture schema %d, want 1", v)
	}
	if _, err := CheckFile(path); err != nil {
		t.Fatalf("check the v1 fixture: %v", err)
	}
	// The fixture's clock: its queued DMs (ttl 300 s) are still live.
	var qts int64
	for _, raws := range man.Queue {
		qts = parseHexEnv(t, raws[0]).TS
	}
	clk := &testClock{t: time.UnixMilli(qts)}
	s := openAt(t, path, Config{Now: clk.now})
	checkDB(t, s)

	envs := map[uuid.UUID]*proto.SignedEnvelope{}
	direct := map[proto.PubKey]Usage{}
	for _, h := range man.Envelopes {
		se := parseHexEnv(t, h)
		envs[se.ID] = se
		got, err := s.Get(se.From, se.ID)
		if err != nil {
			t.Fatalf("envelope %s lost in the upgrade: %v", se.ID, err)
		}
		if !bytes.Equal(got.Raw, se.Raw) || got.From != se.From || got.Seq != se.Seq || got.To != se.To {
			t.Fatalf("envelope %s changed in the upgrade", se.ID)
		}
		if seen, err := s.Seen(se.From, se.ID); err != nil || !seen {
			t.Fatalf("dedupe entry of %s lost: %v %v", se.ID, seen, err)
		}
		if se.To.Kind == proto.DestPeer {
			u := direct[se.From]
			u.Bytes += uint64(len(se.Raw))
			u.Envelopes++
			direct[se.From] = u
		}
	}
	for _, h := range man.Pruned {
		se := parseHexEnv(t, h)
		if _, err := s.Get(se.From, se.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("pruned envelope %s: %v, want ErrNotFound", se.ID, err)
		}
		if seen, err := s.Seen(se.From, se.ID); err != nil || !seen {
			t.Fatalf("dedupe entry of pruned %s lost: %v %v", se.ID, seen, err)
		}
		if added, err := s.Put(se, false); err != nil || added {
			t.Fatalf("pruned %s stored again after the upgrade: %v %v", se.ID, added, err)
		}
	}
	st := mustStats(t, s)
	if st.Envelopes != len(man.Envelopes) {
		t.Fatalf("%d envelopes after the upgrade, want %d", st.Envelopes, len(man.Envelopes))
	}

	// Inbox: every item with its state, in delivery order.
	items, err := s.Inbox(InboxFilter{})
	if err != nil || len(items) != len(man.Inbox) {
		t.Fatalf("inbox: %d items, %v; want %d", len(items), err, len(man.Inbox))
	}
	for _, want := range man.Inbox {
		id := uuid.MustParse(want.ID)
		fb, _ := hex.DecodeString(want.From)
		it, err := s.InboxEntry(proto.PubKey(fb), id)
		if err != nil {
			t.Fatalf("inbox item %s lost: %v", id, err)
		}
		if uint8(it.Priority) != want.Priority || it.Read != want.Read || it.Wakes != want.Wakes {
			t.Fatalf("inbox item %s: %+v, want %+v", id, it, want)
		}
		if it.Read && it.ReadAt.IsZero() {
			t.Fatalf("inbox item %s lost its read time", id)
		}
	}
	if unread, err := s.Inbox(InboxFilter{UnreadOnly: true}); err != nil || len(unread) != len(man.Inbox)-1 {
		t.Fatalf("unread: %d, %v", len(unread), err)
	}

	// Sequence marks and gaps of the channel: alice 1..6 with 7 and 11
	// missing, bob 1..4 contiguous.
	ch := uuid.MustParse(man.Channel)
	streams, err := s.Gaps(proto.ToChannel(ch))
	if err != nil || len(streams) != 2 {
		t.Fatalf("gaps: %d streams, %v", len(streams), err)
	}
	for _, stm := range streams {
		switch stm.Max {
		case 12:
			if stm.Last != 6 || len(stm.Missing) != 2 || stm.Missing[0] != (SeqRange{7, 7}) || stm.Missing[1] != (SeqRange{11, 11}) {
				t.Fatalf("alice's stream after the upgrade: %+v", stm)
			}
		case 4:
			if !stm.Contiguous() || stm.Last != 4 {
				t.Fatalf("bob's stream after the upgrade: %+v", stm)
			}
		default:
			t.Fatalf("unexpected stream %+v", stm)
		}
	}
	marks, err := s.SeqMarks(ch)
	if err != nil || len(marks) != 2 {
		t.Fatalf("marks: %v %v", marks, err)
	}

	// Queues and counters keep their layout.
	for k, raws := range man.Queue {
		pb, _ := hex.DecodeString(k)
		pending, err := s.Pending(proto.PubKey(pb))
		if err != nil || len(pending) != len(raws) {
			t.Fatalf("queue: %d, %v; want %d", len(pending), err, len(raws))
		}
		for i, h := range raws {
			if hex.EncodeToString(pending[i].Raw) != h {
				t.Fatalf("queue entry %d changed", i)
			}
		}
	}
	epoch, last, ok, err := s.LoadCounters()
	if err != nil || !ok || epoch.String() != man.Epoch || len(last) != len(man.Counters) {
		t.Fatalf("counters: %v %v %v %v", epoch, last, ok, err)
	}
	for d, v := range last {
		if man.Counters[d.String()] != v {
			t.Fatalf("counter %s = %d, want %d", d, v, man.Counters[d.String()])
		}
	}

	// Budgets are counted from the stored DMs.
	got, err := s.SenderUsages()
	if err != nil || len(got) != len(direct) {
		t.Fatalf("sender usage: %v %v, want %v", got, err, direct)
	}
	for k, u := range direct {
		if got[k] != u {
			t.Fatalf("usage of %s = %+v, want %+v", k.Fingerprint(), got[k], u)
		}
	}

	// The upgraded store takes a second envelope with a stored id.
	var dm *proto.SignedEnvelope
	for _, se := range envs {
		if se.To.Kind == proto.DestPeer {
			dm = se
			break
		}
	}
	mallory := newSender(t, "mallory")
	e := mallory.env(t, dm.To, dm.TS, "same id").Envelope
	e.ID = dm.ID
	reused, err := proto.SignEnvelope(mallory.key, &e)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Deliver([]Delivery{{Env: reused, Inbox: true, Priority: PriorityHigh, Wakes: true}})
	if err != nil || out[0] != Added {
		t.Fatalf("deliver a reused id after the upgrade: %v %v", out, err)
	}
	if both, err := s.InboxByID(dm.ID); err != nil || len(both) != 2 {
		t.Fatalf("inbox by id: %d, %v; want 2", len(both), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v := schemaAt(t, path); v != schemaVersion {
		t.Fatalf("schema %d after the upgrade, want %d", v, schemaVersion)
	}
	// Opening again finds nothing to upgrade.
	s2 := openAt(t, path, Config{})
	if n := mustStats(t, s2).Envelopes; n != len(man.Envelopes)+1 {
		t.Fatalf("%d envelopes after reopening, want %d", n, len(man.Envelopes)+1)
	}
	checkDB(t, s2)
}

// TestUpgradeV1OverLimit upgrades a store that sits at its size limit:
// the upgrade runs without the limit, and the store opens.
func TestUpgradeV1OverLimit(t *testing.T) {
	t.Parallel()
	path, man := copyV1(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path, Config{MaxBytes: fi.Size()})
	if n := mustStats(t, s).Envelopes; n != len(man.Envelopes) {
		t.Fatalf("%d envelopes, want %d", n, len(man.Envelopes))
	}
}

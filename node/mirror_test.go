package node

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// mailboxFiles lists the mirror files under a home.
func mailboxFiles(t testing.TB, homeDir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(homeDir, "mailbox", "*", "inbox", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestOutboxToMirrorAcrossNodes(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)

	// An agent on a drops a file into the outbox, rename-into-place.
	outbox := filepath.Join(m.home(0), "mailbox", "outbox")
	draft := filepath.Join(outbox, ".draft")
	if err := os.WriteFile(draft, []byte("To: @b\n---\nhello from a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(draft, filepath.Join(outbox, "hello.txt")); err != nil {
		t.Fatal(err)
	}
	// It is sent, moved to sent/, and lands in b's mailbox as a file.
	waitFor(t, 5*time.Second, "outbox file sent", func() bool {
		_, err := os.Stat(filepath.Join(m.home(0), "mailbox", "sent", "hello.txt"))
		return err == nil
	})
	var got string
	waitFor(t, 5*time.Second, "mirror file on b", func() bool {
		for _, f := range mailboxFiles(t, m.home(1)) {
			data, _ := os.ReadFile(f)
			if strings.Contains(string(data), "hello from a file") {
				got = f
				return true
			}
		}
		return false
	})
	data, _ := os.ReadFile(got)
	v, err := mailbox.Verify(data, mailbox.VerifyOptions{Roster: b.Roster()})
	if err != nil {
		t.Fatalf("mirror file does not verify: %v\n%s", err, data)
	}
	if !v.Signer.Equal(m.ids[0].Pub) || v.Name != "a" {
		t.Fatalf("verified signer %s name %q", v.Signer.Fingerprint(), v.Name)
	}
	// The day's index lists it. The file is written first and the index
	// line after it, so a reader of the index never meets a missing file.
	waitFor(t, 5*time.Second, "index line for "+filepath.Base(got), func() bool {
		idx, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(got)), "index.txt"))
		return strings.Contains(string(idx), filepath.Base(got))
	})

	// A refusal goes to failed/ with its reason.
	os.WriteFile(draft, []byte("To: #nope\n---\nlost?\n"), 0o644)
	os.Rename(draft, filepath.Join(outbox, "bad.txt"))
	errFile := filepath.Join(m.home(0), "mailbox", "failed", "bad.txt.error")
	waitFor(t, 5*time.Second, "failed file", func() bool { _, err := os.Stat(errFile); return err == nil })
	reason, _ := os.ReadFile(errFile)
	if !strings.Contains(string(reason), "nope") {
		t.Fatalf("error file does not name the channel: %s", reason)
	}
	if a.Backend().Counters()["outbox.files_failed"] != 1 {
		t.Fatalf("counters: %v", a.Backend().Counters())
	}
}

func TestMirrorReconcilesMissingFiles(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	if _, err := a.out.Send(api.Send{To: "b", Body: "keep me"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "mirror file", func() bool { return len(mailboxFiles(t, m.home(1))) == 1 })
	// Lose the file (as if the node crashed between commit and mirror).
	f := mailboxFiles(t, m.home(1))[0]
	os.Remove(f)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "reconciled file", func() bool { return len(mailboxFiles(t, m.home(1))) == 1 })
	if b2.Backend().Counters()["mirror.reconciled"] != 1 {
		t.Fatalf("counters: %v", b2.Backend().Counters())
	}
}

// threeFilesThenStop links a and b, has a send b three DMs, waits for
// their mailbox files and stops b.
func threeFilesThenStop(t *testing.T) (*testMesh, *Node) {
	t.Helper()
	m, a, b := linkedPair(t)
	for _, body := range []string{"first", "second", "third"} {
		if _, err := a.out.Send(api.Send{To: "b", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "mirror files", func() bool { return len(mailboxFiles(t, m.home(1))) == 3 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return m, a
}

// Mirror files are written without fsync and checkpointed with syncfs; a
// power loss can leave files after the last checkpoint empty or cut short
// under their final names. A start finds them and writes them again.
func TestMirrorRewritesFilesCutShort(t *testing.T) {
	t.Parallel()
	m, a := threeFilesThenStop(t)
	// A clean stop checkpoints everything it wrote.
	ckpt := filepath.Join(m.home(1), "mailbox", mailbox.CheckpointFile)
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatalf("no checkpoint after a clean stop: %v", err)
	}
	files := mailboxFiles(t, m.home(1))
	whole, _ := os.ReadFile(files[0])
	// What a power loss can leave: one file empty, one cut in its armor,
	// and a checkpoint that never reached the disk.
	if err := os.WriteFile(files[0], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	half, _ := os.ReadFile(files[1])
	if err := os.WriteFile(files[1], half[:len(half)-40], 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(ckpt)
	// The index lists the empty file, and lost the line of the cut one.
	idx := filepath.Join(filepath.Dir(filepath.Dir(files[0])), "index.txt")
	before, _ := os.ReadFile(idx)
	var kept []string
	for _, l := range strings.SplitAfter(string(before), "\n") {
		if !strings.Contains(l, "\tinbox/"+filepath.Base(files[1])+"\t") {
			kept = append(kept, l)
		}
	}
	if len(kept) != 3 { // two lines and what follows the last newline
		t.Fatalf("index before the crash:\n%s", before)
	}
	if err := os.WriteFile(idx, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		ok, err := mailbox.Complete(f)
		if err != nil || ok != (i == 2) {
			t.Fatalf("Complete(file %d) = %v, %v before the repair", i, ok, err)
		}
	}
	b2 := m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "files rewritten", func() bool {
		fs := mailboxFiles(t, m.home(1))
		if len(fs) != 3 {
			return false
		}
		for _, f := range fs {
			if ok, _ := mailbox.Complete(f); !ok {
				return false
			}
		}
		return true
	})
	if c := b2.Backend().Counters(); c["mirror.torn_rewritten"] != 2 || c["mirror.reconciled"] != 2 {
		t.Fatalf("counters: torn_rewritten %d reconciled %d, want 2 and 2", c["mirror.torn_rewritten"], c["mirror.reconciled"])
	}
	for _, f := range mailboxFiles(t, m.home(1)) {
		data, _ := os.ReadFile(f)
		if _, err := mailbox.Verify(data, mailbox.VerifyOptions{Roster: b2.Roster()}); err != nil {
			t.Fatalf("%s does not verify after the repair: %v", f, err)
		}
	}
	if again, _ := os.ReadFile(mailboxFiles(t, m.home(1))[0]); len(again) == 0 || len(whole) == 0 {
		t.Fatal("empty file after the repair")
	}
	// Each file is listed once: the rewrite keeps the line already there
	// and adds the one the crash lost. The loop appends the lines after it
	// writes a batch's files, so the index may lag the files a moment.
	var got []byte
	listedOnce := func() bool {
		got, _ = os.ReadFile(idx)
		for _, f := range mailboxFiles(t, m.home(1)) {
			if strings.Count(string(got), "\tinbox/"+filepath.Base(f)+"\t") != 1 {
				return false
			}
		}
		return true
	}
	if !testwait.Until(5*time.Second, listedOnce) {
		t.Errorf("the index does not list each file once:\n%s", got)
	}
	if n := strings.Count(string(got), "\n"); n != 3 {
		t.Errorf("index has %d lines, want 3:\n%s", n, got)
	}
	waitFor(t, 3*time.Second, "checkpoint recorded again", func() bool { _, err := os.Stat(ckpt); return err == nil })
}

// A crash between a batch's mailbox files and their index lines (or a
// power loss before the checkpoint) leaves files their day's index does
// not list. A start appends the missing lines.
func TestMirrorRestoresIndexLines(t *testing.T) {
	t.Parallel()
	m, a := threeFilesThenStop(t)
	files := mailboxFiles(t, m.home(1))
	idx := filepath.Join(filepath.Dir(filepath.Dir(files[0])), "index.txt")
	whole, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(whole), "\n")
	if len(lines) != 4 { // three lines and what follows the last newline
		t.Fatalf("index before the crash:\n%s", whole)
	}
	// What the crash leaves: one line of three, and no checkpoint.
	if err := os.WriteFile(idx, []byte(lines[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(m.home(1), "mailbox", mailbox.CheckpointFile))
	b2 := m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "index lines restored", func() bool { return b2.Backend().Counters()["mirror.reindexed"] == 2 })
	got, _ := os.ReadFile(idx)
	for _, f := range files {
		if !strings.Contains(string(got), "\tinbox/"+filepath.Base(f)+"\t") {
			t.Errorf("index lacks %s:\n%s", filepath.Base(f), got)
		}
	}
	if n := strings.Count(string(got), "\n"); n != 3 {
		t.Errorf("index has %d lines, want 3:\n%s", n, got)
	}
	if c := b2.Backend().Counters(); c["mirror.reconciled"] != 0 || c["mirror.torn_rewritten"] != 0 {
		t.Errorf("files rewritten: %v", c)
	}
}

// A checkpoint that cannot be recorded is counted and logged once, and
// checkpoints resume when the cause goes away.
func TestMirrorCheckpointFailureCounted(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	ckpt := filepath.Join(m.home(1), "mailbox", mailbox.CheckpointFile)
	os.Remove(ckpt)
	// A directory in the way makes the rename onto it fail.
	if err := os.MkdirAll(filepath.Join(ckpt, "blocker"), 0o755); err != nil {
		t.Fatal(err)
	}
	send := func(body string) {
		t.Helper()
		if _, err := a.out.Send(api.Send{To: "b", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	send("one")
	waitFor(t, 5*time.Second, "failed checkpoint counted", func() bool { return b.Backend().Counters()["mirror.sync_failed"] >= 1 })
	ok := b.Backend().Counters()["mirror.checkpoints"]
	if err := os.RemoveAll(ckpt); err != nil {
		t.Fatal(err)
	}
	send("two")
	waitFor(t, 5*time.Second, "checkpoint recorded", func() bool {
		_, err := os.Stat(ckpt)
		return err == nil && b.Backend().Counters()["mirror.checkpoints"] > ok
	})
	if got := mailbox.ReadCheckpoint(b.home.MailboxDir()); got.IsZero() {
		t.Fatal("checkpoint file unreadable after recovery")
	}
}

// TestMirrorReconcilesSharedID: two senders' DMs that share an id are two
// inbox items and two mailbox files; a start that finds only one of the
// files writes the other, matching files by their From-Key, not by the
// id's tag alone.
func TestMirrorReconcilesSharedID(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	sent, err := a.out.Send(api.Send{To: "b", Body: "from a"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "mirror file", func() bool { return len(mailboxFiles(t, m.home(1))) == 1 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Another sender's DM with the same id, stored while the mirror was
	// not running (as a crash between commit and mirror would leave it).
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	other := proto.PubKeyOf(key)
	se, err := proto.SignEnvelope(key, &proto.Envelope{ID: uuid.MustParse(sent.ID), From: other, To: proto.ToPeer(m.ids[1].Pub),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
		Message: &proto.Message{Body: "from another sender, same id"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := history.Open(filepath.Join(m.home(1), "history.db"), history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := st.Deliver([]history.Delivery{{Env: se, Inbox: true, Priority: history.PriorityHigh, Wakes: true}}); err != nil || out[0] != history.Added {
		t.Fatalf("deliver: %v %v", out, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "reconciled file", func() bool { return len(mailboxFiles(t, m.home(1))) == 2 })
	if c := b2.Backend().Counters()["mirror.reconciled"]; c != 1 {
		t.Fatalf("mirror.reconciled %d, want 1", c)
	}
	var all string
	for _, f := range mailboxFiles(t, m.home(1)) {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all += string(body)
	}
	if !strings.Contains(all, "from a\n") || !strings.Contains(all, "from another sender, same id") {
		t.Fatalf("mailbox files:\n%s", all)
	}
}

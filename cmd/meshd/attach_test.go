//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Attachment tests (PROTOCOL.md §6.8, §13.5) through real meshd
// processes: files listed under the signature, moved in verified chunks,
// served only to members that may read a message naming them.

// randomFile writes size pseudo-random bytes to dir/name.
func randomFile(t *testing.T, dir, name string, size int, seed uint64) (string, []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// attachedPath waits until node i's inbox item id names the path of its
// attachment name in the mailbox, and returns it. (Between the blob's
// verification and its placing, the item names the store's copy.)
func (m *faultMesh) attachedPath(i int, id, name string, within time.Duration) string {
	m.t.Helper()
	var path string
	mbox := filepath.Join(m.homes[i], "mailbox") + string(filepath.Separator)
	m.inboxItem(i, within, func(it api.Item) bool {
		if it.ID != id {
			return false
		}
		for _, a := range it.Attachments {
			if a.Name == name && strings.HasPrefix(a.Path, mbox) {
				path = a.Path
				return true
			}
		}
		return false
	})
	return path
}

func (m *faultMesh) counter(i int, name string) uint64 { return m.status(i).Counters[name] }

// TestAttachmentEmptyFile: an empty file attached to a DM (no chunk at
// all) arrives and is placed, empty. Its fetch's hash loop once waited
// for a chunk that never comes, so the fetch hung and kept its slot.
func TestAttachmentEmptyFile(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	file, _ := randomFile(t, t.TempDir(), "empty.txt", 0, 1)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "nothing in it", "--attach", file)
	path := m.attachedPath(1, sent.ID, "empty.txt", 30*time.Second)
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("empty attachment at %s: %v %v", path, fi, err)
	}
}

// TestAttachmentDMArrivesVerified: a DM with a three-chunk attachment
// arrives with the attachment listed in the mailbox file's Attachments
// header, and the file appears beside it, byte for byte, once verified.
func TestAttachmentDMArrivesVerified(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	file, data := randomFile(t, t.TempDir(), "build.log", 2*256<<10+1000, 1)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "the failing build", "--attach", file)

	path := m.attachedPath(1, sent.ID, "build.log", 30*time.Second)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("attachment at %s: %v (%d bytes, want %d)", path, err, len(got), len(data))
	}
	if !strings.Contains(path, filepath.Join(m.homes[1], "mailbox")) || filepath.Base(filepath.Dir(filepath.Dir(path))) != "attachments" {
		t.Fatalf("attachment path %s is not in the mailbox's attachments folder", path)
	}
	// The message file lists it, and verifies against its signature.
	tag := sent.ID[len(sent.ID)-12:]
	msgs, _ := filepath.Glob(filepath.Join(m.homes[1], "mailbox", "*", "inbox", "*-"+tag+".txt"))
	if len(msgs) != 1 {
		t.Fatalf("%d mailbox files for %s", len(msgs), sent.ID)
	}
	text, _ := os.ReadFile(msgs[0])
	want := `Attachments: "build.log" 525288 bytes sha256 ` + sha(data)
	if !strings.Contains(string(text), want+"\n") {
		t.Fatalf("mailbox file lacks %q:\n%s", want, text)
	}
	if base := strings.TrimSuffix(filepath.Base(msgs[0]), ".txt"); filepath.Base(filepath.Dir(path)) != base {
		t.Fatalf("attachment folder %s is not named after %s", filepath.Dir(path), msgs[0])
	}
	if out := m.ctl(1, "verify", msgs[0]); !strings.Contains(out, "attachments: build.log verified") {
		t.Fatalf("meshctl verify: %s", out)
	}
	// A file swapped in its place fails meshctl verify.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, len(data)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := meshctlRun(t, m.meshctl, "--home", m.homes[1], "verify", msgs[0]); r.code == 0 || !strings.Contains(r.stderr, "does not match its signed SHA-256") {
		t.Fatalf("verify of a swapped attachment: exit %d, %s", r.code, r.stderr)
	}
	if n := m.counter(1, "blob.fetched"); n != 1 {
		t.Fatalf("blob.fetched = %d, want 1", n)
	}
}

// TestAttachmentSendRefusals: meshctl refuses a path it cannot read, and
// meshd a file over attachment_max_mib, before anything is signed.
func TestAttachmentSendRefusals(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--attachment-max-mib", "1")
	r := meshctlRun(t, m.meshctl, "--home", m.homes[0], "dm", "bob", "x", "--attach", filepath.Join(t.TempDir(), "missing"))
	if r.code == 0 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("missing file: exit %d, %s", r.code, r.stderr)
	}
	big, _ := randomFile(t, t.TempDir(), "big.bin", 1<<20+1, 2)
	r = meshctlRun(t, m.meshctl, "--home", m.homes[0], "dm", "bob", "x", "--attach", big)
	if r.code == 0 || !strings.Contains(r.stderr, "over attachment_max_mib") {
		t.Fatalf("file over the limit: exit %d, %s", r.code, r.stderr)
	}
	if n := m.counter(0, "tx.refused.attachment"); n != 1 {
		t.Fatalf("tx.refused.attachment = %d, want 1", n)
	}
}

// TestAttachmentChannelFetchOnDemand: a channel attachment above
// attachment_channel_eager_max_kib is not fetched as the message
// arrives; meshctl fetch fetches it, verified.
func TestAttachmentChannelFetchOnDemand(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--attachment-channel-eager-max-kib", "256")
	m.channel("data")
	file, data := randomFile(t, t.TempDir(), "sample.csv", 300<<10, 3)
	small, smallData := randomFile(t, t.TempDir(), "note.txt", 100, 4)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "send", "#data", "a sample", "--attach", file, "--attach", small)

	// The small one comes eagerly; the large one only on demand.
	p := m.attachedPath(1, sent.ID, "note.txt", 30*time.Second)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, smallData) {
		t.Fatal("small attachment differs")
	}
	it := m.inboxItem(1, 5*time.Second, func(it api.Item) bool { return it.ID == sent.ID })
	for _, a := range it.Attachments {
		if a.Name == "sample.csv" && a.Path != "" {
			t.Fatalf("the large attachment was fetched without meshctl fetch: %s", a.Path)
		}
	}
	if text := m.ctl(1, "inbox", "--all"); !strings.Contains(text, "attachment sample.csv (307200 bytes, ") ||
		!strings.Contains(text, "): not fetched: meshctl fetch "+sent.ID) {
		t.Fatalf("meshctl inbox does not say the attachment waits for meshctl fetch:\n%s", text)
	}
	var out api.Fetched
	meshctlJSON(t, m.meshctl, &out, "--home", m.homes[1], "fetch", sent.ID, "sample.csv")
	if len(out.Attachments) != 1 || out.Attachments[0].SHA256 != sha(data) {
		t.Fatalf("fetch answered %+v", out)
	}
	if got, _ := os.ReadFile(out.Attachments[0].Path); !bytes.Equal(got, data) {
		t.Fatal("fetched attachment differs")
	}
	r := meshctlRun(t, m.meshctl, "--home", m.homes[1], "fetch", sent.ID, "nope.txt")
	if r.code == 0 || !strings.Contains(r.stderr, `no attachment named "nope.txt"`) {
		t.Fatalf("fetch of an unknown name: exit %d, %s", r.code, r.stderr)
	}
}

// TestAttachmentResumesAfterKill: the recipient is killed (SIGKILL)
// mid-transfer; after its restart the fetch resumes from the chunks it
// had made durable, the file is complete and verified, and no partial
// file was ever in the mailbox.
func TestAttachmentResumesAfterKill(t *testing.T) {
	testpar.Parallel(t)
	// bob asks for at most 4 MiB/s of chunks, so the 24 MiB take seconds.
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--attachment-fetch-rate-mib", "4")
	file, data := randomFile(t, t.TempDir(), "dataset.bin", 24<<20, 5)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "the dataset", "--attach", file)

	have := filepath.Join(m.homes[1], "blobs", "part", sha(data)+".have")
	if !testwait.Until(30*time.Second, func() bool { _, err := os.Stat(have); return err == nil }) {
		t.Fatal("bob never checkpointed a chunk")
	}
	if err := m.ds[1].stop(syscall.SIGKILL); err == nil {
		t.Log("bob exited cleanly on SIGKILL?")
	}
	served := m.counter(0, "blob.chunks_served")
	if served >= 96 {
		t.Fatalf("alice served all %d chunks before the kill: the transfer was not cut", served)
	}
	if got, _ := filepath.Glob(filepath.Join(m.homes[1], "mailbox", "*", "attachments", "*", "dataset.bin")); len(got) != 0 {
		t.Fatalf("a partial file is visible in the mailbox: %v", got)
	}
	m.start(1)
	path := m.attachedPath(1, sent.ID, "dataset.bin", 60*time.Second)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("resumed attachment: %v (%d bytes)", err, len(got))
	}
	if total := m.counter(0, "blob.chunks_served"); total >= served+96 {
		t.Fatalf("alice served %d chunks in all, %d before the kill: the fetch started over", total, served)
	}
}

// TestAttachmentNotServedToNonReader: a member that may not read the
// channel message naming a blob gets no chunk of it, even knowing its
// hash and the message's id; with a DM addressed to it that names the
// same blob, it gets the chunk list.
func TestAttachmentNotServedToNonReader(t *testing.T) {
	testpar.Parallel(t)
	r := startRawTarget(t, "", "mallory", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshctlOK(t, r.meshctl, "--home", r.home, "channel", "create", "admins", "--readers", "role:admin")
	file, data := randomFile(t, t.TempDir(), "secret.txt", 1000, 6)
	var toAdmins, toMallory api.Sent
	meshctlJSON(t, r.meshctl, &toAdmins, "--home", r.home, "send", "#admins", "for admins only", "--attach", file)
	meshctlJSON(t, r.meshctl, &toMallory, "--home", r.home, "dm", "mallory", "for mallory", "--attach", file)

	// Until mallory acknowledges it, the sender says why it may never:
	// a node older than attachments drops it as malformed.
	var d api.Delivery
	meshctlJSON(t, r.meshctl, &d, "--home", r.home, "status", toMallory.ID)
	if len(d.Recipients) != 1 || d.Recipients[0].State != "queued" || !strings.Contains(d.Recipients[0].Reason, "older than attachments") {
		t.Fatalf("delivery of a DM with an attachment: %+v", d.Recipients)
	}

	l := r.dial(t, 10*time.Second)
	frames := make(chan []byte, 64)
	l.Start(func(f []byte) { frames <- f })
	defer l.Close()
	ask := func(id string) byte {
		t.Helper()
		f := blobWantFrame(t, r.target, id, sha256.Sum256(data))
		if err := l.Send(f); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
		for {
			select {
			case f := <-frames:
				if what, ok := blobChunkWhat(f); ok {
					return what
				}
			case <-deadline:
				t.Fatal("no blob-chunk answer within 10s")
			}
		}
	}
	if what := ask(toAdmins.ID); what != 3 {
		t.Fatalf("asking with the admins' message: answer kind %d, want 3 (unavailable)", what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := api.NewClient(filepath.Join(r.home, "meshd.sock")).Status(ctx)
	if err != nil || st.Counters["blob.refused"] != 1 {
		t.Fatalf("blob.refused = %d (%v), want 1", st.Counters["blob.refused"], err)
	}
	if what := ask(toMallory.ID); what != 1 {
		t.Fatalf("asking with mallory's own DM: answer kind %d, want 1 (chunk list)", what)
	}
}

// TestAttachmentRequestAndResponse: a request carries an input file and
// its answer a result file, each fetched verified by the other end.
func TestAttachmentRequestAndResponse(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	in, inData := randomFile(t, t.TempDir(), "fix.patch", 1000, 7)
	out, outData := randomFile(t, t.TempDir(), "report.txt", 300<<10, 8)
	var rq api.Sent
	meshctlJSON(t, m.meshctl, &rq, "--home", m.homes[0], "request", "bob", "review", "--attach", in)
	p := m.attachedPath(1, rq.ID, "fix.patch", 30*time.Second)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, inData) {
		t.Fatal("request's attachment differs")
	}
	var rs api.Sent
	meshctlJSON(t, m.meshctl, &rs, "--home", m.homes[1], "respond", rq.RequestID, "completed", "--attach", out)
	p = m.attachedPath(0, rs.ID, "report.txt", 30*time.Second)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, outData) {
		t.Fatal("response's attachment differs")
	}
}

// TestAttachmentFetchPausesOnLowDisk: below mailbox_min_free_mib of free
// space (here: more than any disk has), fetches pause with a warning
// instead of filling the disk.
func TestAttachmentFetchPausesOnLowDisk(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--mailbox-min-free-mib", "1073741824")
	file, _ := randomFile(t, t.TempDir(), "big.bin", 1000, 10)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "a file", "--attach", file)
	if !testwait.Until(30*time.Second, func() bool { return m.counter(1, "blob.paused_disk") > 0 }) {
		t.Fatal("bob's fetch never paused for disk space")
	}
	it := m.inboxItem(1, 10*time.Second, func(it api.Item) bool { return it.ID == sent.ID })
	if len(it.Attachments) != 1 || it.Attachments[0].Path != "" {
		t.Fatalf("the attachment was fetched below the disk watermark: %+v", it.Attachments)
	}
	m.ds[1].waitLog("attachment fetch paused: too little disk space", 10*time.Second)
}

// TestAttachmentFromOutbox: an outbox file's Attach lines attach files;
// a relative path is refused with the file's .error.
func TestAttachmentFromOutbox(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	file, data := randomFile(t, t.TempDir(), "trace.txt", 5000, 11)
	outbox := filepath.Join(m.homes[0], "mailbox", "outbox")
	drop := func(name, text string) {
		tmp := filepath.Join(outbox, "."+name)
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(outbox, name)); err != nil {
			t.Fatal(err)
		}
	}
	drop("trace.txt", "To: @bob\nAttach: "+file+"\n---\nthe trace\n")
	drop("relative.txt", "To: @bob\nAttach: trace.txt\n---\nx\n")
	it := m.inboxItem(1, 30*time.Second, func(it api.Item) bool {
		return it.Body == "the trace" && len(it.Attachments) == 1 && it.Attachments[0].Path != ""
	})
	if got, _ := os.ReadFile(it.Attachments[0].Path); !bytes.Equal(got, data) {
		t.Fatal("outbox attachment differs")
	}
	var errText []byte
	if !testwait.Until(10*time.Second, func() bool {
		var err error
		errText, err = os.ReadFile(filepath.Join(m.homes[0], "mailbox", "failed", "relative.txt.error"))
		return err == nil
	}) {
		t.Fatal("no .error for a relative Attach path")
	}
	if !strings.Contains(string(errText), "is not an absolute path") {
		t.Fatalf(".error says %q", errText)
	}
}

// TestAttachmentFromAnotherReader: carol, away when alice sent a channel
// attachment, gets the message by history sync from bob once alice is
// gone, and fetches the file from bob, who holds it.
func TestAttachmentFromAnotherReader(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob", "carol"})
	m.channel("data")
	if err := m.ds[2].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	file, data := randomFile(t, t.TempDir(), "rows.csv", 600<<10, 12)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "send", "#data", "rows", "--attach", file)
	m.attachedPath(1, sent.ID, "rows.csv", 30*time.Second)
	if err := m.ds[0].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m.start(2)
	p := m.attachedPath(2, sent.ID, "rows.csv", 60*time.Second)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatal("carol's copy differs")
	}
	if n := m.counter(1, "blob.chunks_served"); n < 3 {
		t.Fatalf("bob served %d chunks, want the file's 3", n)
	}
}

// TestAttachmentSenderBudget: bob takes at most 1 MiB of attachments
// listed by alice's kept messages (--attachment-sender-max-mib 1). With a
// 600 KiB channel attachment of hers kept, her DM listing another 600 KiB
// is refused like a DM past sender_store_mib: not stored, mirrored or
// acknowledged (drop.quota, blob.quota, a warning), shown in bob's status;
// alice keeps it queued, and its delivery record says why it may be held.
// Once retention removes her channel message (read, past the channel's
// one-message count), the budget frees and her next re-send lands.
func TestAttachmentSenderBudget(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--attachment-sender-max-mib", "1", "--retention-interval", "1s",
		"--peer-exchange-interval", "2s") // the round that re-sends the refused DM
	m.channel("data", "--retention-messages", "1")
	dir := t.TempDir()
	first, _ := randomFile(t, dir, "one.bin", 600<<10, 13)
	second, data := randomFile(t, dir, "two.bin", 600<<10, 14)
	var s1, s2 api.Sent
	meshctlJSON(t, m.meshctl, &s1, "--home", m.homes[0], "send", "#data", "one", "--attach", first)
	m.attachedPath(1, s1.ID, "one.bin", 30*time.Second)
	meshctlJSON(t, m.meshctl, &s2, "--home", m.homes[0], "dm", "bob", "two", "--attach", second)

	// Refused at bob, unacknowledged: queued at alice, with the reason.
	if !testwait.Until(30*time.Second, func() bool { return m.counter(1, "blob.quota") > 0 }) {
		t.Fatal("the DM past alice's attachment budget at bob was not refused")
	}
	if c := m.status(1).Counters; c["drop.quota"] == 0 || c["rx.delivered.message"] != 1 {
		t.Fatalf("bob: drop.quota %d, rx.delivered.message %d; want the refusal counted and only the channel message delivered",
			c["drop.quota"], c["rx.delivered.message"])
	}
	if out := m.ctl(1, "status"); !strings.Contains(out, "drop.quota") {
		t.Fatalf("bob's status does not show the refusal:\n%s", out)
	}
	m.ds[1].waitLog("its attachments would take its sender past its attachment budget", 10*time.Second)
	var d api.Delivery
	meshctlJSON(t, m.meshctl, &d, "--home", m.homes[0], "status", s2.ID)
	if len(d.Recipients) != 1 || d.Recipients[0].State != "queued" || !strings.Contains(d.Recipients[0].Reason, "attachment budget") {
		t.Fatalf("alice's delivery record of the refused DM: %+v", d.Recipients)
	}
	if out := m.ctl(0, "status", s2.ID); !strings.Contains(out, "queued") || !strings.Contains(out, "attachment_sender_max_mib") {
		t.Fatalf("alice's meshctl status %s:\n%s", s2.ID, out)
	}
	tag := s2.ID[len(s2.ID)-12:]
	if files, _ := filepath.Glob(filepath.Join(m.homes[1], "mailbox", "*", "inbox", "*-"+tag+".txt")); len(files) != 0 {
		t.Fatalf("the refused DM was mirrored: %v", files)
	}

	// Bob reads the channel message and alice sends another: retention
	// keeps one, removes hers with the attachment, and frees the budget.
	m.ctl(1, "read", s1.ID)
	m.ctl(0, "send", "#data", "three")
	freed := time.Now()
	p := m.attachedPath(1, s2.ID, "two.bin", 90*time.Second)
	landed := time.Since(freed)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatal("the DM's attachment differs")
	}
	if !testwait.Until(30*time.Second, func() bool {
		meshctlJSON(t, m.meshctl, &d, "--home", m.homes[0], "status", s2.ID)
		return len(d.Recipients) == 1 && d.Recipients[0].State == "delivered"
	}) {
		t.Fatalf("alice's DM is not delivered once the budget freed: %+v", d.Recipients)
	}
	t.Logf("bob refused alice's DM %d times (blob.quota; drop.quota %d) until the budget freed; it landed, attachment in place, %v after the message that let retention free it",
		m.counter(1, "blob.quota"), m.counter(1, "drop.quota"), landed.Round(100*time.Millisecond))
}

// TestAttachmentWantsQueueOnOneLink: wants of chunks sent at once over one
// link, more of them than the node serves at a time, are all served in
// full, none answered "not yet": they queue behind each other on their
// link rather than each taking a serving slot (four), so the asker does
// not wait out a retry for the ones beyond. The raw member reads nothing
// until it has sent all six, so the first wants' chunks fill the link and
// hold the node's serving up while the others arrive.
func TestAttachmentWantsQueueOnOneLink(t *testing.T) {
	testpar.Parallel(t)
	const wants, perWant = 6, 16
	r := startRawTarget(t, "", "mallory", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	file, data := randomFile(t, t.TempDir(), "big.bin", wants*perWant*256<<10, 7)
	var sent api.Sent
	meshctlJSON(t, r.meshctl, &sent, "--home", r.home, "dm", "mallory", "six wants' worth", "--attach", file)

	l := r.dial(t, 10*time.Second)
	frames := make(chan []byte) // unbuffered: the link reads nothing until the test does
	l.Start(func(f []byte) { frames <- f })
	defer l.Close()
	l.GrantRecv(transport.MaxRecvCredit)
	u, err := uuid.Parse(sent.ID)
	if err != nil {
		t.Fatal(err)
	}
	for w := range wants {
		chunks := make([]uint32, perWant)
		for i := range chunks {
			chunks[i] = uint32(w*perWant + i)
		}
		b, err := proto.Marshal(&proto.BlobWant{From: r.target, ID: u, SHA256: sha256.Sum256(data), Chunks: chunks})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Send(append([]byte{byte(proto.FrameBlobWant)}, b...)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint32]bool{}
	notYet := 0
	deadline := time.After(30 * time.Second)
	for len(got)+notYet < wants*perWant {
		select {
		case f := <-frames:
			if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameBlobChunk {
				continue
			}
			c, err := proto.ParseBlobChunk(f[1:])
			if err != nil {
				t.Fatal(err)
			}
			switch c.What {
			case proto.BlobChunkData:
				at := int(c.Index) * 256 << 10
				if !bytes.Equal(c.Data, data[at:at+len(c.Data)]) {
					t.Fatalf("chunk %d is not the file's", c.Index)
				}
				got[c.Index] = true
			case proto.BlobNotYet:
				notYet++
			default:
				t.Fatalf("answer kind %d for chunk %d", c.What, c.Index)
			}
		case <-deadline:
			t.Fatalf("after 30 s: %d chunks and %d not-yet answers of %d asked", len(got), notYet, wants*perWant)
		}
	}
	if notYet != 0 || len(got) != wants*perWant {
		t.Fatalf("%d chunks served and %d answered not yet, of %d asked in %d wants", len(got), notYet, wants*perWant, wants)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := api.NewClient(filepath.Join(r.home, "meshd.sock")).Status(ctx)
	if err != nil || st.Counters["blob.serve_busy"] != 0 || st.Counters["blob.chunks_served"] != wants*perWant {
		t.Fatalf("blob.serve_busy %d, blob.chunks_served %d (%v): want 0 and %d",
			st.Counters["blob.serve_busy"], st.Counters["blob.chunks_served"], err, wants*perWant)
	}
}

//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
)

// folderFiles lists the mirror files of one folder (inbox, read or sent)
// of every day in home's mailbox, by the Message-ID each names.
func folderFiles(t *testing.T, home, folder string) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(home, "mailbox", "*", folder, "*.txt"))
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // moved meanwhile
		}
		head, _, _ := strings.Cut(string(b), "\n---\n")
		for l := range strings.SplitSeq(head, "\n") {
			if id, ok := strings.CutPrefix(l, "Message-ID: "); ok {
				out[id] = p
			}
		}
	}
	return out
}

// TestMailboxReadStateAndSent: a mailbox-only agent sees read state in
// the files (meshctl read moves an item's file from inbox/ to read/, and
// so does a "Kind: read" file dropped in the outbox), a restart keeps
// every file where it is, and what a node sends is mirrored in sent/
// and verifies offline; a sent file lost while meshd was stopped is
// written again when it starts.
func TestMailboxReadStateAndSent(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids []string
	for _, body := range []string{"one", "two", "three"} {
		s, err := m.client(0).Send(ctx, api.Send{To: "bob", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	bob := m.homes[1]
	waitFor(t, "bob's three inbox files", 30*time.Second, func() bool { return len(folderFiles(t, bob, "inbox")) == 3 })

	m.ctl(1, "read", ids[0])
	waitFor(t, "the read item's file in read/", 10*time.Second, func() bool {
		_, in := folderFiles(t, bob, "inbox")[ids[0]]
		_, rd := folderFiles(t, bob, "read")[ids[0]]
		return rd && !in
	})
	if out := meshctlOK(t, m.meshctl, "verify", folderFiles(t, bob, "read")[ids[0]]); !strings.Contains(out, "ok") {
		t.Fatalf("meshctl verify of a file in read/:\n%s", out)
	}

	// The outbox marks items read.
	out := filepath.Join(bob, "mailbox", "outbox")
	drop := func(name, text string) {
		t.Helper()
		tmp := filepath.Join(out, ".draft-"+name)
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	drop("read-two.txt", "Kind: read\n---\n"+ids[1]+"\n")
	note := filepath.Join(bob, "mailbox", "sent", "read-two.txt.sent")
	waitFor(t, "the read file's .sent note", 20*time.Second, func() bool { _, err := os.Stat(note); return err == nil })
	if b, _ := os.ReadFile(note); !strings.Contains(string(b), "Read: "+ids[1]) {
		t.Fatalf("the .sent note of a read file:\n%s", b)
	}
	it := m.inboxItem(1, 10*time.Second, func(it api.Item) bool { return it.ID == ids[1] })
	if !it.Read {
		t.Fatalf("item %s after the read file: %+v", ids[1], it)
	}
	waitFor(t, "the second file in read/", 10*time.Second, func() bool { _, rd := folderFiles(t, bob, "read")[ids[1]]; return rd })

	// Bad read files fail, saying why.
	drop("bad-id.txt", "Kind: read\n---\nnot-an-id\n")
	drop("unknown.txt", "Kind: read\n---\n"+"01a1fe40-8b6f-7607-895e-1540d393bec2\n")
	drop("with-to.txt", "To: @alice\nKind: read\n---\n"+ids[2]+"\n")
	for name, want := range map[string]string{"bad-id.txt": "is not a Message-ID", "unknown.txt": "not marked read", "with-to.txt": "one header Kind: read"} {
		p := filepath.Join(bob, "mailbox", "failed", name+".error")
		waitFor(t, name+" in failed/", 20*time.Second, func() bool { _, err := os.Stat(p); return err == nil })
		if b, _ := os.ReadFile(p); !strings.Contains(string(b), want) {
			t.Fatalf("%s: %s, want %q", name, b, want)
		}
	}
	if it := m.inboxItem(1, 10*time.Second, func(it api.Item) bool { return it.ID == ids[2] }); it.Read {
		t.Fatal("a refused read file marked its item read")
	}

	// What alice sent is in her sent/ folder, and verifies.
	sent := folderFiles(t, m.homes[0], "sent")
	for _, id := range ids {
		p, ok := sent[id]
		if !ok {
			t.Fatalf("alice's DM %s has no file in sent/ (%v)", id, sent)
		}
		meshctlOK(t, m.meshctl, "verify", p)
	}
	var reply api.Sent
	meshctlJSON(t, m.meshctl, &reply, "--home", bob, "reply", ids[2], "got them")
	waitFor(t, "bob's reply in his sent/", 10*time.Second, func() bool { _, ok := folderFiles(t, bob, "sent")[reply.ID]; return ok })
	if b, _ := os.ReadFile(folderFiles(t, bob, "sent")[reply.ID]); !strings.Contains(string(b), "To: @alice") || !strings.Contains(string(b), "In-Reply-To: "+ids[2]) {
		t.Fatalf("bob's sent file:\n%s", b)
	}

	// The quota counts the bytes the mirror wrote, not a stat of each
	// file: they are the files' sizes on disk, in inbox/, read/ and sent/.
	waitFor(t, "bob's mailbox bytes to match his files", 10*time.Second, func() bool {
		_, size, err := mailbox.Usage(filepath.Join(bob, "mailbox"))
		st := m.status(1)
		return err == nil && st.Mailbox != nil && size > 0 && st.Mailbox.Bytes == size
	})

	// A restart moves nothing back and writes nothing twice.
	if err := m.ds[1].stop(syscall.SIGTERM); err != nil {
		t.Logf("bob: %v", err)
	}
	m.start(1)
	if st := m.status(1); st.Counters["mirror.reconciled"] != 0 {
		t.Fatalf("bob rewrote %d files after a restart", st.Counters["mirror.reconciled"])
	}
	in, rd := folderFiles(t, bob, "inbox"), folderFiles(t, bob, "read")
	if len(in) != 1 || len(rd) != 2 {
		t.Fatalf("after a restart bob's inbox/ holds %d files and read/ %d, want 1 and 2", len(in), len(rd))
	}
	if _, ok := in[ids[2]]; !ok {
		t.Fatalf("the unread item is not in inbox/ after a restart: %v", in)
	}

	// A sent file lost while alice was stopped is written again at start.
	if err := m.ds[0].stop(syscall.SIGTERM); err != nil {
		t.Logf("alice: %v", err)
	}
	if err := os.Remove(sent[ids[0]]); err != nil {
		t.Fatal(err)
	}
	m.start(0)
	waitFor(t, "alice's lost sent file to be written again", 10*time.Second, func() bool { _, ok := folderFiles(t, m.homes[0], "sent")[ids[0]]; return ok })
	if st := m.status(0); st.Counters["mirror.reconciled_sent"] != 1 {
		t.Fatalf("alice rewrote %d sent files, want 1", st.Counters["mirror.reconciled_sent"])
	}
	if got := len(folderFiles(t, m.homes[0], "sent")); got != len(sent) {
		t.Fatalf("alice's sent/ holds %d files after the restart, want %d", got, len(sent))
	}
}

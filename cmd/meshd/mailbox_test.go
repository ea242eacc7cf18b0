package main

import (
	"context"
	"fmt"
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

// twoNodes starts alice (admin) and bob (operator) as real processes.
func twoNodes(t *testing.T) (meshctl string, homes map[string]string, ds map[string]*daemon, pinned, seed string) {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	homes = map[string]string{"alice": filepath.Join(tmp, "alice"), "bob": filepath.Join(tmp, "bob")}
	var bob struct {
		Key string `json:"key"`
	}
	meshctlOK(t, meshctl, "--home", homes["alice"], "init", "--name", "alice")
	meshctlJSON(t, meshctl, &bob, "--home", homes["bob"], "init", "--name", "bob")
	meshctlOK(t, meshctl, "--home", homes["alice"], "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", homes["alice"], "roster", "add", bob.Key, "--role", "operator", "--name", "bob")
	pinned = filepath.Join(tmp, "roster.cbor")
	b, _ := os.ReadFile(filepath.Join(homes["alice"], "roster.cbor"))
	os.WriteFile(pinned, b, 0o644)
	ds = map[string]*daemon{}
	ds["alice"] = startDaemon(t, meshd, homes["alice"], "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	seed = tcpListen(t, waitStatus(t, meshctl, homes["alice"], ds["alice"]))
	ds["bob"] = startDaemon(t, meshd, homes["bob"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned, "--seed", seed)
	waitStatus(t, meshctl, homes["bob"], ds["bob"])
	waitPeers(t, meshctl, homes["alice"], 1, 10*time.Second)
	return meshctl, homes, ds, pinned, seed
}

// mirrorFiles lists the inbox items' mailbox files of home, unread (inbox/)
// and read (read/).
func mirrorFiles(home string) []string {
	f, _ := filepath.Glob(filepath.Join(home, "mailbox", "*", "inbox", "*.txt"))
	r, _ := filepath.Glob(filepath.Join(home, "mailbox", "*", "read", "*.txt"))
	return append(f, r...)
}

// TestOutboxFileArrivesVerified: a file dropped in alice's outbox appears
// in bob's mailbox as a file that `meshctl verify` accepts, and a request
// file with a JSON body arrives as a request.
func TestOutboxFileArrivesVerified(t *testing.T) {
	testpar.Parallel(t)
	meshctl, homes, _, _, _ := twoNodes(t)
	outbox := filepath.Join(homes["alice"], "mailbox", "outbox")
	drop := func(name, content string) {
		tmp := filepath.Join(outbox, "."+name)
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(outbox, name)); err != nil {
			t.Fatal(err)
		}
	}
	drop("1-hello.txt", "To: @bob\n---\nhello, as a file\n")
	drop("2-request.txt", "To: bob\nKind: request\nIntent: run-tests\n---\n{\"branch\": \"main\"}\n")
	var files []string
	if !testwait.Until(10*time.Second, func() bool { files = mirrorFiles(homes["bob"]); return len(files) >= 2 }) {
		t.Fatalf("bob's mailbox has %d files, want 2", len(files))
	}
	out := meshctlOK(t, meshctl, append([]string{"--home", homes["bob"], "verify"}, files...)...)
	if strings.Count(out, "ok ") != 2 || !strings.Contains(out, "alice") {
		t.Fatalf("verify output:\n%s", out)
	}
	all := ""
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all += string(b)
	}
	for _, want := range []string{"hello, as a file", "Kind: request", "Intent: run-tests", `"branch": "main"`} {
		if !strings.Contains(all, want) {
			t.Fatalf("mailbox files lack %q:\n%s", want, all)
		}
	}
	// The sent/ record names the envelope.
	var sent []byte
	var err error
	testwait.Until(5*time.Second, func() bool {
		sent, err = os.ReadFile(filepath.Join(homes["alice"], "mailbox", "sent", "1-hello.txt.sent"))
		return err == nil
	})
	if err != nil || !strings.Contains(string(sent), "Message-ID:") {
		t.Fatalf("sent record: %v %s", err, sent)
	}
	// A tampered copy of the message file fails verify with the reason.
	var b []byte
	for _, f := range files {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), "hello, as a file") {
			b = data
		}
	}
	bad := filepath.Join(t.TempDir(), "tampered.txt")
	os.WriteFile(bad, []byte(strings.Replace(string(b), "hello, as a file", "hello, as a fake", 1)), 0o644)
	r := meshctlRun(t, meshctl, "--home", homes["bob"], "verify", bad)
	if r.code != 1 || !strings.Contains(r.stderr, "body") {
		t.Fatalf("tampered file: exit %d: %s", r.code, r.stderr)
	}
}

// TestKillDuringMirrorBurst SIGKILLs bob while a burst of DMs is being
// mirrored: afterwards no partial or corrupt file is visible, and the
// restarted node writes the files of every inbox item it had committed.
func TestKillDuringMirrorBurst(t *testing.T) {
	testpar.Parallel(t)
	meshctl, homes, ds, pinned, seed := twoNodes(t)
	meshd, _ := buildBinaries(t)
	cl := api.NewClient(filepath.Join(homes["alice"], "meshd.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			if _, err := cl.Send(ctx, api.Send{To: "bob", Body: fmt.Sprintf("burst %d %s", n, strings.Repeat("x", 512))}); err == nil {
				n++
			}
		}
	}()
	// Kill bob once files are flowing.
	testwait.For(t, 10*time.Second, "mirror files to appear", func() bool { return len(mirrorFiles(homes["bob"])) >= 50 })
	ds["bob"].stop(syscall.SIGKILL)
	close(stop)
	sent := <-done
	before := mirrorFiles(homes["bob"])
	t.Logf("alice sent %d DMs; bob had %d mailbox files when killed", sent, len(before))
	// Every visible file verifies; temp files are dot-files, never *.txt.
	for i := 0; i < len(before); i += 200 {
		args := append([]string{"--home", homes["bob"], "verify"}, before[i:min(i+200, len(before))]...)
		if r := meshctlRun(t, meshctl, args...); r.code != 0 {
			t.Fatalf("a mailbox file does not verify after the kill:\n%s", r.stderr)
		}
	}
	// Restart: every committed inbox item gets its file.
	d := startDaemon(t, meshd, homes["bob"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned, "--seed", seed)
	waitStatus(t, meshctl, homes["bob"], d)
	var in inboxJSON
	if !testwait.Until(15*time.Second, func() bool {
		meshctlJSON(t, meshctl, &in, "--home", homes["bob"], "inbox", "--all", "--limit", "1000")
		n := len(mirrorFiles(homes["bob"]))
		return n >= len(in.Items) && len(in.Items) > 0
	}) {
		t.Fatalf("%d inbox items but %d mailbox files after restart", len(in.Items), len(mirrorFiles(homes["bob"])))
	}
	if len(in.Items) < len(before) {
		t.Fatalf("inbox has %d items, fewer than the %d files mirrored before the kill", len(in.Items), len(before))
	}
}

package main

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// repairFixture is alice's home after bob sent her DMs and channel
// messages, with meshd stopped: the good store, and every DM id.
type repairFixture struct {
	meshd, meshctl string
	alice, bob     string
	bobAddr        string   // bob's TCP listen address, to seed alice with
	base           []string // meshd flags of both
	goodDB         []byte
	dms, msgs      []string
}

func newRepairFixture(t *testing.T, dms int) *repairFixture {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	f := &repairFixture{meshd: meshd, meshctl: meshctl, alice: filepath.Join(tmp, "alice"), bob: filepath.Join(tmp, "bob"),
		base: []string{"--listen", "tcp://127.0.0.1:0", "--no-mdns"}}
	var bobID struct {
		Key string `json:"key"`
	}
	meshctlOK(t, meshctl, "--home", f.alice, "init", "--name", "alice")
	meshctlJSON(t, meshctl, &bobID, "--home", f.bob, "init", "--name", "bob")
	meshctlOK(t, meshctl, "--home", f.alice, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", f.alice, "roster", "add", bobID.Key, "--role", "member", "--name", "bob")
	da := startDaemon(t, meshd, f.alice, f.base...)
	seed := tcpListen(t, waitStatus(t, meshctl, f.alice, da))
	db := startDaemon(t, meshd, f.bob, append(f.base, "--roster", filepath.Join(f.alice, "roster.cbor"), "--seed", seed)...)
	f.bobAddr = tcpListen(t, waitStatus(t, meshctl, f.bob, db))
	waitPeers(t, meshctl, f.alice, 1, 15*time.Second)
	meshctlOK(t, meshctl, "--home", f.alice, "channel", "create", "general")
	meshctlOK(t, meshctl, "--home", f.alice, "subscribe", "general")
	testwait.For(t, 10*time.Second, "bob to learn #general", func() bool {
		return meshctlRun(t, meshctl, "--home", f.bob, "channel", "show", "general").code == 0
	})
	c := api.NewClient(filepath.Join(f.bob, "meshd.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range dms {
		s, err := c.Send(ctx, api.Send{To: "@alice", Body: "dm " + strings.Repeat("x", i%200)})
		if err != nil {
			t.Fatal(err)
		}
		f.dms = append(f.dms, s.ID)
		if i%10 == 0 {
			s, err := c.Send(ctx, api.Send{To: "#general", Body: "to all"})
			if err != nil {
				t.Fatal(err)
			}
			f.msgs = append(f.msgs, s.ID)
		}
	}
	want := append(append([]string(nil), f.dms...), f.msgs...)
	waitInbox(t, meshctl, f.alice, want, 20*time.Second)
	if err := da.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.goodDB, err = os.ReadFile(filepath.Join(f.alice, "history.db")); err != nil {
		t.Fatal(err)
	}
	return f
}

// inboxIDs returns the ids in home's meshctl inbox --all.
func inboxIDs(t *testing.T, meshctl, home string) map[string]bool {
	t.Helper()
	var in api.Inbox
	meshctlJSON(t, meshctl, &in, "--home", home, "inbox", "--all", "--limit", "100000")
	got := map[string]bool{}
	for _, it := range in.Items {
		got[it.ID] = true
	}
	return got
}

// waitInbox waits until every id in want is in home's inbox.
func waitInbox(t *testing.T, meshctl, home string, want []string, within time.Duration) {
	t.Helper()
	var missing []string
	if !testwait.Until(within, func() bool {
		got := inboxIDs(t, meshctl, home)
		missing = missing[:0]
		for _, id := range want {
			if !got[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	}) {
		t.Fatalf("%d of %d ids not in %s's inbox within %v, first %s", len(missing), len(want), home, within, missing[0])
	}
}

// runMeshdExit runs meshd on home until it exits (it must, within 15 s)
// and returns its exit code, its output and how long it ran.
func runMeshdExit(t *testing.T, meshd, home string, args ...string) (int, string, time.Duration) {
	t.Helper()
	start := time.Now()
	d := startDaemon(t, meshd, home, args...)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("meshd on a damaged store still runs after 15s:\n%s", d.stderr.String())
	}
	code := 0
	if ee, ok := d.err.(interface{ ExitCode() int }); ok {
		code = ee.ExitCode()
	} else if d.err != nil {
		t.Fatal(d.err)
	}
	return code, d.stderr.String(), time.Since(start)
}

// fixMetas rewrites both bbolt meta pages with fn and fixes their checksums.
func fixMetas(b []byte, fn func(meta []byte)) {
	ps := int(binary.LittleEndian.Uint32(b[16+8:]))
	for _, off := range []int{0, ps} {
		m := b[off+16 : off+16+64]
		fn(m)
		h := fnv.New64a()
		h.Write(m[:56])
		binary.LittleEndian.PutUint64(m[56:], h.Sum64())
	}
}

// TestDamagedStoreRepair damages alice's store in each way a crash, a full
// disk or a bad disk would: meshd refuses to start, at once, with a
// message that names meshctl repair, and never panics; meshctl repair
// refuses while meshd runs, then rebuilds the store from the mailbox;
// meshd starts, and every DM id is in meshctl inbox --all.
func TestDamagedStoreRepair(t *testing.T) {
	testpar.Parallel(t)
	f := newRepairFixture(t, 300)
	good := f.goodDB
	ps := int(binary.LittleEndian.Uint32(good[16+8:]))
	rootPage := activeRoot(good)
	dbPath := filepath.Join(f.alice, "history.db")
	cases := []struct {
		name   string
		damage func() []byte
		want   string
	}{
		{"empty", func() []byte { return nil }, "the file is empty"},
		{"4 KiB", func() []byte { return good[:4<<10] }, "history store corrupt"},
		{"16 KiB", func() []byte { return good[:16<<10] }, "cut short"},
		// Mid-way through the pages in use: the file may be longer.
		{"mid-file", func() []byte { return good[:activePages(good)/2*ps] }, "cut short"},
		{"flipped bytes in a page", func() []byte {
			b := append([]byte(nil), good...)
			for i := range 48 {
				b[rootPage*ps+16+i] ^= 0x5a
			}
			return b
		}, "history store corrupt"},
		{"newer bbolt format", func() []byte {
			b := append([]byte(nil), good...)
			fixMetas(b, func(m []byte) { binary.LittleEndian.PutUint32(m[4:], 3) })
			return b
		}, "newer format"},
		{"newer schema", func() []byte {
			if err := os.WriteFile(dbPath, good, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(dbPath, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), u64be(99)) }); err != nil {
				t.Fatal(err)
			}
			db.Close()
			b, _ := os.ReadFile(dbPath)
			return b
		}, "newer format"},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			damaged := tc.damage()
			if err := os.WriteFile(dbPath, damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, took := runMeshdExit(t, f.meshd, f.alice, f.base...)
			t.Logf("meshd refused in %v: %s", took.Round(time.Millisecond), lastLines(out, 2))
			if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(out, "meshctl --home "+f.alice+" repair") {
				t.Fatalf("meshd: exit %d, want 1, %q and the repair hint:\n%s", code, tc.want, out)
			}
			for _, bad := range []string{"panic", "goroutine ", "SIGSEGV", "SIGBUS", "fatal error"} {
				if strings.Contains(out, bad) {
					t.Fatalf("meshd output holds %q:\n%s", bad, out)
				}
			}

			// Not while meshd runs: a meshd holding the home (on a good
			// store in another home would not do; hold the lock as meshd does).
			d := startDaemon(t, f.meshd, filepath.Join(t.TempDir(), "other"), f.base...)
			waitStatus(t, f.meshctl, d.home, d)
			if r := meshctlRun(t, f.meshctl, "--home", d.home, "repair"); r.code != 1 || !strings.Contains(r.stderr, "hint: stop meshd first") {
				t.Fatalf("repair while meshd runs: exit %d %q", r.code, r.stderr)
			}
			d.stop(syscall.SIGTERM)

			var res struct {
				MovedTo  string `json:"moved_to"`
				Damage   string `json:"damage"`
				Files    int    `json:"files"`
				Taken    int    `json:"taken"`
				Refused  int    `json:"refused"`
				Refusals []struct{ File, Reason string }
				Epoch    string `json:"epoch"`
			}
			meshctlJSON(t, f.meshctl, &res, "--home", f.alice, "repair")
			if res.Refused != 0 || res.Taken != len(f.dms)+len(f.msgs) || res.Epoch == "" || res.Damage == "" {
				t.Fatalf("repair: %+v, want %d taken", res, len(f.dms)+len(f.msgs))
			}
			kept, err := os.ReadFile(res.MovedTo)
			if err != nil || !strings.HasPrefix(filepath.Base(res.MovedTo), "history.db.damaged-") || len(kept) != len(damaged) {
				t.Fatalf("the damaged store was not kept at %s: %v", res.MovedTo, err)
			}
			os.Remove(res.MovedTo)

			d = startDaemon(t, f.meshd, f.alice, f.base...)
			waitStatus(t, f.meshctl, f.alice, d)
			got := inboxIDs(t, f.meshctl, f.alice)
			for _, id := range append(append([]string(nil), f.dms...), f.msgs...) {
				if !got[id] {
					t.Fatalf("%s is not in the inbox after the repair", id)
				}
			}
			if err := d.stop(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		})
	}

	// Channel history the mailbox lost too comes back from bob through
	// history sync once the repaired meshd runs.
	lost := 0
	// Read items' files are in read/ (repair restores items read).
	files := mirrorFiles(f.alice)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nTo: #general\n") && lost < len(f.msgs)/2 {
			os.Remove(p)
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("no channel message in the mailbox")
	}
	if err := os.WriteFile(dbPath, good[:activePages(good)/3*ps], 0o600); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Taken int `json:"taken"`
	}
	meshctlJSON(t, f.meshctl, &res, "--home", f.alice, "repair")
	if res.Taken != len(f.dms)+len(f.msgs)-lost {
		t.Fatalf("repair took %d, want %d", res.Taken, len(f.dms)+len(f.msgs)-lost)
	}
	// Seeded with bob: bob's own redials of alice have backed off by now.
	d := startDaemon(t, f.meshd, f.alice, append(f.base, "--seed", f.bobAddr)...)
	waitStatus(t, f.meshctl, f.alice, d)
	missing := 0
	if !testwait.Until(30*time.Second, func() bool {
		var h api.History
		meshctlJSON(t, f.meshctl, &h, "--home", f.alice, "history", "#general", "--limit", "10000")
		got := map[string]bool{}
		for _, m := range h.Messages {
			got[m.ID] = true
		}
		missing = 0
		for _, id := range f.msgs {
			if !got[id] {
				missing++
			}
		}
		return missing == 0
	}) {
		t.Fatalf("%d of %d channel messages not back through history sync within 30s", missing, len(f.msgs))
	}
	got := inboxIDs(t, f.meshctl, f.alice)
	for _, id := range f.dms {
		if !got[id] {
			t.Fatalf("DM %s is not in the inbox", id)
		}
	}
	d.stop(syscall.SIGTERM)

	// A store that checks out is left alone without --force.
	if r := meshctlRun(t, f.meshctl, "--home", f.alice, "repair"); r.code != 1 || !strings.Contains(r.stderr, "checks out") {
		t.Fatalf("repair of a good store: exit %d %q", r.code, r.stderr)
	}
}

// activeMeta is the meta page bbolt uses: the one of the higher
// transaction id (the other may name pages since freed).
func activeMeta(b []byte) []byte {
	ps := int(binary.LittleEndian.Uint32(b[16+8:]))
	m := b[16:]
	if binary.LittleEndian.Uint64(b[ps+16+48:]) > binary.LittleEndian.Uint64(m[48:]) {
		m = b[ps+16:]
	}
	return m
}

// activePages is the store's high-water mark: the pages in use or free.
func activePages(b []byte) int { return int(binary.LittleEndian.Uint64(activeMeta(b)[40:])) }

// activeRoot is the root bucket's page in the meta page bbolt uses: the
// one of the higher transaction id (the other may name a page since freed).
func activeRoot(b []byte) int { return int(binary.LittleEndian.Uint64(activeMeta(b)[16:])) }

func u64be(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

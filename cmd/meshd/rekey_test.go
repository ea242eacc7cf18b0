package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// rekeyEditOut is the JSON of meshctl roster rekey.
type rekeyEditOut struct {
	Version uint64 `json:"version"`
	Rekey   struct {
		Name          string `json:"name"`
		Key           string `json:"key"`
		OldKey        string `json:"old_key"`
		OldValidUntil string `json:"old_valid_until"`
		Revoked       bool   `json:"revoked"`
	} `json:"rekey"`
}

// rotationTraffic sends, until stopped, a DM from alice to bob and a
// #ops message from bob, in turns, and records each one meshctl
// accepted. bob's posts pause while he restarts, until his links are up
// again: a channel message sent with no reader linked waits for the next
// history sync round (PROTOCOL.md §17.1) whatever the key, which is not
// what this test is about. alice's DMs never pause: those sent while bob
// is down are kept for him (under his old key, until he links with the
// new one).
type rotationTraffic struct {
	mu       sync.Mutex
	dms, ops []string
	paused   bool
	stop     chan struct{}
	done     chan struct{}
}

func (tr *rotationTraffic) pause(on bool) {
	tr.mu.Lock()
	tr.paused = on
	tr.mu.Unlock()
}

func startTraffic(t *testing.T, m *mesh4) *rotationTraffic {
	tr := &rotationTraffic{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for i := 0; ; i++ {
			select {
			case <-tr.stop:
				return
			default:
			}
			dm := fmt.Sprintf("dm-%03d", i)
			if r := m.run("alice", "dm", "bob", dm); r.code == 0 {
				tr.mu.Lock()
				tr.dms = append(tr.dms, dm)
				tr.mu.Unlock()
			}
			tr.mu.Lock()
			paused := tr.paused
			tr.mu.Unlock()
			if paused {
				continue
			}
			op := fmt.Sprintf("op-%03d", i)
			if r := m.run("bob", "send", "#ops", op); r.code == 0 {
				tr.mu.Lock()
				tr.ops = append(tr.ops, op)
				tr.mu.Unlock()
			}
		}
	}()
	return tr
}

// sent returns how many of each kind were accepted so far.
func (tr *rotationTraffic) sent() (dms, ops int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.dms), len(tr.ops)
}

func (tr *rotationTraffic) end() (dms, ops []string) {
	close(tr.stop)
	<-tr.done
	return tr.dms, tr.ops
}

// TestKeyRotationWhileMessagesFlow rotates bob's key while alice sends
// him DMs and he posts to #ops. bob's node is down while alice publishes
// the rotation (a machine being replaced), so alice keeps DMs for his old
// key and then for his new one; bob comes back with the new roster and
// switches keys at start. Every message sent before, during and after the
// switch is delivered exactly once, bob keeps his name and role, and
// carol's history shows his posts under his name across both keys.
// TestRetiredKeyLinkClosed waits out a grace window (and the 30 s clock
// allowance after it) for what the old key may do then.
func TestKeyRotationWhileMessagesFlow(t *testing.T) {
	testpar.Parallel(t)
	m := startMesh4(t)
	meshd, _ := buildBinaries(t)
	oldBob, err := home.Home{Dir: m.homes["bob"]}.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	m.ctl("alice", "channel", "create", "ops")
	m.waitChannel("bob", "ops")
	m.waitChannel("carol", "ops")
	m.ctl("carol", "subscribe", "ops")

	m.ctl("dave", "block", "bob")
	tr := startTraffic(t, m)
	waitFor(t, "traffic before the rotation", 20*time.Second, func() bool { d, o := tr.sent(); return d >= 3 && o >= 3 })

	// bob makes his next key; alice moves him to it with a short grace.
	var nk struct {
		Key     string `json:"key"`
		Created bool   `json:"created"`
		Listed  bool   `json:"listed"`
	}
	meshctlJSON(t, m.meshctl, &nk, "--home", m.homes["bob"], "rekey")
	if !nk.Created || nk.Listed || nk.Key == oldBob.Pub.String() {
		t.Fatalf("meshctl rekey: %+v", nk)
	}
	var again struct {
		Key     string `json:"key"`
		Created bool   `json:"created"`
	}
	meshctlJSON(t, m.meshctl, &again, "--home", m.homes["bob"], "rekey")
	if again.Created || again.Key != nk.Key {
		t.Fatalf("second meshctl rekey made another key: %+v, first %s", again, nk.Key)
	}
	// bob's machine goes away; alice's DMs are kept for his old key.
	seed := tcpListen(t, waitStatus(t, m.meshctl, m.homes["alice"], m.ds["alice"]))
	tr.pause(true)
	down := time.Now()
	if err := m.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d1, _ := tr.sent()
	waitFor(t, "DMs kept for bob's old key", 20*time.Second, func() bool { d, _ := tr.sent(); return d >= d1+2 })

	var ed rekeyEditOut
	meshctlJSON(t, m.meshctl, &ed, "--home", m.homes["alice"], "roster", "rekey", "bob", nk.Key, "--grace", "5s")
	if ed.Rekey.Name != "bob" || ed.Rekey.Key != nk.Key || ed.Rekey.OldKey != oldBob.Pub.String() || ed.Rekey.Revoked || ed.Rekey.OldValidUntil == "" {
		t.Fatalf("roster rekey: %+v", ed)
	}
	if _, err := time.Parse(time.RFC3339Nano, ed.Rekey.OldValidUntil); err != nil {
		t.Fatalf("roster rekey: old_valid_until: %v", err)
	}
	m.ctl("alice", "roster", "publish")
	d2, _ := tr.sent()
	waitFor(t, "DMs kept for bob's new key", 20*time.Second, func() bool { d, _ := tr.sent(); return d >= d2+2 })

	// bob comes back with the new roster and takes the new key, within
	// the window; what alice kept for either key reaches him.
	pinned := filepath.Join(t.TempDir(), "roster.cbor")
	b, err := os.ReadFile(filepath.Join(m.homes["alice"], "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m.ds["bob"] = startDaemon(t, meshd, m.homes["bob"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned, "--seed", seed)
	m.ds["bob"].waitLog("switched to the new key", 10*time.Second)
	if st := waitStatus(t, m.meshctl, m.homes["bob"], m.ds["bob"]); st.Key != nk.Key || st.Role != "operator" {
		t.Fatalf("bob after the switch: key %s role %s; want %s operator", st.Key, st.Role, nk.Key)
	}
	waitPeers(t, m.meshctl, m.homes["bob"], 3, 15*time.Second)
	tr.pause(false)
	waitFor(t, "dave's block of bob to follow him to his new key", 10*time.Second, func() bool {
		var bl api.Blocks
		meshctlJSON(t, m.meshctl, &bl, "--home", m.homes["dave"], "blocks")
		for _, b := range bl.Blocks {
			if b.Key == nk.Key {
				return b.Name == "bob"
			}
		}
		return false
	})
	relinked := time.Since(down)
	d0, o0 := tr.sent()
	waitFor(t, "traffic after the rotation", 30*time.Second, func() bool { d, o := tr.sent(); return d >= d0+3 && o >= o0+3 })
	dms, ops := tr.end()

	// Every DM reached bob once; every post reached carol once, as bob's.
	waitFor(t, "every DM in bob's inbox", 30*time.Second, func() bool {
		seen := map[string]int{}
		for _, it := range m.inbox("bob", "--all", "--limit", "1000").Items {
			seen[it.Body]++
		}
		for _, dm := range dms {
			if seen[dm] != 1 {
				return false
			}
		}
		return true
	})
	var hist api.History
	stuck := time.Now().Add(25 * time.Second)
	waitFor(t, "every #ops post in carol's history", 30*time.Second, func() bool {
		meshctlJSON(t, m.meshctl, &hist, "--home", m.homes["carol"], "history", "#ops", "--limit", "1000")
		seen := map[string]int{}
		for _, msg := range hist.Messages {
			seen[msg.Body]++
		}
		for _, op := range ops {
			if seen[op] != 1 {
				if time.Now().After(stuck) {
					t.Logf("carol has %s %d times; posts sent %v; history %+v", op, seen[op], ops, hist.Messages)
					stuck = time.Now().Add(time.Hour)
				}
				return false
			}
		}
		return true
	})
	keys := map[string]bool{}
	for _, msg := range hist.Messages {
		if msg.From.Name != "bob" {
			t.Fatalf("a post in carol's history is not shown as bob's: %+v", msg)
		}
		keys[msg.From.Key.String()] = true
	}
	if !keys[oldBob.Pub.String()] || !keys[nk.Key] {
		t.Fatalf("carol's history of bob's posts has keys %v; want both the old and the new", keys)
	}
	for _, it := range m.inbox("bob", "--all", "--limit", "1000").Items {
		if strings.HasPrefix(it.Body, "dm-") && it.From.Name != "alice" {
			t.Fatalf("bob's item: %+v", it)
		}
	}
	var rs struct {
		Members []struct {
			Key  string `json:"key"`
			Name string `json:"name"`
			Role string `json:"role"`
		} `json:"members"`
	}
	meshctlJSON(t, m.meshctl, &rs, "--home", m.homes["carol"], "roster", "show")
	found := false
	for _, mb := range rs.Members {
		if mb.Name == "bob" {
			found = mb.Key == nk.Key && mb.Role == "operator"
		}
	}
	if !found {
		t.Fatalf("carol's roster: %+v; want bob, operator, on the new key", rs.Members)
	}

	t.Logf("rotation: %d DMs to bob and %d posts by him, each delivered once; bob was away (down, then relinked under the new key) for %v",
		len(dms), len(ops), relinked.Round(time.Millisecond))
}

// dialErr is rawTarget.dial that returns the handshake's error instead
// of failing the test: a refused key is what some tests want.
func dialErr(r *rawTarget, timeout time.Duration) error {
	cfg := transport.DefaultConfig()
	cfg.Identity = r.key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: r.status.RosterVersion} }
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addr := transport.Addr{Network: "tcp", Address: strings.TrimPrefix(r.status.Listen[0], "tcp://")}
	for _, a := range r.status.Listen {
		if strings.HasPrefix(a, "tcp://") {
			addr.Address = strings.TrimPrefix(a, "tcp://")
		}
	}
	l, err := transport.Dial(ctx, addr, cfg, &r.target)
	if err != nil {
		return err
	}
	// A refusal may come as a goodbye right after the handshake.
	l.Start(func([]byte) {})
	select {
	case <-l.Done():
		return fmt.Errorf("link closed by the node")
	case <-time.After(time.Second):
	}
	l.Close()
	return nil
}

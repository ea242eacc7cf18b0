package main

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// rawMember is a roster member that runs no meshd: a test links it to a
// real meshd with the project's own transport and sends it envelopes it
// builds itself, as a hostile or buggy member would.
type rawMember struct {
	t    *testing.T
	key  ed25519.PrivateKey
	pub  proto.PubKey
	seq  uint64
	ep   uuid.UUID
	link *transport.Link

	mu    sync.Mutex
	acked map[uuid.UUID]int
	got   []*proto.SignedEnvelope // envelopes the node sent m
}

func newRawMember(t *testing.T) *rawMember {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rawMember{t: t, key: key, pub: proto.PubKey(pub), ep: proto.NewEpoch(), acked: map[uuid.UUID]int{}}
}

// dial links m to the meshd whose status is s, and records acks.
func (m *rawMember) dial(s statusJSON) proto.PubKey {
	m.t.Helper()
	l, target := dialMember(m.t, m.key, s, func(_ *transport.Link, f []byte) {
		if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameEnvelope {
			if se, err := proto.ParseEnvelope(f[1:]); err == nil {
				m.mu.Lock()
				m.got = append(m.got, se)
				m.mu.Unlock()
			}
		}
		if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameAck {
			if a, err := proto.ParseAck(f[1:]); err == nil {
				m.mu.Lock()
				for _, id := range a.IDs {
					m.acked[id]++
				}
				m.mu.Unlock()
			}
		}
	})
	m.link = l
	return target
}

// dialMember links a member made from its own key (and no meshd) to the
// meshd whose status is s, and hands each frame it receives to onFrame,
// with the link. The link closes at the end of the test.
func dialMember(t testing.TB, key ed25519.PrivateKey, s statusJSON, onFrame func(l *transport.Link, f []byte)) (*transport.Link, proto.PubKey) {
	t.Helper()
	target, err := proto.ParsePubKey(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := transport.DefaultConfig()
	cfg.Identity = key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: s.RosterVersion} }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := transport.Dial(ctx, transport.Addr{Network: "tcp", Address: strings.TrimPrefix(tcpListen(t, s), "tcp://")}, cfg, &target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	l.Start(func(f []byte) { onFrame(l, f) })
	return l, target
}

func (m *rawMember) ackedN(id uuid.UUID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acked[id]
}

// dm signs a DM to peer with the given id, ttl and body.
func (m *rawMember) dm(to proto.PubKey, id uuid.UUID, ttl uint32, body string) *proto.SignedEnvelope {
	m.t.Helper()
	m.seq++
	se, err := proto.SignEnvelope(m.key, &proto.Envelope{ID: id, From: m.pub, To: proto.ToPeer(to),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: ttl, Seq: m.seq, Epoch: m.ep,
		Message: &proto.Message{Body: body}})
	if err != nil {
		m.t.Fatal(err)
	}
	return se
}

func (m *rawMember) send(se *proto.SignedEnvelope) error {
	return m.link.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...))
}

// counters reads the node's counters from its control socket, in-process:
// tests poll it, and a meshctl process per check costs the daemons CPU.
// meshctl status --json prints the same document.
func counters(t *testing.T, meshctl, home string) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := api.NewClient(filepath.Join(home, "meshd.sock")).Status(ctx)
	if err != nil {
		t.Fatalf("status of %s: %v", home, err)
	}
	return st.Counters
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	testwait.For(t, within, what, cond)
}

// mailboxFilesWithID returns bob's mailbox files whose Message-ID is id.
func mailboxFilesWithID(t *testing.T, home, id string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(home, "mailbox", "*", "inbox", "*.txt"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nMessage-ID: "+id+"\n") {
			out = append(out, string(b))
		}
	}
	return out
}

// TestReusedIDHeldTwice: bob is down while the admin posts X to a
// channel; a member then sends bob a DM that reuses X's id, which bob
// stores and acks. When bob links to the admin again, catch-up brings X,
// and bob holds both envelopes: in its channel history, in its inbox and
// as two mailbox files; meshctl read of the shared id names both senders. (A store keyed by id alone counted X as
// sync.already_held and never stored it.)
func TestReusedIDHeldTwice(t *testing.T) {
	testpar.Parallel(t)
	mal := newRawMember(t)
	o := newHistOrgWith(t, map[string]proto.PubKey{"mal": mal.pub}, "admin", "bob")
	o.ctl("admin", "channel", "create", "ops")
	o.waitChannel("bob", "ops")
	o.ctl("bob", "subscribe", "ops")
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var x api.Sent
	meshctlJSON(t, o.meshctl, &x, "--home", o.homes["admin"], "send", "#ops", "X from the admin")
	xid := uuid.MustParse(x.ID)

	// Bob comes back where neither the admin nor its seed can reach it
	// (no seed, no link socket, a new TCP port): only mal links.
	seedless := []string{"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix", "--log-level", "debug", "--roster", filepath.Join(filepath.Dir(o.homes["bob"]), "roster.cbor")}
	o.ds["bob"] = startDaemon(t, o.meshd, o.homes["bob"], seedless...)
	s := waitStatus(t, o.meshctl, o.homes["bob"], o.ds["bob"])
	bobKey := mal.dial(s)
	dm := mal.dm(bobKey, xid, 300, "a DM that reuses the id of X")
	if err := mal.send(dm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bob's ack of the DM", 10*time.Second, func() bool { return mal.ackedN(xid) == 1 })
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// Back in the mesh: catch-up from the admin.
	o.start("bob")
	waitFor(t, "X in bob's history", 20*time.Second, func() bool { return o.historyIDs("bob", "ops")[x.ID] })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := o.client("bob").Inbox(ctx, api.InboxQuery{All: true})
	if err != nil {
		t.Fatal(err)
	}
	from := map[string]string{}
	for _, it := range in.Items {
		if it.ID == x.ID {
			from[it.From.Key.String()] = it.Kind + " " + it.To
		}
	}
	if len(from) != 2 || from[mal.pub.String()] == "" {
		t.Fatalf("bob's inbox items with id %s: %v, want the channel message and mal's DM", x.ID, from)
	}
	waitFor(t, "two mailbox files with Message-ID X", 10*time.Second, func() bool { return len(mailboxFilesWithID(t, o.homes["bob"], x.ID)) == 2 })
	files := mailboxFilesWithID(t, o.homes["bob"], x.ID)
	if !strings.Contains(files[0]+files[1], "X from the admin") || !strings.Contains(files[0]+files[1], "reuses the id of X") {
		t.Fatalf("mailbox files with id X:\n%s\n%s", files[0], files[1])
	}
	if n := counters(t, o.meshctl, o.homes["bob"])["sync.already_held"]; n != 0 {
		t.Fatalf("sync.already_held = %d: X was taken for the DM", n)
	}
	// meshctl read of the bare id is ambiguous: it refuses, naming both
	// senders, and marks nothing; --from picks each.
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["bob"], "read", x.ID); r.code == 0 ||
		!strings.Contains(r.stderr, "ambiguous") || !strings.Contains(r.stderr, "admin") || !strings.Contains(r.stderr, "mal") {
		t.Fatalf("read of a shared id: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	o.ctl("bob", "read", x.ID, "--from", "admin")
	o.ctl("bob", "read", x.ID, "--from", "mal")
	in, err = o.client("bob").Inbox(ctx, api.InboxQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range in.Items {
		if it.ID == x.ID {
			t.Fatalf("item %s from %s still unread after meshctl read", it.ID, it.From.Name)
		}
	}
}

// TestTTLBeyondDedupeHorizonRefused: a DM whose ttl_secs outlives the
// 144 h dedupe horizon (here 2^32-1, about 136 years) is refused as
// drop.ttl_too_long and not acked, so no copy of it can be replayed after
// its dedupe entry is forgotten; one at the horizon is taken.
func TestTTLBeyondDedupeHorizonRefused(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "target")
	mal := newRawMember(t)
	meshctlOK(t, meshctl, "--home", h, "init")
	meshctlOK(t, meshctl, "--home", h, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", h, "roster", "add", mal.pub.String(), "--role", "member", "--name", "mal")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	target := mal.dial(waitStatus(t, meshctl, h, d))

	long := mal.dm(target, proto.NewID(), 1<<32-1, "lives forever")
	if err := mal.send(long); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drop.ttl_too_long", 10*time.Second, func() bool { return counters(t, meshctl, h)["drop.ttl_too_long"] == 1 })
	beyond := mal.dm(target, proto.NewID(), 144*3600+1, "one second past the horizon")
	atHorizon := mal.dm(target, proto.NewID(), 144*3600, "at the horizon")
	for _, se := range []*proto.SignedEnvelope{beyond, atHorizon} {
		if err := mal.send(se); err != nil {
			t.Fatal(err)
		}
	}
	// Acks keep frame order: once the last DM is acked, none is coming
	// for the two before it.
	waitFor(t, "ack of the DM at the horizon", 10*time.Second, func() bool { return mal.ackedN(atHorizon.ID) == 1 })
	if mal.ackedN(long.ID)+mal.ackedN(beyond.ID) != 0 {
		t.Fatal("a DM with a ttl beyond the dedupe horizon was acked")
	}
	if c := counters(t, meshctl, h); c["drop.ttl_too_long"] != 2 || c["rx.delivered.message"] != 1 {
		t.Fatalf("counters: drop.ttl_too_long %d, rx.delivered.message %d; want 2 and 1", c["drop.ttl_too_long"], c["rx.delivered.message"])
	}
}

// TestAckScopedToLinkSender: acks name ids and stand for (the link's
// peer, id). A member that passes bob another member's DM gets no ack
// for it (bob stores it: it is signed and addressed to bob), and its
// own DM that reuses that id is stored and acked as another envelope.
func TestAckScopedToLinkSender(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "target")
	mal, eve := newRawMember(t), newRawMember(t)
	meshctlOK(t, meshctl, "--home", h, "init")
	meshctlOK(t, meshctl, "--home", h, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", h, "roster", "add", mal.pub.String(), "--role", "member", "--name", "mal")
	meshctlOK(t, meshctl, "--home", h, "roster", "add", eve.pub.String(), "--role", "member", "--name", "eve")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	target := mal.dial(waitStatus(t, meshctl, h, d))

	id := proto.NewID()
	evesDM := eve.dm(target, id, 300, "eve's words, passed on by mal")
	malsDM := mal.dm(target, id, 300, "mal's own DM, same id")
	for _, se := range []*proto.SignedEnvelope{evesDM, malsDM} {
		if err := mal.send(se); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "ack of mal's DM", 10*time.Second, func() bool { return mal.ackedN(id) >= 1 })
	waitFor(t, "both DMs stored", 10*time.Second, func() bool { return counters(t, meshctl, h)["rx.delivered.message"] == 2 })
	if n := mal.ackedN(id); n != 1 {
		t.Fatalf("mal got %d acks for id %s, want 1 (its own DM only)", n, id)
	}
}

// TestSenderStoreBudget: one member floods bob with 200 KB DMs for 2 s
// (10 s with MESHD_BENCH=1, SECURITY.md's figure), and at least until
// another has sent 20 ordinary DMs. bob's budget for each sender is
// 8 MiB (--sender-store-mib 8): the flood past it is refused unacked and
// counted as drop.quota, all 20 ordinary DMs arrive, and the flooder's
// stored DMs stay within the budget.
func TestSenderStoreBudget(t *testing.T) {
	const (
		quota  = 8 << 20
		dmBody = 200_000
	)
	flooding := window(2*time.Second, 10*time.Second)
	mal := newRawMember(t)
	o := newHistOrgArgs(t, map[string]proto.PubKey{"mal": mal.pub}, []string{"--sender-store-mib", "8"}, "alice", "bob")
	fileSize := func() int64 {
		fi, err := os.Stat(filepath.Join(o.homes["bob"], "history.db"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := fileSize()
	bobKey := mal.dial(waitStatus(t, o.meshctl, o.homes["bob"], o.ds["bob"]))

	body := strings.Repeat("f", dmBody)
	var flooded, wireSize int
	done := make(chan []result, 1)
	sent := make(chan struct{}) // closed when alice's 20 DMs are sent
	go func() {
		defer close(sent)
		var failed []result
		for i := 0; i < 20; i++ {
			if r := meshctlRun(t, o.meshctl, "--home", o.homes["alice"], "dm", "bob", "ordinary DM "+string(rune('a'+i))); r.code != 0 {
				failed = append(failed, r)
			}
		}
		done <- failed
	}()
	// The flood lasts its time, and at least until alice's DMs are sent.
	floodCtx, cancelFlood := context.WithCancel(context.Background())
	defer cancelFlood()
	floodStart := time.Now()
	go func() {
		select {
		case <-time.After(flooding):
		case <-floodCtx.Done():
			return
		}
		select {
		case <-sent:
		case <-floodCtx.Done():
		}
		cancelFlood()
	}()
	for floodCtx.Err() == nil {
		se := mal.dm(bobKey, proto.NewID(), 300, body)
		wireSize = len(se.Raw)
		// While the link's send queue is full, wait for room.
		if err := mal.link.SendWait(floodCtx, append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
			break // the flood's time is up, or the link closed
		}
		flooded++
	}
	flooding = time.Since(floodStart).Round(100 * time.Millisecond)
	if failed := <-done; len(failed) > 0 {
		t.Fatalf("%d of alice's DMs failed: %+v", len(failed), failed[0])
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fromAlice, fromMal := 0, 0
	waitFor(t, "alice's 20 DMs in bob's inbox", 30*time.Second, func() bool {
		// The inbox holds 8 MB of mal's DMs: more than one answer's 4 MiB,
		// so read every page.
		fromAlice, fromMal = 0, 0
		err := o.client("bob").InboxPages(ctx, api.InboxQuery{All: true}, 10*time.Second, func(in *api.Inbox) error {
			for _, it := range in.Items {
				switch it.From.Name {
				case "alice":
					fromAlice++
				case "mal":
					fromMal++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return fromAlice == 20
	})
	// The mailbox mirrors what was stored, no more.
	var mailFiles int
	var mailBytes int64
	waitFor(t, "the mailbox to mirror mal's stored DMs", 20*time.Second, func() bool {
		files, _ := filepath.Glob(filepath.Join(o.homes["bob"], "mailbox", "*", "inbox", "*.txt"))
		mailFiles, mailBytes = 0, 0
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "\nFrom-Key: "+mal.pub.String()+"\n") {
				mailFiles++
				mailBytes += int64(len(b))
			}
		}
		return mailFiles == fromMal
	})
	// Every flood DM that went out is accounted for: stored or refused.
	var c map[string]uint64
	waitFor(t, "every flood DM stored or refused", 30*time.Second, func() bool {
		c = counters(t, o.meshctl, o.homes["bob"])
		return c["drop.quota"] == uint64(flooded-fromMal)
	})
	after := fileSize()
	t.Logf("mailbox: %d files of mal's, %d bytes", mailFiles, mailBytes)
	stored := fromMal * wireSize
	t.Logf("flood: %d DMs of %d bytes in %v; bob stored %d of them (%d bytes, budget %d), drop.quota %d; store file %d -> %d bytes (+%d)",
		flooded, wireSize, flooding, fromMal, stored, quota, c["drop.quota"], before, after, after-before)
	if fromMal == 0 || stored > quota || fromMal != quota/wireSize {
		t.Fatalf("bob stored %d flood DMs (%d bytes), want %d within the %d byte budget", fromMal, stored, quota/wireSize, quota)
	}
	// The flooder's view: only the stored DMs were acked, so it keeps
	// the rest for later.
	mal.mu.Lock()
	acked := len(mal.acked)
	mal.mu.Unlock()
	if acked != fromMal {
		t.Fatalf("mal got acks for %d DMs, want %d (those stored)", acked, fromMal)
	}
	if !strings.Contains(o.ds["bob"].stderr.String(), "store budget is used up") {
		t.Fatal("the refusals were not logged")
	}
	if n := strings.Count(o.ds["bob"].stderr.String(), "store budget is used up"); n > 1+int((flooding+10*time.Second-1)/(10*time.Second)) {
		t.Fatalf("refusals logged %d times in %v, want at most one per 10 s", n, flooding)
	}
	// bbolt grows the file in steps of up to 16 MiB: the budget plus one
	// step bounds the growth.
	if growth := after - before; growth > quota+16<<20 {
		t.Fatalf("store file grew by %d bytes, more than the %d byte budget and one 16 MiB step", growth, quota)
	}
}

// TestStoreUpgradeAtStart: meshd starts on a history store written by the
// previous release (schema 1, history/testdata/store-v1.db), upgrades it
// in place, logs it, and serves its inbox; the next start finds nothing
// to upgrade.
func TestStoreUpgradeAtStart(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "node")
	meshctlOK(t, meshctl, "--home", h, "init")
	meshctlOK(t, meshctl, "--home", h, "roster", "init", "--org", "acme")
	old, err := os.ReadFile(filepath.Join("..", "..", "history", "testdata", "store-v1.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h, "history.db"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "tcp://127.0.0.1:0", "--no-mdns"}
	d := startDaemon(t, meshd, h, args...)
	waitStatus(t, meshctl, h, d)
	d.waitLog("history store upgraded", 5*time.Second)
	var in struct {
		Items []struct {
			ID   string `json:"id"`
			Read bool   `json:"read"`
		} `json:"items"`
	}
	meshctlJSON(t, meshctl, &in, "--home", h, "inbox", "--all", "--json")
	read := 0
	for _, it := range in.Items {
		if it.Read {
			read++
		}
	}
	if len(in.Items) != 5 || read != 1 {
		t.Fatalf("inbox after the upgrade: %d items, %d read; want 5 and 1 (the fixture's)", len(in.Items), read)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, meshd, h, args...)
	waitStatus(t, meshctl, h, d)
	meshctlJSON(t, meshctl, &in, "--home", h, "inbox", "--all", "--json")
	if len(in.Items) != 5 {
		t.Fatalf("inbox after a restart: %d items", len(in.Items))
	}
	if strings.Contains(d.stderr.String(), "history store upgraded") {
		t.Fatal("the store was upgraded twice")
	}
}

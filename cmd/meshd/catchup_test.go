package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"path/filepath"
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

// Catch-up that never gives up early: real meshd processes, and members
// built from the project's own packages where a test needs a peer that
// answers late or floods.

// mailboxFileCount counts the mirror files under home's mailbox inboxes.
func mailboxFileCount(t *testing.T, home string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(home, "mailbox", "*", "inbox", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// sendMany sends n messages to #ch from the node at c, 8 at a time, and
// returns their ids.
func sendMany(t *testing.T, c *api.Client, ch string, n int, tag string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				s, err := c.Send(ctx, api.Send{To: "#" + ch, Body: fmt.Sprintf("%s %04d", tag, i)})
				if err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
				ids[i] = s.ID
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// TestRepairCatchesUpWhatWasSentWhileStopped: bob holds 1,000 messages of
// #ops (and their mailbox files); he stops, alice sends two more, bob's
// store is rebuilt with meshctl repair and he starts again, and alice
// sends one more live. Within one catch-up round bob holds all 1,003:
// the repair rebuilt the marks, and paging through the 1,000 he holds
// (the first round after a repair also asks by time) does not stop early.
func TestRepairCatchesUpWhatWasSentWhileStopped(t *testing.T) {
	testpar.Parallel(t)
	const held = 1000
	o := newHistOrg(t, "alice", "bob")
	o.ctl("alice", "channel", "create", "ops")
	o.waitChannel("bob", "ops")
	o.ctl("bob", "subscribe", "ops")
	want := sendMany(t, o.client("alice"), "ops", held, "held")
	waitFor(t, "bob's mailbox holds the 1,000 messages", time.Minute, func() bool {
		return mailboxFileCount(t, o.homes["bob"]) >= held
	})
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, o.meshctl, o.homes["alice"], 0, 10*time.Second)
	want = append(want, sendMany(t, o.client("alice"), "ops", 2, "while stopped")...)

	var rep struct {
		Taken   int   `json:"taken"`
		Refused int   `json:"refused"`
		TookMS  int64 `json:"took_ms"`
	}
	// The repair parses and verifies 1,000 files: seconds, but past
	// meshctlRun's 30 s under -race beside other tests; the bound here is
	// a hang guard.
	r := meshctlRunWithin(t, 3*time.Minute, o.meshctl, "--home", o.homes["bob"], "repair", "--force", "--json")
	if r.code != 0 {
		t.Fatalf("meshctl repair: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("meshctl repair --json: %v\n%s", err, r.stdout)
	}
	t.Logf("repair of %d files took %d ms", held, rep.TookMS)
	if rep.Taken != held || rep.Refused != 0 {
		t.Fatalf("repair took %d and refused %d of %d files", rep.Taken, rep.Refused, held)
	}
	start := time.Now()
	o.start("bob")
	waitPeers(t, o.meshctl, o.homes["bob"], 1, 15*time.Second)
	want = append(want, sendMany(t, o.client("alice"), "ops", 1, "live")...)
	var got map[string]bool
	waitFor(t, "bob holds every message of #ops", 30*time.Second, func() bool {
		got = o.historyIDs("bob", "ops")
		return len(got) >= len(want)
	})
	took := time.Since(start)
	for _, id := range want {
		if !got[id] {
			t.Errorf("bob lacks %s", id)
		}
	}
	c := counters(t, o.meshctl, o.homes["bob"])
	if c["drop.history_unsolicited"] != 0 || c["sync.gaps_forgotten"] != 0 {
		t.Errorf("drop.history_unsolicited %d, sync.gaps_forgotten %d; want 0",
			c["drop.history_unsolicited"], c["sync.gaps_forgotten"])
	}
	t.Logf("after repair of %d held messages, bob caught up the 3 he lacked in %v (process start included): %d rounds, %d pages",
		held, took.Round(time.Millisecond), c["sync.rounds"], c["sync.pages"])
}

// historyServer is a roster member that runs no meshd and answers a
// node's HistoryRequests itself, when and how the test says.
type historyServer struct {
	t        *testing.T
	rt       *rawTarget
	link     *transport.Link
	epoch    uuid.UUID
	requests chan *proto.SignedEnvelope
}

func newHistoryServer(t *testing.T, rt *rawTarget) *historyServer {
	h := &historyServer{t: t, rt: rt, epoch: proto.NewEpoch(), requests: make(chan *proto.SignedEnvelope, 16)}
	h.link = rt.dial(t, 10*time.Second)
	t.Cleanup(func() { h.link.Close() })
	h.link.Start(func(f []byte) {
		if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameEnvelope {
			return
		}
		se, err := proto.ParseEnvelope(f[1:])
		if err == nil && se.Kind == proto.KindHistoryRequest {
			select {
			case h.requests <- se:
			default:
			}
		}
	})
	return h
}

// next returns the next HistoryRequest the node sends, within d.
func (h *historyServer) next(d time.Duration) *proto.SignedEnvelope {
	h.t.Helper()
	select {
	case se := <-h.requests:
		return se
	case <-time.After(d):
		h.t.Fatalf("no HistoryRequest within %v", d)
		return nil
	}
}

// message signs a channel message of ours with seq.
func (h *historyServer) message(ch uuid.UUID, seq uint64, body string) *proto.SignedEnvelope {
	h.t.Helper()
	se, err := proto.SignEnvelope(h.rt.key, &proto.Envelope{ID: proto.NewID(), From: h.rt.pub, To: proto.ToChannel(ch),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: seq, Epoch: h.epoch,
		Message: &proto.Message{Body: body}})
	if err != nil {
		h.t.Fatal(err)
	}
	return se
}

// answer sends the answer to req holding msgs.
func (h *historyServer) answer(req *proto.SignedEnvelope, more bool, msgs ...*proto.SignedEnvelope) {
	h.t.Helper()
	resp := &proto.HistoryResponse{ChannelID: req.HistoryRequest.ChannelID, InReplyTo: req.ID, Status: proto.HistoryOK, More: more}
	for _, m := range msgs {
		resp.Messages = append(resp.Messages, m.Raw)
	}
	se, err := proto.SignEnvelope(h.rt.key, &proto.Envelope{ID: proto.NewID(), From: h.rt.pub, To: proto.ToPeer(h.rt.target),
		Kind: proto.KindHistoryResponse, TS: time.Now().UnixMilli(), TTL: 300, Epoch: h.epoch, HistoryResponse: resp})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.link.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
		h.t.Fatal(err)
	}
}

// TestLatePageIsUsed: the node asks a peer for #ops history and the peer
// answers after SyncTimeout (10 s), when the node has moved on. The late
// page is used, not dropped as history_unsolicited: its message is
// stored, and as it says more, the node's next request resumes after it
// (its mark for the page's stream, since_ts at the page's time), not from
// the window's start. A second answer to the same request is still
// unsolicited.
func TestLatePageIsUsed(t *testing.T) {
	testpar.First(t)
	rt := startRawTarget(t, "", "slow", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "channel", "create", "ops")
	var show struct {
		ID string `json:"id"`
	}
	meshctlJSON(t, rt.meshctl, &show, "--home", rt.home, "channel", "show", "ops")
	ch := uuid.MustParse(show.ID)
	h := newHistoryServer(t, rt)

	req := h.next(15 * time.Second)
	if req.HistoryRequest.ChannelID != ch {
		t.Fatalf("asked about %v, want #ops %v", req.HistoryRequest.ChannelID, ch)
	}
	waitFor(t, "the node's wait for the answer to time out", 20*time.Second, func() bool {
		return counters(t, rt.meshctl, rt.home)["sync.timeouts"] >= 1
	})
	first := h.message(ch, 1, "in the late page")
	h.answer(req, true, first)
	waitFor(t, "the late page's message stored", 10*time.Second, func() bool {
		return historyHas(t, rt, "ops", first.ID.String())
	})

	// The page said more: the next request resumes after it.
	resume := h.next(15 * time.Second).HistoryRequest
	var mark *proto.SeqMark
	for i, m := range resume.SinceSeqBySender {
		if m.Sender == rt.pub && m.Epoch == h.epoch {
			mark = &resume.SinceSeqBySender[i]
		}
	}
	if mark == nil || mark.LastSeq != 1 || resume.SinceTS < first.TS {
		t.Fatalf("the request after the late page asks from since_ts %d with marks %+v; want ours at 1 and since_ts >= %d",
			resume.SinceTS, resume.SinceSeqBySender, first.TS)
	}
	c := counters(t, rt.meshctl, rt.home)
	if c["sync.late_pages"] != 1 || c["sync.resumed"] < 1 || c["drop.history_unsolicited"] != 0 {
		t.Errorf("sync.late_pages %d, sync.resumed %d, drop.history_unsolicited %d; want 1, >= 1, 0",
			c["sync.late_pages"], c["sync.resumed"], c["drop.history_unsolicited"])
	}

	// The same request answered again: only the first answer counts.
	h.answer(req, false, h.message(ch, 2, "a second answer"))
	waitFor(t, "the second answer dropped as unsolicited", 10*time.Second, func() bool {
		return counters(t, rt.meshctl, rt.home)["drop.history_unsolicited"] == 1
	})
}

// TestStalledPageEndsPaging: a peer answers with a page that says more
// but holds nothing the request asked for (an envelope older than
// since_ts, of a stream the request has no mark for). Paging would never
// move on: the node ends it at once, as a failure of that peer
// (sync.stalled), and sends no further request in the round.
func TestStalledPageEndsPaging(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, "", "stale", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "channel", "create", "ops")
	h := newHistoryServer(t, rt)
	req := h.next(15 * time.Second)
	stale := h.message(req.HistoryRequest.ChannelID, 1, "older than since_ts")
	old := time.UnixMilli(req.HistoryRequest.SinceTS).Add(-time.Hour)
	se, err := proto.SignEnvelope(h.rt.key, &proto.Envelope{ID: stale.ID, From: h.rt.pub, To: stale.To,
		Kind: proto.KindMessage, TS: old.UnixMilli(), TTL: 300, Seq: 1, Epoch: h.epoch, Message: stale.Message})
	if err != nil {
		t.Fatal(err)
	}
	h.answer(req, true, se)
	var c map[string]uint64
	waitFor(t, "sync.stalled counted", 10*time.Second, func() bool {
		c = counters(t, rt.meshctl, rt.home)
		return c["sync.stalled"] == 1
	})
	if c["sync.requests"] != 1 || c["sync.gaps_forgotten"] != 0 {
		t.Fatalf("sync.requests %d, sync.gaps_forgotten %d after the stalled page; want 1, 0", c["sync.requests"], c["sync.gaps_forgotten"])
	}
	select {
	case next := <-h.requests:
		t.Fatalf("the node asked again after a stalled page: %+v", next.HistoryRequest)
	default:
	}
}

// historyHas reports whether the node's store holds id in channel ch.
func historyHas(t *testing.T, rt *rawTarget, ch, id string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hist, err := api.NewClient(filepath.Join(rt.home, "meshd.sock")).History(ctx, api.HistoryQuery{Channel: ch, Limit: api.MaxHistoryLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range hist.Messages {
		if m.ID == id {
			return true
		}
	}
	return false
}

// floodMember is a roster member that runs no meshd, linked to several
// nodes, sending them envelopes it builds.
type floodMember struct {
	t     *testing.T
	key   ed25519.PrivateKey
	pub   proto.PubKey
	links map[string]*transport.Link
	// silent: HistoryRequests get no answer (a sender that keeps no
	// history must not answer that it lacks its own numbers).
	silent bool
}

func newFloodMember(t *testing.T) *floodMember {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &floodMember{t: t, key: key, pub: proto.PubKey(pub), links: map[string]*transport.Link{}}
}

// dial links m to the node name of o, answering its HistoryRequests with
// empty pages (a member that holds nothing of the channel) unless silent.
func (m *floodMember) dial(o *histOrg, name string) {
	m.t.Helper()
	s := waitStatus(m.t, o.meshctl, o.homes[name], o.ds[name])
	target, err := proto.ParsePubKey(s.Key)
	if err != nil {
		m.t.Fatal(err)
	}
	l, _ := dialMember(m.t, m.key, s, func(l *transport.Link, f []byte) {
		if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameEnvelope {
			return
		}
		req, err := proto.ParseEnvelope(f[1:])
		if err != nil || req.Kind != proto.KindHistoryRequest || m.silent {
			return
		}
		se, err := proto.SignEnvelope(m.key, &proto.Envelope{ID: proto.NewID(), From: m.pub, To: proto.ToPeer(target),
			Kind: proto.KindHistoryResponse, TS: time.Now().UnixMilli(), TTL: 300, Epoch: proto.NewEpoch(),
			HistoryResponse: &proto.HistoryResponse{ChannelID: req.HistoryRequest.ChannelID, InReplyTo: req.ID, Status: proto.HistoryOK}})
		if err == nil {
			l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...))
		}
	})
	if old := m.links[name]; old != nil {
		old.Close()
	}
	m.links[name] = l
}

// hangUp closes every link of m.
func (m *floodMember) hangUp() {
	for name, l := range m.links {
		l.Close()
		<-l.Done()
		delete(m.links, name)
	}
}

// send signs a channel message and sends it to the nodes named.
func (m *floodMember) send(ch uuid.UUID, epoch uuid.UUID, seq uint64, ts time.Time, ttl uint32, to ...string) *proto.SignedEnvelope {
	m.t.Helper()
	se, err := proto.SignEnvelope(m.key, &proto.Envelope{ID: proto.NewID(), From: m.pub, To: proto.ToChannel(ch),
		Kind: proto.KindMessage, TS: ts.UnixMilli(), TTL: ttl, Seq: seq, Epoch: epoch,
		Message: &proto.Message{Body: fmt.Sprintf("seq %d", seq)}})
	if err != nil {
		m.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range to {
		if err := m.links[name].SendWait(ctx, append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
			m.t.Fatal(err)
		}
	}
	return se
}

// TestEpochFloodKeepsRealGap: carol's stream in #ops reaches alice and
// bob with a hole at 901, and carol goes away. Then mallory sends alice
// 5,000 messages, each in a fresh epoch with a timestamp an hour old:
// more streams than a request's 4,096 marks, all newer than carol's.
// carol comes back to give bob 901 and leaves again. When bob links
// again, alice's round fetches 901 from him: the hole was kept while its
// sender was away (the rounds in between asked only bob and mallory), and
// carol's stream kept its mark (it has a hole, and mallory's streams take
// at most 16 places before other senders'), so bob sends carol's numbers
// above 900 rather than her whole stream by time.
func TestEpochFloodKeepsRealGap(t *testing.T) {
	testpar.Parallel(t)
	const before, flood = 900, 5000
	carol, mallory := newFloodMember(t), newFloodMember(t)
	carol.silent = true
	// The per-sender channel quota would refuse most of the flood; this
	// test is about the marks of what a node did take.
	o := newHistOrgArgs(t, map[string]proto.PubKey{"carol": carol.pub, "mallory": mallory.pub},
		[]string{"--channel-sender-burst", "20000"}, "alice", "bob")
	o.ctl("alice", "channel", "create", "ops")
	o.waitChannel("bob", "ops")
	var show struct {
		ID string `json:"id"`
	}
	meshctlJSON(t, o.meshctl, &show, "--home", o.homes["alice"], "channel", "show", "ops")
	ch := uuid.MustParse(show.ID)

	ep := proto.NewEpoch()
	carol.dial(o, "alice")
	carol.dial(o, "bob")
	for seq := uint64(1); seq <= before; seq++ {
		carol.send(ch, ep, seq, time.Now(), 3600, "alice", "bob")
	}
	carol.send(ch, ep, before+2, time.Now(), 3600, "alice", "bob")
	waitFor(t, "alice and bob hold carol's stream but 901", time.Minute, func() bool {
		return len(o.historyIDs("alice", "ops")) == before+1 && len(o.historyIDs("bob", "ops")) == before+1
	})
	carol.hangUp()
	waitPeers(t, o.meshctl, o.homes["alice"], 1, 10*time.Second)
	waitPeers(t, o.meshctl, o.homes["bob"], 1, 10*time.Second)

	mallory.dial(o, "alice")
	old := time.Now().Add(-time.Hour)
	for i := range flood {
		mallory.send(ch, proto.NewEpoch(), 1, old.Add(time.Duration(i)*time.Millisecond), 7200, "alice")
	}
	waitFor(t, "alice stores the flood", 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h, err := o.client("alice").History(ctx, api.HistoryQuery{Channel: "ops", Limit: 1})
		return err == nil && h.Stored >= before+1+flood
	})

	carol.dial(o, "bob")
	hole := carol.send(ch, ep, before+1, time.Now(), 3600, "bob")
	waitFor(t, "bob holds carol's 901", 10*time.Second, func() bool { return o.historyIDs("bob", "ops")[hole.ID.String()] })
	carol.hangUp()
	waitPeers(t, o.meshctl, o.homes["bob"], 1, 10*time.Second)

	// bob links again: alice's round asks him.
	pre := counters(t, o.meshctl, o.homes["alice"])
	start := time.Now()
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.start("bob")
	// Alice's count of the channel grows by one when 901 arrives (a
	// listing of her 5,901 messages a poll cost more than the catch-up).
	if !testwait.Until(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h, err := o.client("alice").History(ctx, api.HistoryQuery{Channel: "ops", Limit: 1})
		return err == nil && h.Stored >= before+2+flood
	}) || !o.historyIDs("alice", "ops")[hole.ID.String()] {
		a, b := counters(t, o.meshctl, o.homes["alice"]), counters(t, o.meshctl, o.homes["bob"])
		t.Fatalf("alice never fetched carol's 901 from bob: alice sync.pages %d (+%d), sync.envelopes %d (+%d), sync.already_held %d, sync.resumed %d (+%d), sync.paused %d; bob history.served %d, history.served.envelopes %d",
			a["sync.pages"], a["sync.pages"]-pre["sync.pages"], a["sync.envelopes"], a["sync.envelopes"]-pre["sync.envelopes"],
			a["sync.already_held"], a["sync.resumed"], a["sync.resumed"]-pre["sync.resumed"], a["sync.paused"],
			b["history.served"], b["history.served.envelopes"])
	}
	took := time.Since(start)
	c := counters(t, o.meshctl, o.homes["alice"])
	if c["sync.gaps_forgotten"] != 0 {
		t.Errorf("sync.gaps_forgotten = %d, want 0", c["sync.gaps_forgotten"])
	}
	t.Logf("after a flood of %d fresh epochs, alice fetched the hole %v after bob's restart, with %d envelopes in %d pages",
		flood, took.Round(time.Millisecond), c["sync.envelopes"]-pre["sync.envelopes"], c["sync.pages"]-pre["sync.pages"])
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestLargeInboxListsFully fills a real meshd's inbox, through a real
// link from a roster member, with 350 DMs of 200 KB and 1,100 small
// ones: 1,450 items (more than the 1,000 one answer holds) and 70 MB of
// bodies (more than the 64 MiB meshctl reads of one answer). The newest
// 1,100 hold 25 of the large ones: 5 MB, more than one answer's 4 MiB,
// without listing most of the 70 MB again. The link's
// receive rate is capped at 16 MiB/s: the sender is slowed, nothing is
// dropped, and the waits are counted. Then meshctl inbox --json lists
// every item, in delivery order, in the format of one answer; --limit
// lists the newest N across pages; the text listing holds every item.
func TestLargeInboxListsFully(t *testing.T) {
	// Parallel: its one time bound is a floor (the receive cap), and its
	// listings, some 70 MB each, have bounds for a hang, not a speed.
	testpar.First(t)
	rt := startRawTarget(t, "", "sender", "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--link-recv-rate-mib", "16")
	meshctl, h, key, me, target := rt.meshctl, rt.home, rt.key, rt.pub, rt.target
	list := func(args ...string) string {
		t.Helper()
		r := meshctlRunWithin(t, 3*time.Minute, meshctl, append([]string{"--home", h}, args...)...)
		if r.code != 0 {
			t.Fatalf("meshctl %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := rt.dial(t, 10*time.Second)
	defer l.Close()
	l.Start(nil)

	// bigLast of the big DMs come after the small ones.
	const big, small, bigLast = 350, 1100, 25
	epoch := proto.NewEpoch()
	sent := map[uuid.UUID]bool{}
	start := time.Now()
	for i := range big + small {
		body := fmt.Sprintf("dm %04d", i)
		if i < big-bigLast || i >= big-bigLast+small {
			body = strings.Repeat(body+" ", 200<<10/8)
		}
		se, err := proto.SignEnvelope(key, &proto.Envelope{ID: proto.NewID(), From: me, To: proto.ToPeer(target),
			Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 3600, Seq: uint64(i + 1), Epoch: epoch,
			Message: &proto.Message{Body: body}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SendWait(ctx, append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
			t.Fatal(err)
		}
		sent[se.ID] = true
	}
	counters := func() map[string]uint64 {
		var st struct {
			Counters map[string]uint64 `json:"counters"`
		}
		if err := json.Unmarshal([]byte(meshctlOK(t, meshctl, "--home", h, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		return st.Counters
	}
	if !testwait.Until(90*time.Second, func() bool { return counters()["inbox.items"] >= big+small }) {
		t.Fatalf("inbox.items %d of %d after 90 s\n%v", counters()["inbox.items"], big+small, counters())
	}
	took := time.Since(start)
	c := counters()
	t.Logf("%d DMs (%d MB) delivered in %v at a receive cap of 16 MiB/s; link.recv_throttled %d (%d ms)",
		big+small, big*200<<10/1_000_000, took.Round(time.Millisecond), c["link.recv_throttled"], c["link.recv_throttled_ms"])
	// The reader waits (link.recv_throttled) only when the sender outruns
	// 16 MiB/s, which a busy host's sender may not; the time bound below
	// holds either way. transport's TestRecvRate checks the waits.
	// 70 MB at 16 MiB/s after a 4 MiB burst: at least 3.5 s.
	if took < 3500*time.Millisecond {
		t.Errorf("70 MB arrived in %v, faster than 16 MiB/s", took)
	}
	for name, v := range c {
		if strings.HasPrefix(name, "drop.") && v > 0 {
			t.Errorf("%s = %d: the paced link dropped envelopes", name, v)
		}
	}

	// Every item, through meshctl's paging.
	raw := []byte(list("inbox", "--json"))
	if len(raw) <= 64<<20 {
		t.Fatalf("the listing is %d bytes, not beyond the old 64 MiB cap", len(raw))
	}
	var in api.Inbox
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("meshctl inbox --json is not one JSON document: %v", err)
	}
	if len(in.Items) != big+small {
		t.Fatalf("meshctl inbox --json listed %d items, want %d", len(in.Items), big+small)
	}
	seen := map[string]bool{}
	for i, it := range in.Items {
		id, err := uuid.Parse(it.ID)
		if err != nil || !sent[id] || seen[it.ID] {
			t.Fatalf("item %d: %s not sent, or listed twice", i, it.ID)
		}
		seen[it.ID] = true
		if i > 0 && it.Delivered.Before(in.Items[i-1].Delivered) {
			t.Fatalf("item %d delivered before item %d: not in delivery order", i, i-1)
		}
	}
	if in.Next != "" {
		t.Errorf("the listing carries a cursor %q", in.Next)
	}
	t.Logf("meshctl inbox --json: %d items, %d bytes", len(in.Items), len(raw))

	// The newest 1,100: beyond one answer's 1,000 items and 4 MiB.
	var newest api.Inbox
	raw = []byte(list("inbox", "--limit", "1100", "--json"))
	if len(raw) <= 4<<20 {
		t.Fatalf("the newest 1,100 items list in %d bytes, not beyond one answer's 4 MiB", len(raw))
	}
	if err := json.Unmarshal(raw, &newest); err != nil {
		t.Fatalf("meshctl inbox --limit 1100 --json: %v", err)
	}
	if len(newest.Items) != 1100 {
		t.Fatalf("--limit 1100 listed %d items", len(newest.Items))
	}
	ids := func(items []api.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.ID)
		}
		return out
	}
	if !slices.Equal(ids(newest.Items), ids(in.Items[len(in.Items)-1100:])) {
		t.Error("--limit 1100 is not the newest 1,100 items, oldest first")
	}

	// The text listing: a header line an item.
	text := list("inbox")
	if n := len(regexp.MustCompile(`(?m)^\* \[\w+\] .* dm from `).FindAllStringIndex(text, -1)); n != big+small {
		t.Errorf("text listing holds %d items, want %d", n, big+small)
	}
}

package history

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// TestInboxPage pages an inbox of 10 items, every third one read and the
// rest waking but for two, at every page size: the pages cover every
// item once, in delivery order, end with a nil Next, and respect the
// item and byte bounds; the newest-N start, the unread filter, Waking
// and a bad cursor behave.
func TestInboxPage(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now})
	alice, us := newSender(t, "alice"), newSender(t, "us")
	var ids []uuid.UUID
	for i := range 10 {
		se := alice.env(t, proto.ToPeer(us.pub), t0.UnixMilli()+int64(i), strings.Repeat("x", 100*(i+1)))
		mustPut(t, s, se)
		clk.t = t0.Add(time.Duration(i) * time.Second)
		if err := s.SetInbox(alice.pub, se.ID, PriorityNormal, i != 4 && i != 8); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, se.ID)
	}
	for i := 0; i < 10; i += 3 {
		if err := s.MarkRead(alice.pub, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	unread := slices.DeleteFunc(slices.Clone(ids), func(id uuid.UUID) bool { return slices.Index(ids, id)%3 == 0 })

	walk := func(q InboxPageQuery) (got []uuid.UUID, pages int) {
		t.Helper()
		for {
			p, err := s.InboxPage(q)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(p.Items) == 0 || len(p.Items) > q.Limit {
				t.Fatalf("page %d of %d items, limit %d", pages, len(p.Items), q.Limit)
			}
			size := 0
			for _, it := range p.Items {
				got = append(got, it.ID)
				size += it.Size
			}
			if len(p.Items) > 1 && size > q.MaxBytes {
				t.Fatalf("page of %d bytes, bound %d", size, q.MaxBytes)
			}
			if p.Next == nil {
				return got, pages
			}
			if pages > 20 {
				t.Fatal("paging does not end")
			}
			q.After, q.FromStart = p.Next, false
		}
	}
	for limit := 1; limit <= 11; limit++ {
		got, pages := walk(InboxPageQuery{FromStart: true, Limit: limit, MaxBytes: 1 << 20})
		if !slices.Equal(got, ids) {
			t.Fatalf("limit %d: paged %v, want %v", limit, got, ids)
		}
		if want := (10 + limit - 1) / limit; pages != want {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, want)
		}
		if got, _ := walk(InboxPageQuery{FromStart: true, UnreadOnly: true, Limit: limit, MaxBytes: 1 << 20}); !slices.Equal(got, unread) {
			t.Fatalf("limit %d unread: paged %v, want %v", limit, got, unread)
		}
	}
	// A byte bound below one item still takes one item a page.
	if got, pages := walk(InboxPageQuery{FromStart: true, Limit: 100, MaxBytes: 1}); !slices.Equal(got, ids) || pages != 10 {
		t.Fatalf("MaxBytes 1: %d pages, %v", pages, got)
	}
	// A byte bound of about three items' envelopes.
	p, err := s.InboxPage(InboxPageQuery{FromStart: true, Limit: 100, MaxBytes: 1500})
	if err != nil || len(p.Items) < 2 || len(p.Items) > 5 || p.Next == nil {
		t.Fatalf("MaxBytes 1500: %d items, next %x, %v", len(p.Items), p.Next, err)
	}

	// The newest N, then on with the cursor.
	for n := 1; n <= 12; n++ {
		want := ids[max(0, 10-n):]
		if got, _ := walk(InboxPageQuery{Newest: n, Limit: 2, MaxBytes: 1 << 20}); !slices.Equal(got, want) {
			t.Fatalf("newest %d: %v, want %v", n, got, want)
		}
		wantU := unread[max(0, len(unread)-n):]
		if got, _ := walk(InboxPageQuery{Newest: n, UnreadOnly: true, Limit: 3, MaxBytes: 1 << 20}); !slices.Equal(got, wantU) {
			t.Fatalf("newest %d unread: %v, want %v", n, got, wantU)
		}
	}

	// Waking: unread waking items are 1, 2, 5, 7 (4 and 8 do not wake).
	for _, c := range []struct {
		newest int
		want   bool
	}{{1, false}, {2, false}, {3, true}, {4, true}} {
		p, err := s.InboxPage(InboxPageQuery{Newest: c.newest, Limit: 1, MaxBytes: 1 << 20, NeedWaking: true})
		if err != nil || p.Waking != c.want {
			t.Errorf("newest %d: waking %v, want %v (%v)", c.newest, p.Waking, c.want, err)
		}
	}
	// Past the last item: an empty page, no cursor.
	p, err = s.InboxPage(InboxPageQuery{FromStart: true, Limit: 10, MaxBytes: 1 << 20})
	if err != nil || p.Next != nil || len(p.Items) != 10 {
		t.Fatalf("one page of all: %d items, next %x, %v", len(p.Items), p.Next, err)
	}
	last, err := s.InboxPage(InboxPageQuery{Newest: 1, Limit: 1, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	key := inboxTimeKey(t0.Add(9*time.Second).UnixMilli(), envKey(last.Items[0].ID, alice.pub))
	if p, err := s.InboxPage(InboxPageQuery{After: key, Limit: 10, MaxBytes: 1 << 20}); err != nil || len(p.Items) != 0 || p.Next != nil {
		t.Fatalf("after the last item: %d items, next %x, %v", len(p.Items), p.Next, err)
	}
	if _, err := s.InboxPage(InboxPageQuery{After: []byte("short"), Limit: 1}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v, want ErrBadCursor", err)
	}
}

// TestInboxRead reads the read state of a batch in one call: read items,
// unread ones, and keys with no inbox item (another sender's id, an id
// never stored) agree with InboxEntry.
func TestInboxRead(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice, bob, us := newSender(t, "alice"), newSender(t, "bob"), newSender(t, "us")
	var keys []ItemKey
	for i := range 4 {
		se := alice.env(t, proto.ToPeer(us.pub), t0.UnixMilli()+int64(i), "hello")
		mustPut(t, s, se)
		if err := s.SetInbox(alice.pub, se.ID, PriorityNormal, true); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, ItemKey{From: alice.pub, ID: se.ID})
	}
	for _, i := range []int{1, 3} {
		if err := s.MarkRead(alice.pub, keys[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	keys = append(keys, ItemKey{From: bob.pub, ID: keys[1].ID}, ItemKey{From: alice.pub, ID: uuid.New()})
	got, err := s.InboxRead(keys)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, false, true, false, false}
	if !slices.Equal(got, want) {
		t.Fatalf("InboxRead = %v, want %v", got, want)
	}
	for i, k := range keys[:4] {
		it, err := s.InboxEntry(k.From, k.ID)
		if err != nil || it.Read != want[i] {
			t.Fatalf("item %d: InboxEntry read %v (%v), InboxRead %v", i, it.Read, err, want[i])
		}
	}
	if got, err := s.InboxRead(nil); err != nil || len(got) != 0 {
		t.Fatalf("InboxRead(nil) = %v, %v", got, err)
	}
}

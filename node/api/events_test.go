package api

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func stream(s string) *EventStream {
	return newEventStream(context.Background(), io.NopCloser(strings.NewReader(s)))
}

func TestEventStreamParse(t *testing.T) {
	s := stream(": meshd inbox events\n\n" +
		": keepalive\n\n" +
		"event: item\ndata: {\"id\":\"a\",\"kind\":\"message\",\"body\":\"hi\"}\n\n" +
		"event: lagged\ndata: {}\n\n" +
		"event: future-kind\ndata: {\"x\":1}\n\n" + // unknown types are skipped
		"\n\n" + // stray blank lines dispatch nothing
		"event:item\ndata:{\"id\":\"b\",\n" + // no space after the colon; data over two lines
		"data: \"body\":\"two\"}\n\n" +
		"data: {\"id\":\"c\"}\n\n") // no event line: the default type
	want := []Event{
		{Item: Item{ID: "a", Kind: "message", Body: "hi"}},
		{Lagged: true},
		{Item: Item{ID: "b", Body: "two"}},
		{Item: Item{ID: "c"}},
	}
	for i, w := range want {
		got, err := s.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.Lagged != w.Lagged || got.Item.ID != w.Item.ID || got.Item.Body != w.Item.Body || got.Item.Kind != w.Item.Kind {
			t.Errorf("event %d: %+v, want %+v", i, got, w)
		}
	}
	if _, err := s.Next(); !errors.Is(err, ErrEventsEnded) {
		t.Errorf("at the end: %v, want ErrEventsEnded", err)
	}
}

func TestEventStreamErrors(t *testing.T) {
	if _, err := stream("event: item\ndata: {not json\n\n").Next(); err == nil || !strings.Contains(err.Error(), "decode item") {
		t.Errorf("bad item: %v", err)
	}
	big := "data: " + strings.Repeat("x", MaxEventSize) + "\n\n"
	if _, err := stream(big).Next(); err == nil || errors.Is(err, ErrEventsEnded) {
		t.Errorf("oversized event: %v", err)
	}
	// A stream cut inside an event ends it too.
	if _, err := stream("event: item\ndata: {\"id\":").Next(); !errors.Is(err, ErrEventsEnded) {
		t.Errorf("cut stream: %v", err)
	}
}

func TestEventsNoDaemon(t *testing.T) {
	c := NewClient(t.TempDir() + "/meshd.sock")
	n := 0
	for _, err := range c.Events(context.Background()) {
		n++
		if !errors.Is(err, ErrNoDaemon) {
			t.Errorf("err %v, want ErrNoDaemon", err)
		}
	}
	if n != 1 {
		t.Errorf("%d values, want one error", n)
	}
}

// FuzzEventStream checks that no stream text makes the reader panic or
// loop, and that it always ends with an error.
func FuzzEventStream(f *testing.F) {
	f.Add("event: item\ndata: {\"id\":\"a\"}\n\n")
	f.Add("event: lagged\ndata: {}\n\n: keepalive\n\n")
	f.Add("data: a\ndata: b\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		es := stream(s)
		for i := 0; ; i++ {
			if i > len(s) {
				t.Fatalf("more events than bytes")
			}
			if _, err := es.Next(); err != nil {
				return
			}
		}
	})
}

// TestEventStreamAttachments: "attachments" events reach only a stream
// that asked for them; others read past them to the next item.
func TestEventStreamAttachments(t *testing.T) {
	const in = "event: attachments\ndata: {\"kind\":\"attachments\",\"id\":\"a\",\"attachments\":[{\"name\":\"x.patch\",\"size\":3,\"path\":\"/m/x.patch\"}]}\n\n" +
		"event: item\ndata: {\"id\":\"b\"}\n\n"
	s := stream(in)
	if ev, err := s.Next(); err != nil || ev.Ready != nil || ev.Item.ID != "b" {
		t.Fatalf("default stream: %+v, %v; want item b", ev, err)
	}
	s = stream(in)
	s.Attachments = true
	ev, err := s.Next()
	if err != nil || ev.Ready == nil || ev.Ready.ID != "a" || len(ev.Ready.Attachments) != 1 || ev.Ready.Attachments[0].Path != "/m/x.patch" {
		t.Fatalf("stream with Attachments: %+v, %v", ev, err)
	}
	if ev, err := s.Next(); err != nil || ev.Item.ID != "b" {
		t.Fatalf("after the attachments event: %+v, %v", ev, err)
	}
}

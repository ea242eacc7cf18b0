package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	at := time.Date(2026, 11, 21, 12, 0, 5, 0, time.UTC)
	alice := api.Party{Fingerprint: "1a2b3c4d5e6f7a8b", Name: "alice"}
	h := api.History{Channel: "load", ChannelID: "c1", Stored: 10, Messages: []api.HistoryMessage{
		{ID: "e1", From: alice, Channel: "load", Sent: at, Epoch: "ep", Seq: 3, Body: "v1.4.2 is live"},
		{ID: "e2", From: api.Party{Fingerprint: "5e6f7a8b1a2b3c4d"}, Channel: "load", Sent: at.Add(time.Second), Seq: 9,
			FromHistory: true, Body: "two lines\nof \x1b[2Jtext\n", InReplyTo: "e1"},
		{ID: "e3", From: alice, Channel: "load", Sent: at.Add(2 * time.Second), Seq: 4},
	}}
	f.answer("GET /v1/history", 200, h)

	out := f.ok(t, "", "history", "#load", "--since", "2h", "--limit", "3")
	if q := f.one(t, "GET /v1/history").Query; q.Encode() != "channel=load&limit=3&since=2h" {
		t.Errorf("history query %v", q.Encode())
	}
	ts := func(d time.Duration) string { return at.Add(d).Local().Format("2006-01-02 15:04:05") }
	want := ts(0) + " alice seq=3 id=e1: v1.4.2 is live\n" +
		ts(time.Second) + " 5e6f7a8b1a2b3c4d seq=9 id=e2 in_reply_to=e1 [from history]:\n" +
		"    two lines\n" +
		"    of \\x1b[2Jtext\n" +
		ts(2*time.Second) + " alice seq=4 id=e3: (empty)\n" +
		"(the newest 3 of 10 stored; see --limit and --since)\n"
	if out != want {
		t.Errorf("history output:\n%s\nwant:\n%s", out, want)
	}

	// The name without '#', an RFC 3339 time, JSON.
	got := decode[api.History](t, f.ok(t, "", "history", "load", "--since", "2026-11-21T12:00:00Z", "--json"))
	if q := f.one(t, "GET /v1/history").Query; q.Encode() != "channel=load&since=2026-11-21T12%3A00%3A00Z" {
		t.Errorf("history query %v", q.Encode())
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("history --json: %+v", got)
	}

	f.answer("GET /v1/history", 200, api.History{Channel: "load", Messages: []api.HistoryMessage{}})
	if out := f.ok(t, "", "history", "#load"); out != "no messages of #load in the store\n" {
		t.Errorf("empty history: %q", out)
	}
	f.take()

	f.answer("GET /v1/history", 404, api.Error{Error: `channel "nope": not found`, Hint: "list channels with: meshctl channel list"})
	r := f.fails(t, 1, []string{"history", "#nope"}, "not found")
	if !strings.Contains(r.stderr, "hint: list channels with: meshctl channel list") {
		t.Errorf("stderr %q lacks the hint", r.stderr)
	}
	f.take()

	f.fails(t, 2, []string{"history"}, "missing '#NAME'")
	f.fails(t, 2, []string{"history", "#load", "--since", "yesterday"}, "--since")
	f.fails(t, 2, []string{"history", "#load", "--limit", "-1"}, "--limit must be from 1 to 10000")
	f.fails(t, 2, []string{"history", "#load", "--limit", "10001"}, "--limit")
	f.fails(t, 2, []string{"history", "#a", "#b"}, `unexpected argument "#b"`)
	f.none(t)
}

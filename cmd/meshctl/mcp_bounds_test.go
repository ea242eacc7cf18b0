package main

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
)

// TestNewestWithin: read_history keeps the newest messages whose bodies
// fit its budget, and says when it left older ones out.
func TestNewestWithin(t *testing.T) {
	t.Parallel()
	msg := func(id string, n int) api.HistoryMessage {
		return api.HistoryMessage{ID: id, Body: strings.Repeat("x", n)}
	}
	msgs := []api.HistoryMessage{msg("a", 400), msg("b", 300), msg("c", 300)}
	for _, tc := range []struct {
		budget    int
		want      string
		truncated bool
	}{
		{1000, "abc", false},
		{999, "bc", true},
		{600, "bc", true},
		{599, "c", true},
		{299, "", true},
	} {
		got, truncated := newestWithin(msgs, tc.budget)
		var ids strings.Builder
		for _, m := range got {
			ids.WriteString(m.ID)
		}
		if ids.String() != tc.want || truncated != tc.truncated {
			t.Errorf("budget %d: %q truncated %v, want %q %v", tc.budget, ids.String(), truncated, tc.want, tc.truncated)
		}
	}
	if got, truncated := newestWithin(nil, 10); got == nil || len(got) != 0 || truncated {
		t.Errorf("no messages: %v %v", got, truncated)
	}
}

// TestChannelNoticeBounds: a channel notification's content is cut at
// 32 KiB on a character boundary, with a note, and requests and responses
// show their intent, ids and JSON compacted.
func TestChannelNoticeBounds(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", claudeChannelMaxContent) // 2 bytes each: twice the bound
	p := channelNotice(&api.Item{ID: "i1", Kind: "message", Body: big, From: api.Party{Fingerprint: "f1"}})
	body, note, ok := strings.Cut(p.Content, "\n[cut at 32 KiB")
	if !ok || len(body) > claudeChannelMaxContent || len(body) < claudeChannelMaxContent-1 || !utf8.ValidString(p.Content) || note == "" {
		t.Errorf("cut content: %d bytes, valid %v, note %q", len(body), utf8.ValidString(p.Content), note)
	}
	if p.Meta["from"] != "f1" || p.Meta["item_id"] != "i1" {
		t.Errorf("meta without a name: %v", p.Meta)
	}
	hop := 1
	p = channelNotice(&api.Item{ID: "i2", Kind: "request", Intent: "run-tests", RequestID: "r1", Hop: &hop, Params: []byte("{\n  \"branch\": \"main\"\n}"), From: api.Party{Name: "bob"}})
	if want := `request "run-tests" (request_id r1); params: {"branch":"main"}`; p.Content != want || p.Meta["hop"] != "1" || p.Meta["intent"] != "run-tests" {
		t.Errorf("request notice %q %v, want %q", p.Content, p.Meta, want)
	}
	for k := range p.Meta {
		if strings.Trim(k, "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("meta key %q is not an identifier", k)
		}
	}
}

// TestChannelRemembersBounded: the ids remembered as pushed stay at most
// claudeChannelRemember, forgetting the oldest first.
func TestChannelRemembersBounded(t *testing.T) {
	t.Parallel()
	ch := newClaudeChannel(nil, nil)
	for i := range claudeChannelRemember + 10 {
		ch.remember(fmt.Sprint(i))
	}
	if len(ch.pushed) != claudeChannelRemember || len(ch.order) != claudeChannelRemember {
		t.Fatalf("remembers %d ids (%d in order), want %d", len(ch.pushed), len(ch.order), claudeChannelRemember)
	}
	if ch.pushed["9"] || !ch.pushed["10"] || !ch.pushed[fmt.Sprint(claudeChannelRemember+9)] {
		t.Error("did not forget the oldest first")
	}
}

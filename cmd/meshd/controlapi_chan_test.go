package main

import (
	"encoding/json"
	"strings"
)

// exerciseChannelDrafts drives the draft and publish routes of the
// control API: alice (admin) drafts a channel edit without applying it,
// publishes it, and a rollback and bytes that are no policy are refused;
// bob (member) may not draft. The 409 answers, an edit short of the
// roster's quorum, need a quorum above 1: TestChannelEditQuorum drives
// them through meshctl.
func (c *apiChecker) exerciseChannelDrafts(alice, bob string) {
	c.t.Helper()
	const js = "application/json"
	c.json(alice, "POST", "/v1/channels", map[string]any{"name": "drafts"}, 200, nil)
	var d struct {
		Version              uint64
		Document             []byte
		Signatures, Required int
	}
	c.json(alice, "POST", "/v1/channels/drafts/draft", map[string]any{"retention_hours": 48}, 200, &d)
	if d.Version != 2 || len(d.Document) == 0 || d.Signatures != 1 || d.Required != 1 {
		c.t.Fatalf("draft: %+v", d)
	}
	var ch struct{ Version uint64 }
	c.json(alice, "GET", "/v1/channels/drafts", nil, 200, &ch)
	if ch.Version != 1 {
		c.t.Fatalf("a draft was applied: v%d", ch.Version)
	}
	c.json(alice, "POST", "/v1/channels/publish", map[string]any{"document": d.Document}, 200, &ch)
	if ch.Version != 2 {
		c.t.Fatalf("published: v%d", ch.Version)
	}
	v2 := d.Document
	c.json(alice, "POST", "/v1/channels/drafts/draft", map[string]any{"delete": true}, 200, &d)
	c.json(alice, "POST", "/v1/channels/publish", map[string]any{"document": d.Document}, 200, nil)
	if msg := c.refused(alice, reqValid, "POST", "/v1/channels/publish", js, docJSON(c, v2), 400, false); !strings.Contains(msg, "rollback") {
		c.t.Fatalf("publishing v2 over v3: %q", msg)
	}
	c.refused(alice, reqValid, "POST", "/v1/channels/publish", js, []byte(`{"document":"bm90IGEgcG9saWN5"}`), 400, false)
	c.refused(alice, reqInvalid, "POST", "/v1/channels/drafts/draft", js, []byte(`{"colour":"red"}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/channels/drafts/draft", js, []byte(`{"retention_hours":1}`), 403, false)
	c.refused(alice, reqValid, "POST", "/v1/channels/nope/draft", js, []byte(`{}`), 404, true)
}

// docJSON is the body of POST /v1/channels/publish for doc.
func docJSON(c *apiChecker, doc []byte) []byte {
	b, err := json.Marshal(map[string]any{"document": doc})
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

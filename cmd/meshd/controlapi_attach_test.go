package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// exerciseAttachments drives POST /v1/send with an attachment and POST
// /v1/fetch: bob DMs alice a file, alice fetches it; the refusals.
func (c *apiChecker) exerciseAttachments(alice, bob string) {
	c.t.Helper()
	const js = "application/json"
	file := filepath.Join(c.t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("the notes\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	// alice's event stream: the item, then its attachment's path, each
	// checked against the document's schema for its event type.
	ev := c.openEvents(alice)
	defer ev.close()
	var sent struct{ ID string }
	c.json(bob, "POST", "/v1/send", map[string]any{"to": "alice", "body": "with notes", "attachments": []string{file}}, 200, &sent)
	for {
		typ, data := ev.next()
		if typ != "attachments" || data["id"] != sent.ID {
			continue
		}
		if as, _ := data["attachments"].([]any); len(as) != 1 || as[0].(map[string]any)["path"] == nil {
			c.t.Fatalf("attachments event %v", data)
		}
		break
	}
	body, _ := json.Marshal(map[string]string{"id": sent.ID})
	var fetched struct {
		Attachments []struct{ Name, Path string }
	}
	waitFor(c.t, "alice fetching bob's attachment", 20*time.Second, func() bool {
		code, data := c.call(alice, reqValid, "POST", "/v1/fetch", js, body)
		return code == 200 && json.Unmarshal(data, &fetched) == nil
	})
	if len(fetched.Attachments) != 1 || fetched.Attachments[0].Name != "notes.txt" {
		c.t.Fatalf("fetched %+v", fetched)
	}
	if got, _ := os.ReadFile(fetched.Attachments[0].Path); string(got) != "the notes\n" {
		c.t.Fatalf("fetched file holds %q", got)
	}
	c.refused(alice, reqValid, "POST", "/v1/fetch", js, []byte(`{"id":"nope"}`), 400, false)
	c.refused(alice, reqValid, "POST", "/v1/fetch", js, []byte(`{"id":"0f8f7b0e-3a43-4d8e-9b55-6c1e0b8f2a11"}`), 404, true)
	if msg := c.refused(alice, reqValid, "POST", "/v1/send", js, []byte(`{"to":"bob","body":"x","attachments":["/nonexistent/file"]}`), 400, true); !strings.Contains(msg, "cannot read") {
		c.t.Fatalf("unreadable attachment: %q", msg)
	}
}

package main

import (
	"strings"
	"time"
)

// exerciseCards drives the card routes of the control API: alice has no
// card (404), publishes one (and a refused one, 400), bob sees it, alice
// clears it.
func (c *apiChecker) exerciseCards(alice, bob string) {
	c.t.Helper()
	const js = "application/json"
	c.refused(alice, reqValid, "GET", "/v1/card", "", nil, 404, true)
	c.refused(bob, reqValid, "GET", "/v1/cards/alice", "", nil, 404, true)
	var card struct {
		Version uint64
		Intents []struct{ Name string }
	}
	c.json(alice, "PUT", "/v1/card", map[string]any{"description": "CI runner", "tags": []string{"ci"},
		"intents": []map[string]any{{"name": "run-tests", "summary": "go test", "params_schema": map[string]any{"type": "object"}}}}, 200, &card)
	if card.Version == 0 || len(card.Intents) != 1 {
		c.t.Fatalf("published card: %+v", card)
	}
	if msg := c.refused(alice, reqValid, "PUT", "/v1/card", js, []byte(`{"tags":["a","a"]}`), 400, false); !strings.Contains(msg, "listed twice") {
		c.t.Fatalf("duplicate tags: %q", msg)
	}
	c.refused(alice, reqInvalid, "PUT", "/v1/card", js, []byte(`{"colour":"red"}`), 400, false)
	c.json(alice, "GET", "/v1/card", nil, 200, nil)
	waitFor(c.t, "alice's card at bob", 10*time.Second, func() bool {
		code, _ := c.call(bob, reqValid, "GET", "/v1/cards/alice", "", nil)
		return code == 200
	})
	var cs struct{ Cards []struct{ Name string } }
	c.json(bob, "GET", "/v1/cards?intent=run-tests", nil, 200, &cs)
	if len(cs.Cards) != 1 || cs.Cards[0].Name != "alice" {
		c.t.Fatalf("bob's cards for run-tests: %+v", cs)
	}
	c.json(alice, "DELETE", "/v1/card", nil, 200, nil)
	c.exerciseRequestAny(alice, bob)

	// Cancel: a bad id, a request nobody answered, then one named peer.
	c.refused(alice, reqValid, "POST", "/v1/cancel", js, []byte(`{"request_id":"x"}`), 400, false)
	rid := "0193a0c4-7f2e-7b31-9c55-2d1e8f6a4b10"
	c.refused(alice, reqValid, "POST", "/v1/cancel", js, []byte(`{"request_id":"`+rid+`"}`), 404, true)
	var sent struct {
		Kind      string
		RequestID string `json:"request_id"`
	}
	c.json(alice, "POST", "/v1/cancel", map[string]string{"request_id": rid, "to": "bob"}, 200, &sent)
	if sent.Kind != "request" || sent.RequestID == "" {
		c.t.Fatalf("cancel sent %+v", sent)
	}
}

// exerciseRequestAny drives POST /v1/request/any: bad bodies (400), an
// intent nobody serves (404 with a hint), a member that may not send
// requests (403), and bob, whose card lists the intent, silent past the
// accept timeout (200, not taken).
func (c *apiChecker) exerciseRequestAny(alice, bob string) {
	c.t.Helper()
	const js = "application/json"
	c.refused(alice, reqInvalid, "POST", "/v1/request/any", js, []byte(`{"intent":""}`), 400, false)
	c.refused(alice, reqInvalid, "POST", "/v1/request/any", js, []byte(`{"intent":"x","accept_timeout_seconds":301}`), 400, false)
	c.refused(alice, reqInvalid, "POST", "/v1/request/any", js, []byte(`{"intent":"x","to":"bob"}`), 400, false)
	if msg := c.refused(alice, reqValid, "POST", "/v1/request/any", js, []byte(`{"intent":"deploy"}`), 404, true); !strings.Contains(msg, "no online or away member") {
		c.t.Fatalf("request-any for an unserved intent: %q", msg)
	}
	c.json(bob, "PUT", "/v1/card", map[string]any{"intents": []map[string]any{{"name": "run-tests"}}}, 200, nil)
	waitFor(c.t, "bob's card at alice", 10*time.Second, func() bool {
		code, _ := c.call(alice, reqValid, "GET", "/v1/cards/bob", "", nil)
		return code == 200
	})
	c.json(alice, "PUT", "/v1/card", map[string]any{"intents": []map[string]any{{"name": "run-tests"}}}, 200, nil)
	waitFor(c.t, "alice's card at bob", 10*time.Second, func() bool {
		code, _ := c.call(bob, reqValid, "GET", "/v1/cards/alice", "", nil)
		return code == 200
	})
	c.refused(bob, reqValid, "POST", "/v1/request/any", js, []byte(`{"intent":"run-tests","accept_timeout_seconds":0.2}`), 403, false)
	var r struct {
		Taken bool
		Tried []struct{ Name, Outcome string }
	}
	c.json(alice, "POST", "/v1/request/any", map[string]any{"intent": "run-tests", "accept_timeout_seconds": 0.3}, 200, &r)
	if r.Taken || len(r.Tried) != 1 || r.Tried[0].Name != "bob" || r.Tried[0].Outcome != "timed_out" {
		c.t.Fatalf("request-any to a silent member: %+v", r)
	}
	c.json(alice, "DELETE", "/v1/card", nil, 200, nil)
	c.json(bob, "DELETE", "/v1/card", nil, 200, nil)
}

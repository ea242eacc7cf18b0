package main

import "strings"

// exerciseJoinRoutes drives the invite and pending endpoints for
// TestControlAPILive: alice is an admin of a quorum-1 roster with bob as
// a member.
func (c *apiChecker) exerciseJoinRoutes(alice, bob string) {
	t := c.t
	const js = "application/json"
	var inv struct{ ID, Token, State string }
	c.json(alice, "POST", "/v1/invites", map[string]any{"role": "member", "name": "dave", "expires_seconds": 600}, 200, &inv)
	if inv.State != "usable" || !strings.HasPrefix(inv.Token, "meshinv1:") {
		t.Fatalf("created invite: %+v", inv)
	}
	c.refused(alice, reqValid, "POST", "/v1/invites", js, []byte(`{"role":"member","expires_seconds":1}`), 400, false)
	c.refused(alice, reqInvalid, "POST", "/v1/invites", js, []byte(`{"role":"chief"}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/invites", js, []byte(`{"role":"member"}`), 403, true)
	c.refused(alice, reqValid, "POST", "/v1/invites", js, []byte(`{"role":"member","name":"bob"}`), 409, true)
	var list struct{ Invites []struct{ ID string } }
	c.json(alice, "GET", "/v1/invites", nil, 200, &list)
	if len(list.Invites) != 1 || list.Invites[0].ID != inv.ID {
		t.Fatalf("invite list: %+v", list)
	}
	c.json(alice, "POST", "/v1/invites/"+inv.ID+"/revoke", nil, 200, nil)
	c.refused(alice, reqValid, "POST", "/v1/invites/"+inv.ID+"/revoke", "", nil, 409, false)
	c.refused(alice, reqValid, "POST", "/v1/invites/0000000000000000/revoke", "", nil, 404, true)
	c.json(alice, "GET", "/v1/pending", nil, 200, nil)
	var ad struct {
		Fresh   bool
		Knocked []any
	}
	c.json(bob, "GET", "/v1/adopt", nil, 200, &ad)
	if ad.Fresh || ad.Knocked == nil {
		t.Fatalf("adopt state of a member of a two-member org: %+v", ad)
	}
	c.refused(bob, reqValid, "POST", "/v1/adopt", js, []byte(`{"fingerprint":"acme"}`), 400, true)
	c.refused(bob, reqValid, "POST", "/v1/adopt", js, []byte(`{"fingerprint":"0123456789abcdef"}`), 409, true)
	var doc struct {
		Problems int
		Checks   []struct{ Name, Status string }
	}
	c.json(alice, "GET", "/v1/doctor", nil, 200, &doc)
	if doc.Problems != 0 || len(doc.Checks) < 6 {
		t.Fatalf("doctor on a healthy node: %+v", doc)
	}
}

// exerciseRespondHints: responding with the request's envelope id names
// the request id in the hint; a second final answer is refused.
func (c *apiChecker) exerciseRespondHints(bob, requestID, envelopeID string) {
	t := c.t
	const js = "application/json"
	if envelopeID == "" || envelopeID == requestID {
		t.Fatalf("request envelope id %q, request id %q", envelopeID, requestID)
	}
	code, data := c.call(bob, reqValid, "POST", "/v1/respond", js, []byte(`{"request_id":"`+envelopeID+`","status":"completed"}`))
	if code != 404 || !strings.Contains(string(data), requestID) {
		t.Fatalf("respond with the envelope id: %d %s", code, data)
	}
	if msg := c.refused(bob, reqValid, "POST", "/v1/respond", js, []byte(`{"request_id":"`+requestID+`","status":"failed"}`), 409, true); !strings.Contains(msg, "already answered completed") {
		t.Fatalf("second answer: %q", msg)
	}
}

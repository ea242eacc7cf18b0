package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshd/meshd/node/api"
)

func bobCard() api.Card {
	return api.Card{Party: api.Party{Name: "bob", Fingerprint: "1a2b3c4d5e6f7a8b"}, Version: 5, Description: "CI runner",
		Intents: []api.CardIntent{{Name: "run-tests", Summary: "go test", ParamsSchema: []byte(`{"type":"object"}`)}},
		Tags:    []string{"ci"}, Presence: "online"}
}

// TestRequestCardCheck: request looks up the peer's card first; an
// unlisted intent warns on stderr and sends, --strict refuses without
// sending, and a peer without a card is asked as before unless --strict.
func TestRequestCardCheck(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.answer("POST /v1/request", 200, api.Sent{ID: "e5", Kind: "request", To: "@bob", RequestID: "r1", Hop: hop(0)})
	f.answer("GET /v1/cards/bob", 200, bobCard())

	r := f.mc(t, "", "request", "bob", "run-tests")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("listed intent: %+v", r)
	}
	if reqs := f.take(); len(reqs) != 2 || reqs[0].Route != "GET /v1/cards/bob" || reqs[1].Route != "POST /v1/request" {
		t.Fatalf("requests %+v", reqs)
	}
	r = f.mc(t, "", "request", "bob", "deploy")
	if r.code != 0 || r.stderr != "warning: bob's card does not list intent deploy (it lists: run-tests); sending anyway\n" {
		t.Fatalf("unlisted intent: %+v", r)
	}
	f.take()
	f.fails(t, 1, []string{"request", "bob", "deploy", "--strict"}, "--strict: bob's card does not list intent deploy")
	if reqs := f.take(); len(reqs) != 1 || reqs[0].Route != "GET /v1/cards/bob" {
		t.Fatalf("--strict sent anyway: %+v", reqs)
	}

	cleared := api.Card{Party: api.Party{Name: "carol"}, Version: 2, Cleared: true, Intents: []api.CardIntent{}}
	f.answer("GET /v1/cards/carol", 200, cleared)
	f.fails(t, 1, []string{"request", "carol", "x", "--strict"}, "carol cleared its card")

	// No card (404): asked as before, refused with --strict.
	f.answer("GET /v1/cards/dave", 404, api.Error{Error: "dave publishes no card"})
	if r := f.mc(t, "", "request", "dave", "x"); r.code != 0 || r.stderr != "" {
		t.Fatalf("peer without a card: %+v", r)
	}
	f.fails(t, 1, []string{"request", "dave", "x", "--strict"}, "publishes no card")
}

// TestCardCommands: card set reads the file strictly and sends it, card
// show and agents print the card, and bad input is named.
func TestCardCommands(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.answer("PUT /v1/card", 200, bobCard())
	f.answer("GET /v1/card", 200, bobCard())
	f.answer("GET /v1/cards/bob", 200, bobCard())
	f.answer("DELETE /v1/card", 200, api.Card{Version: 6, Cleared: true})
	f.answer("GET /v1/cards", 200, api.Cards{Cards: []api.Card{bobCard()}})

	file := filepath.Join(t.TempDir(), "card.json")
	os.WriteFile(file, []byte(`{"description":"CI runner","intents":[{"name":"run-tests","summary":"go test","params_schema":{"type":"object"}}],"tags":["ci"]}`), 0o600)
	if out := f.ok(t, "", "card", "set", "--file", file); out != "published card version 5 (1 intents)\n" {
		t.Errorf("card set: %q", out)
	}
	wantBody(t, f.one(t, "PUT /v1/card"), `{"description":"CI runner","intents":[{"name":"run-tests","summary":"go test","params_schema":{"type":"object"}}],"tags":["ci"]}`)
	f.ok(t, `{"tags":["x"]}`, "card", "set", "--file", "-")
	wantBody(t, f.one(t, "PUT /v1/card"), `{"tags":["x"]}`)

	out := f.ok(t, "", "card", "show", "bob")
	for _, w := range []string{"member:      bob (1a2b3c4d5e6f7a8b)", "description: CI runner", "tags:        ci", "  run-tests: go test (params schema)"} {
		if !strings.Contains(out, w) {
			t.Errorf("card show lacks %q:\n%s", w, out)
		}
	}
	f.take()
	f.ok(t, "", "card", "show")
	f.one(t, "GET /v1/card")
	if out := f.ok(t, "", "card", "clear"); out != "cleared this node's card (version 6)\n" {
		t.Errorf("card clear: %q", out)
	}
	f.one(t, "DELETE /v1/card")

	out = f.ok(t, "", "agents", "--intent", "run-tests")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "bob") || !strings.Contains(out, "run-tests") {
		t.Errorf("agents:\n%s", out)
	}
	if q := f.one(t, "GET /v1/cards").Query.Get("intent"); q != "run-tests" {
		t.Errorf("agents --intent sent intent=%q", q)
	}

	f.fails(t, 2, []string{"card", "set"}, "needs --file")
	os.WriteFile(file, []byte(`{"colour":"red"}`), 0o600)
	f.fails(t, 1, []string{"card", "set", "--file", file}, `unknown field "colour"`)
	f.fails(t, 1, []string{"card", "set", "--file", filepath.Join(t.TempDir(), "nope.json")}, "no such file")
	f.fails(t, 2, []string{"agents", "extra"}, "")
	f.none(t)
}

// TestRequestAnyFlags: --any's flag rules, and no candidate.
func TestRequestAnyFlags(t *testing.T) {
	t.Parallel()
	f := newFakeMeshd(t)
	f.fails(t, 2, []string{"request", "--intent", "x"}, "--intent goes with --any")
	f.fails(t, 2, []string{"request", "--any"}, "give the intent once")
	f.fails(t, 2, []string{"request", "--any", "--intent", "x", "bob"}, "give the intent once")
	f.fails(t, 2, []string{"request", "--any", "x", "--strict"}, "--strict does not apply")
	f.fails(t, 2, []string{"request", "--any", "x", "--accept-timeout", "0s"}, "--accept-timeout must be positive")
	f.fails(t, 2, []string{"request", "--any", "x", "--timeout", "1s"}, "--timeout needs --wait")
	f.fails(t, 2, []string{"request", "--any", "x", "--accept-timeout", "6m"}, "--accept-timeout must be at most 5m0s")
	f.none(t)
	f.answer("POST /v1/request/any", 404, api.Error{Error: `no online or away member's card lists intent "run-tests"`, Hint: "see who serves what: meshctl agents --intent run-tests"})
	f.fails(t, 1, []string{"request", "--any", "--intent", "run-tests", "--accept-timeout", "2s"}, "no online or away member's card lists intent")
	var in api.RequestAny
	if err := json.Unmarshal([]byte(f.one(t, "POST /v1/request/any").Body), &in); err != nil || in.Intent != "run-tests" || in.AcceptTimeoutSeconds != 2 {
		t.Errorf("request body %+v: %v", in, err)
	}
}

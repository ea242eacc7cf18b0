package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// agentsJSON is the answer of meshctl agents --json.
type agentsJSON struct {
	Cards []struct {
		Name     string
		Version  uint64
		Presence string
		Intents  []struct {
			Name         string
			Summary      string
			ParamsSchema json.RawMessage `json:"params_schema"`
		}
	}
}

// waitAgent polls meshctl agents --intent on home until a card of name
// with at least version min is listed.
func (o *histOrg) waitAgent(home, intent, name string, min uint64, within time.Duration) time.Duration {
	o.t.Helper()
	start := time.Now()
	var a agentsJSON
	if !testwait.Until(within, func() bool {
		a = agentsJSON{}
		meshctlJSON(o.t, o.meshctl, &a, "--home", home, "agents", "--intent", intent, "--json")
		for _, c := range a.Cards {
			if c.Name == name && c.Version >= min {
				return true
			}
		}
		return false
	}) {
		o.t.Fatalf("%s never listed %s for intent %s within %v: %+v", home, name, intent, within, a)
	}
	return time.Since(start)
}

// TestAgentCardsEndToEnd: a card set on bob appears in meshctl agents
// --intent on alice within seconds, survives alice's restart, reaches
// carol when she links later, and is what MCP find_agents returns on
// carol. A request for an intent bob's card does not list warns at the
// sender, and --strict refuses it.
func TestAgentCardsEndToEnd(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob", "carol")
	alice, bob, carol := o.homes["alice"], o.homes["bob"], o.homes["carol"]
	if err := o.ds["carol"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	card := filepath.Join(t.TempDir(), "card.json")
	if err := os.WriteFile(card, []byte(`{"description": "CI runner", "tags": ["ci"],
		"intents": [{"name": "run-tests", "summary": "run go test on a branch",
		             "params_schema": {"type": "object", "properties": {"branch": {"type": "string"}}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var set struct{ Version uint64 }
	meshctlJSON(t, o.meshctl, &set, "--home", bob, "card", "set", "--file", card, "--json")
	took := o.waitAgent(alice, "run-tests", "bob", set.Version, 10*time.Second)
	t.Logf("bob's card listed at alice %v after card set", took)
	if out := o.ctl("alice", "agents"); !strings.Contains(out, "bob") || !strings.Contains(out, "run-tests") || !strings.Contains(out, "CI runner") {
		t.Fatalf("meshctl agents:\n%s", out)
	}
	if out := o.ctl("alice", "agents", "--intent", "deploy"); !strings.Contains(out, "no member's card lists intent deploy") {
		t.Fatalf("meshctl agents --intent deploy:\n%s", out)
	}
	if out := o.ctl("alice", "card", "show", "bob"); !strings.Contains(out, "run-tests: run go test on a branch (params schema)") {
		t.Fatalf("meshctl card show bob:\n%s", out)
	}

	// Requests: an unlisted intent warns, and --strict refuses it.
	r := meshctlRun(t, o.meshctl, "--home", alice, "request", "bob", "deploy")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: bob's card does not list intent deploy (it lists: run-tests)") {
		t.Fatalf("request for an unlisted intent: %+v", r)
	}
	r = meshctlRun(t, o.meshctl, "--home", alice, "request", "bob", "deploy", "--strict")
	if r.code != 1 || !strings.Contains(r.stderr, "--strict") || strings.Contains(r.stdout, "sent request") {
		t.Fatalf("request --strict for an unlisted intent: %+v", r)
	}
	r = meshctlRun(t, o.meshctl, "--home", alice, "request", "bob", "run-tests", "--strict")
	if r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Fatalf("request --strict for a listed intent: %+v", r)
	}
	r = meshctlRun(t, o.meshctl, "--home", bob, "request", "alice", "x", "--strict")
	if r.code != 1 || !strings.Contains(r.stderr, "publishes no card") {
		t.Fatalf("request --strict to a member without a card: %+v", r)
	}

	// A restart keeps the card: alice lists it before any link is up.
	if err := o.ds["alice"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.start("alice")
	var shown struct {
		Version uint64
		Intents []struct{ Name string }
	}
	meshctlJSON(t, o.meshctl, &shown, "--home", alice, "card", "show", "bob", "--json")
	if shown.Version != set.Version || len(shown.Intents) != 1 || shown.Intents[0].Name != "run-tests" {
		t.Fatalf("bob's card at alice after restart: %+v", shown)
	}

	// carol links later, while bob is down, and gets bob's card from alice.
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.start("carol")
	o.waitAgent(carol, "run-tests", "bob", set.Version, 15*time.Second)

	// MCP find_agents on carol returns it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(o.meshctl, "--home", carol, "mcp")
	cmd.Env = cleanEnv()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_agents", Arguments: map[string]any{"intent": "run-tests"}})
	if err != nil || res.IsError {
		t.Fatalf("find_agents: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var found struct {
		Agents []struct {
			Name    string
			Intents []struct {
				Name         string
				ParamsSchema map[string]any `json:"params_schema"`
			}
		}
	}
	if err := json.Unmarshal(b, &found); err != nil || len(found.Agents) != 1 || found.Agents[0].Name != "bob" ||
		found.Agents[0].Intents[0].ParamsSchema["type"] != "object" {
		t.Fatalf("find_agents: %v %s", err, b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_peers"})
	if err != nil || res.IsError {
		t.Fatalf("list_peers: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"card":{"description":"CI runner","intents":["run-tests"]`) {
		t.Fatalf("list_peers lacks bob's card: %s", b)
	}

	// Clearing reaches the others too.
	o.start("bob")
	o.ctl("bob", "card", "clear")
	var a agentsJSON
	if !testwait.Until(10*time.Second, func() bool {
		a = agentsJSON{}
		meshctlJSON(t, o.meshctl, &a, "--home", carol, "agents", "--json")
		return len(a.Cards) == 0
	}) {
		t.Fatalf("bob's cleared card still listed at carol: %+v", a)
	}
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// TestOuterHarnessDoc runs the outer harness of docs/AGENTS.md (the
// 'while meshctl wait' loop for hosts that end their turn) with the real
// binary against a real node, the agent CLI replaced by an echo and the
// wait given a timeout so that the loop ends (a wait that times out ends
// the loop, with status 0): a DM waiting before the
// loop starts one agent run, the loop's guard marks it read, and so the
// loop does not spin on it but waits again.
func TestOuterHarnessDoc(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed; the harness in docs/AGENTS.md uses it")
	}
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "AGENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	var script string
	for _, b := range regexp.MustCompile("(?s)```bash\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(b[1], "while woke=$(meshctl wait --json)") {
			script = b[1]
		}
	}
	if script == "" {
		t.Fatal("docs/AGENTS.md shows no outer harness ('while woke=$(meshctl wait --json)')")
	}
	agent := regexp.MustCompile(`(?m)^\s*claude -p .*$`)
	if !agent.MatchString(script) {
		t.Fatalf("the harness runs no 'claude -p':\n%s", script)
	}
	script = agent.ReplaceAllLiteralString(script, `  echo "agent run: $(jq -r '.items[].body' <<<"$woke")"`)
	script = strings.Replace(script, "meshctl wait --json", "meshctl wait --json --timeout 3s", 1)
	script = regexp.MustCompile(`(?m)^export MESH_HOME=.*$`).ReplaceAllLiteralString(script, "")

	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	markAllRead(t, ctx, alice)
	dm, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "one job"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitItem(ctx, alice, func(it api.Item) bool { return it.ID == dm.ID }); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, bash, "-c", script)
	cmd.Env = append(os.Environ(), "MESH_HOME="+alice.home, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("harness ended after %s, before its second wait's 3 s timeout", d)
	}
	if got := strings.TrimSpace(string(out)); got != "agent run: one job" {
		t.Errorf("harness output %q, want one agent run for the one DM", got)
	}
	in, err := alice.c.Inbox(ctx, api.InboxQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Items) != 0 {
		t.Errorf("unread after the harness: %+v", in.Items)
	}
}

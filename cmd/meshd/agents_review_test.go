package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// reviewPatch changes the one line of hello.txt in the reviewer's tree.
const reviewPatch = `--- a/hello.txt
+++ b/hello.txt
@@ -1 +1 @@
-hello
+hello, world
`

// TestPatchReviewLoop runs docs/AGENTS.md's patch-review loop as written:
// bob's reviewer loop, then alice's requester commands in a folder
// holding change.patch. The patch reaches bob as the request's
// attachment, his loop finds its path in 'meshctl inbox --json', checks
// it against his tree and answers with review.txt attached; alice's
// commands print the verdict and the path of the review, which holds
// git's check of the patch. The exchange ends: alice's commands exit,
// bob's inbox is empty and his loop is back in its wait.
func TestPatchReviewLoop(t *testing.T) {
	testpar.Parallel(t)
	needTools(t, "bash", "jq", "git")
	o := newHistOrgArgs(t, nil, nil, "alice", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tree, work := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "hello.txt"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "change.patch"), []byte(reviewPatch), 0o600); err != nil {
		t.Fatal(err)
	}
	reviewer := docBlock(t, "### The patch-review loop", "bash")
	reviewer = strings.ReplaceAll(reviewer, "export MESH_HOME=/tmp/mesh/bob\n", "")
	reviewer = strings.ReplaceAll(reviewer, "cd ~/src/project", "cd '"+tree+"'")
	o.startLoop(t, ctx, "bob", "bash", reviewer)
	o.waitingAgent("bob")

	requester := "cd '" + work + "'\n" + docBlock(t, "### The patch-review loop", "sh")
	out, done := o.startLoop(t, ctx, "alice", "bash", requester)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("alice's commands still ran after 60s:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != "applies" {
		t.Fatalf("alice's commands printed %q, want the verdict and the review's path", lines)
	}
	review, err := os.ReadFile(lines[1])
	if err != nil || !strings.Contains(string(review), "1 file changed, 1 insertion(+), 1 deletion(-)") {
		t.Fatalf("review at %s: %v, %q", lines[1], err, review)
	}
	if !strings.HasPrefix(lines[1], filepath.Join(o.homes["alice"], "mailbox")+string(filepath.Separator)) {
		t.Fatalf("review path %s is not in alice's mailbox", lines[1])
	}
	waitFor(t, "bob's loop done with the request", 10*time.Second, func() bool {
		var in api.Inbox
		meshctlJSON(t, o.meshctl, &in, "--home", o.homes["bob"], "inbox")
		return len(in.Items) == 0
	})
	o.waitingAgent("bob")
	if b, _ := os.ReadFile(filepath.Join(tree, "hello.txt")); string(b) != "hello\n" {
		t.Fatalf("the review changed bob's tree: %q", b)
	}
}

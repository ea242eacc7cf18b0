package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// TestMCPReadAttachment: bob DMs alice a small text file; read_attachment
// on alice's side returns its text and its verified local path, and
// refuses a name the item does not list.
func TestMCPReadAttachment(t *testing.T) {
	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "review.md")
	if err := os.WriteFile(file, []byte("LGTM, one nit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sent, err := bob.n.Backend().Send(api.Send{To: "alice", Body: "my review", Attachments: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "meshctl-test", Version: "1"}, nil)
	cmd := exec.Command(bin, "--home", alice.home, "mcp")
	cmd.Env = append(os.Environ(), "MESH_HOME=")
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var out readAttachmentOut
	testwait.For(t, 20*time.Second, "read_attachment to answer", func() bool {
		res := callTool(t, ctx, cs, "read_attachment", map[string]any{"id": sent.ID, "name": "review.md"})
		if res.IsError {
			return false
		}
		out = structured[readAttachmentOut](t, res)
		return true
	})
	if out.Text != "LGTM, one nit\n" || out.Path == "" || out.Size != 14 {
		t.Fatalf("read_attachment: %+v", out)
	}
	if res := callTool(t, ctx, cs, "read_attachment", map[string]any{"id": sent.ID, "name": "other.md"}); !res.IsError {
		t.Fatal("read_attachment of a name the item does not list succeeded")
	}
}

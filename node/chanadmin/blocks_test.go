package chanadmin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

func TestBlockListPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blocks.json")
	b, err := openBlockList(path)
	if err != nil {
		t.Fatal(err)
	}
	var k proto.PubKey
	k[0] = 7
	if ch, err := b.set(k, true); err != nil || !ch {
		t.Fatalf("block: %v %v", ch, err)
	}
	if ch, _ := b.set(k, true); ch {
		t.Fatal("blocking twice changed the list")
	}
	again, err := openBlockList(path)
	if err != nil || !again.has(k) || len(again.list()) != 1 {
		t.Fatalf("reopened: %v %v", again.list(), err)
	}
	if ch, err := again.set(k, false); err != nil || !ch || again.has(k) {
		t.Fatalf("unblock: %v %v", ch, err)
	}
}

// TestDamagedBlockAndVersionFiles: a damaged blocks.json stops meshd with
// the file named and the fix; a damaged channel-versions.json (a record
// only) is started again.
func TestDamagedBlockAndVersionFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "blocks.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openBlockList(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "meshctl block") {
		t.Fatalf("damaged blocks.json: %v", err)
	}
	vs := filepath.Join(dir, "channel-versions.json")
	if err := os.WriteFile(vs, []byte("[1,2"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openChanVersions(vs)
	if err == nil || c == nil || len(c.m) != 0 {
		t.Fatalf("damaged channel-versions.json: %v %v", c, err)
	}
}

package peers

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshd/meshd/transport"
)

// TestServiceHoldsListeners: the service holds the link settings, the
// listeners and discovery the node hands it before Start, and
// CloseListeners closes the listeners.
func TestServiceHoldsListeners(t *testing.T) {
	r := newServiceRig(t)
	dir, err := os.MkdirTemp("", "px") // short: a Unix socket's path is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	r.svc.SetLinkConfig(r.srvCfg)
	ln, err := transport.Listen(context.Background(), transport.Addr{Network: "unix", Address: path}, r.svc.LinkConfig())
	if err != nil {
		t.Fatal(err)
	}
	r.svc.AddListener(ln)
	if r.svc.LinkConfig().Org != "acme" || len(r.svc.Listeners()) != 1 || r.svc.Discovery() != nil {
		t.Fatalf("link org %q, listeners %d, discovery %v", r.svc.LinkConfig().Org, len(r.svc.Listeners()), r.svc.Discovery())
	}
	if err := r.svc.CloseListeners(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after CloseListeners")
	}
}

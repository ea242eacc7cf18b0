package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

// TestHelpStyle: meshd --help prints, to stdout, double-dash flags with
// named values and examples, as meshctl does; a bad flag prints the
// same help to stderr and exits 2.
func TestHelpStyle(t *testing.T) {
	testpar.Parallel(t)
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb, envOf(nil)); code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"usage: meshd", "  --home DIR", "  --seed ADDR", "  --keepalive D", "examples:", "meshctl join"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "\n  -home") {
		t.Error("--help shows a single-dash flag")
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"--bogus"}, &out, &errb, envOf(nil)); code != 2 || !strings.Contains(errb.String(), "--bogus") || !strings.Contains(errb.String(), "examples:") {
		t.Fatalf("--bogus: exit %d\n%s", code, errb.String())
	}
}

// TestPortInUseLeavesNoOrg: a first start that cannot listen (the port is
// taken) fails with the address in its message and leaves no one-node org
// behind, so that a later meshctl join finds a fresh home.
func TestPortInUseLeavesNoOrg(t *testing.T) {
	testpar.Parallel(t)
	meshd, _ := buildBinaries(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := filepath.Join(t.TempDir(), "busy")
	d := startDaemon(t, meshd, h, "--listen", "tcp://"+ln.Addr().String(), "--no-mdns")
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		t.Fatal("meshd on a taken port did not exit")
	}
	if d.err == nil || !strings.Contains(d.stderr.String(), ln.Addr().String()) {
		t.Fatalf("meshd on a taken port: %v\n%s", d.err, d.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(h, "roster.cbor")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed start left a roster: %v\n%s", err, d.stderr.String())
	}
	if strings.Contains(d.stderr.String(), "one-node org") {
		t.Fatalf("a failed start says it started an org:\n%s", d.stderr.String())
	}
	// It says what to do: a port of its own, or any free one.
	if !strings.Contains(d.stderr.String(), "hint: another program (perhaps another meshd) listens on that port") ||
		!strings.Contains(d.stderr.String(), "--listen tcp://:0") {
		t.Errorf("no hint for a taken port:\n%s", d.stderr.String())
	}
}

// TestListenAnyPort: --listen tcp://:0 takes a free port, and status shows
// it, bound and advertised, so that several nodes run on one host without
// choosing ports.
func TestListenAnyPort(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "any")
	d := startDaemon(t, meshd, h, "--listen", "tcp://:0", "--no-mdns")
	waitStatus(t, meshctl, h, d)
	var st struct {
		Listen     []string `json:"listen"`
		Advertised []string `json:"advertised"`
	}
	meshctlJSON(t, meshctl, &st, "--home", h, "status")
	var port string
	for _, a := range st.Listen {
		if p, ok := strings.CutPrefix(a, "tcp://[::]:"); ok {
			port = p
		} else if p, ok := strings.CutPrefix(a, "tcp://0.0.0.0:"); ok {
			port = p
		}
	}
	if port == "" || port == "0" {
		t.Fatalf("listen %v: no port chosen", st.Listen)
	}
	found := false
	for _, a := range st.Advertised {
		found = found || (strings.HasPrefix(a, "tcp://") && strings.HasSuffix(a, ":"+port))
	}
	if !found {
		t.Errorf("advertised %v lacks port %s", st.Advertised, port)
	}
}

package main

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// rawTarget is a real meshd (org "acme") whose roster lists one more
// member that runs no meshd: a key the test holds and links with the
// project's transport package, to drive the node as a hostile or buggy
// member would.
type rawTarget struct {
	meshctl string
	home    string
	d       *daemon
	status  statusJSON
	target  proto.PubKey       // the node's key
	pub     proto.PubKey       // the raw member's
	key     ed25519.PrivateKey // the raw member's
}

// startRawTarget starts the node, with the raw member named name and
// meshd started with args (and --home), and waits until it answers.
// meshdBin, if not empty, replaces the meshd built from this tree.
func startRawTarget(t *testing.T, meshdBin, name string, args ...string) *rawTarget {
	t.Helper()
	r, _ := startRawTargetMembers(t, meshdBin, []string{name}, args...)
	return r
}

// startRawTargetMembers is startRawTarget with a raw member for each of
// names, the first the rawTarget's own; it returns their keys in order.
func startRawTargetMembers(t *testing.T, meshdBin string, names []string, args ...string) (*rawTarget, []ed25519.PrivateKey) {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	if meshdBin != "" {
		meshd = meshdBin
	}
	r := &rawTarget{meshctl: meshctl, home: filepath.Join(t.TempDir(), "target")}
	meshctlOK(t, meshctl, "--home", r.home, "init")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "init", "--org", "acme")
	keys := make([]ed25519.PrivateKey, len(names))
	for i, name := range names {
		pub, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = key
		meshctlOK(t, meshctl, "--home", r.home, "roster", "add", proto.PubKey(pub).String(), "--role", "member", "--name", name)
	}
	r.key = keys[0]
	r.pub = proto.PubKey(keys[0].Public().(ed25519.PublicKey))
	r.d = startDaemon(t, meshd, r.home, args...)
	r.status = waitStatus(t, meshctl, r.home, r.d)
	var err error
	if r.target, err = proto.ParsePubKey(r.status.Key); err != nil {
		t.Fatal(err)
	}
	return r, keys
}

// dial links the raw member to the node over TCP, within timeout, with
// the node's roster version in its payload. The link is not started.
func (r *rawTarget) dial(t *testing.T, timeout time.Duration) *transport.Link {
	t.Helper()
	return r.dialAs(t, r.key, timeout)
}

// dialAs is dial for the raw member whose key is key, with the link's
// settings changed by each of opts.
func (r *rawTarget) dialAs(t *testing.T, key ed25519.PrivateKey, timeout time.Duration, opts ...func(*transport.Config)) *transport.Link {
	t.Helper()
	cfg := transport.DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	cfg.Identity = key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: r.status.RosterVersion} }
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addr := transport.Addr{Network: "tcp", Address: strings.TrimPrefix(tcpListen(t, r.status), "tcp://")}
	l, err := transport.Dial(ctx, addr, cfg, &r.target)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

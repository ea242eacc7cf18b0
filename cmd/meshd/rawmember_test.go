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
	meshd, meshctl := buildBinaries(t)
	if meshdBin != "" {
		meshd = meshdBin
	}
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawTarget{meshctl: meshctl, home: filepath.Join(t.TempDir(), "target"), pub: proto.PubKey(pub), key: key}
	meshctlOK(t, meshctl, "--home", r.home, "init")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "add", r.pub.String(), "--role", "member", "--name", name)
	r.d = startDaemon(t, meshd, r.home, args...)
	r.status = waitStatus(t, meshctl, r.home, r.d)
	if r.target, err = proto.ParsePubKey(r.status.Key); err != nil {
		t.Fatal(err)
	}
	return r
}

// dial links the raw member to the node over TCP, within timeout, with
// the node's roster version in its payload. The link is not started.
func (r *rawTarget) dial(t *testing.T, timeout time.Duration) *transport.Link {
	t.Helper()
	cfg := transport.DefaultConfig()
	cfg.Identity = r.key
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

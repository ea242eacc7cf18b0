package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	meshnode "github.com/meshd/meshd/node"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/control"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// demoMember is one node of a demo mesh: its name and roster role.
type demoMember struct {
	name string
	role roster.Role
}

// demoNode is one running node of a demo mesh, with a control client on
// its socket, as meshctl would have.
type demoNode struct {
	name string
	home string
	id   home.Identity
	n    *meshnode.Node
	ctl  *control.Server // n's control socket, which c talks to
	c    *api.Client
}

// demoMesh is a throwaway mesh of in-process nodes on loopback.
type demoMesh struct {
	dir    string
	org    string
	nodes  []*demoNode
	byName map[string]*demoNode
}

// startDemoMesh creates a home under dir for each member, an identity
// each, and one roster whose first member (an admin) signs it, as
// 'meshctl init' and 'meshctl roster init' and 'roster add' would; writes
// the roster to every home; and starts a node per home, listening on
// 127.0.0.1 with mDNS off, the others seeded with the first's address.
// On error, what was started is closed.
func startDemoMesh(dir, org string, members []demoMember) (m *demoMesh, err error) {
	if len(members) == 0 || members[0].role != roster.RoleAdmin {
		return nil, errors.New("demo mesh: the first member must be an admin")
	}
	m = &demoMesh{dir: dir, org: org, byName: map[string]*demoNode{}}
	for _, mb := range members {
		h := home.Home{Dir: filepath.Join(dir, mb.name)}
		id, _, err := h.Init(mb.name)
		if err != nil {
			return nil, err
		}
		d := &demoNode{name: mb.name, home: h.Dir, id: id, c: api.NewClient(h.ControlSocket())}
		m.nodes = append(m.nodes, d)
		m.byName[mb.name] = d
	}
	admin := m.nodes[0].id
	r, err := roster.New(org, admin.Key, admin.Name)
	if err != nil {
		return nil, err
	}
	for i, mb := range members[1:] {
		next := r.Next()
		if err := next.Add(roster.Member{Key: m.nodes[i+1].id.Pub, Role: mb.role, Name: mb.name}); err != nil {
			return nil, err
		}
		if err := next.Sign(admin.Key); err != nil {
			return nil, err
		}
		r = next
	}
	for _, d := range m.nodes {
		if err := (home.Home{Dir: d.home}).SaveRoster(r); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	var seeds []transport.Addr
	for i, d := range m.nodes {
		cfg := meshnode.DefaultConfig()
		cfg.Home = d.home
		cfg.Name = d.name
		cfg.MDNS = false
		cfg.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
		cfg.Seeds = seeds
		// A throwaway mesh on one host: redial fast.
		// The demo's nodes are one user's own, and `meshctl bench` drives
		// them as fast as they go: no per-sender channel quota.
		cfg.ChannelSenderRate, cfg.ChannelSenderBytesPerHour = -1, -1
		cfg.DialBackoffMin = 50 * time.Millisecond
		cfg.DialBackoffMax = 500 * time.Millisecond
		if d.n, err = meshnode.New(cfg); err != nil {
			return nil, fmt.Errorf("start %s: %w", d.name, err)
		}
		if d.ctl, err = control.Serve(d.n.ControlSocket(), d.n.Backend(), slog.New(slog.DiscardHandler)); err != nil {
			return nil, fmt.Errorf("start %s: %w", d.name, err)
		}
		if i == 0 {
			a, err := tcpListenAddr(d.n)
			if err != nil {
				return nil, err
			}
			seeds = []transport.Addr{a}
		}
	}
	return m, nil
}

// tcpListenAddr returns the node's TCP listen address.
func tcpListenAddr(n *meshnode.Node) (transport.Addr, error) {
	for _, s := range n.ListenAddrs() {
		if a, err := transport.ParseAddr(s); err == nil && a.Network == "tcp" {
			return a, nil
		}
	}
	return transport.Addr{}, errors.New("node has no tcp listener")
}

// node returns the member called name.
func (m *demoMesh) node(name string) *demoNode { return m.byName[name] }

// waitFullMesh waits until every node links every other.
func (m *demoMesh) waitFullMesh(ctx context.Context) error {
	return pollUntil(ctx, "a full mesh", func() bool {
		for _, d := range m.nodes {
			if len(d.n.Backend().PeerList()) < len(m.nodes)-1 {
				return false
			}
		}
		return true
	})
}

// close stops every node at once and waits for them.
func (m *demoMesh) close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(m.nodes))
	for i, d := range m.nodes {
		if d.n == nil {
			continue
		}
		wg.Go(func() {
			if d.ctl != nil {
				d.ctl.Close()
			}
			errs[i] = d.n.Close()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pollUntil checks cond every 20 ms until it holds or ctx ends.
func pollUntil(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// emptyDir reports whether dir is missing or empty.
func emptyDir(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return len(ents) == 0, err
}

// mailboxFiles returns the message files under home's mailbox, sorted.
func mailboxFiles(home string) []string {
	var out []string
	root := filepath.Join(home, "mailbox")
	filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !e.IsDir() && strings.HasSuffix(path, ".txt") && e.Name() != "index.txt" {
			out = append(out, path)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/chanadmin"
	"github.com/meshd/meshd/node/doctor"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/node/outbound"
	"github.com/meshd/meshd/node/ownpresence"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/rostergossip"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/mdns"
)

// The counters counted in this file.
var (
	famMDNSFailed = newFamily("meshd_mdns_start_failures_total", "Times mDNS discovery could not start.")
	famHsRejected = newFamily("meshd_handshakes_rejected_total", "Handshakes refused by admission, either direction, by reason.", "reason")

	cMdnsStartFailed            = newCounter("mdns.start_failed", famMDNSFailed)
	cHandshakeRejectedSelf      = newCounter("handshake.rejected.self", famHsRejected, "self")
	cHandshakeRejectedNotMember = newCounter("handshake.rejected.not_member", famHsRejected, "not_member")
)

// Node is a running meshd. Create it with [New]; stop it with [Node.Close].
type Node struct {
	cfg     Config
	log     *slog.Logger
	home    home.Home
	id      home.Identity
	metrics *Metrics

	roster *rostergossip.Keeper // the current roster, its updates, key rotations and name index (node/rostergossip)

	// peers is connection management: the peer table under the
	// peers mutex, the announced peer list, the slow, refused and pending
	// peers, the listeners, discovery and link settings, and the loops
	// that link (node/peers).
	peers *peers.Service

	store *history.Store
	// chans is channel administration: the channel set and
	// subscriptions, policies, their versions, the per-sender channel
	// quota and the block list (node/chanadmin).
	chans *chanadmin.Admin
	own   *ownpresence.Announcer // this node's presence, following its agent, and the presence table (node/ownpresence)
	q     *inboxq.Queries        // the inbox and history queries, wake-ups, event stream and workers' claims (node/inboxq)
	// rx is the receive side: the pipeline, its commit stage and queue,
	// and history sync, which it feeds and which feeds it (node/rx).
	rx     *rx.Pipeline
	mail   *mailbox.Box      // the mirror, its loop and the outbox (node/mailbox; mailboxhost.go)
	join   *join.Join        // invites this node made, knocks, adoption and the pending list (node/join)
	doctor *doctor.Diagnosis // what meshctl doctor reports (node/doctor)
	cards  *cards.Book       // members' agent cards (node/cards)
	attach *attachments      // blob store and transfers (attach*.go)

	life runState // its start, context, goroutines, home lock and Close (lifecycle.go)

	logRL rateLog // repetitive log lines, per peer and reason

	out *outbound.Sender // the send side: signing, fan-out, queues, acks, delivery (node/outbound)
}

// New starts a node: it locks the home, loads or creates the identity,
// loads (or bootstraps) the roster, opens listeners and discovery, and
// starts dialling seeds. Its local faces (the control socket, the status
// page, the metrics endpoint) are the caller's to serve, over
// [Node.Backend]: see node/control's Serve.
func New(cfg Config) (*Node, error) { return newNode(cfg, nil) }

// newNode is New with the tests' seams (nil: none), which it hands to
// the components they observe.
func newNode(cfg Config, hooks *testHooks) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n := &Node{
		cfg:     cfg.withDefaults(),
		log:     log,
		home:    home.Home{Dir: cfg.Home},
		metrics: newMetrics(),
	}
	n.life.started = time.Now()
	n.logRL = newRateLog()
	n.roster = newRosterKeeper(n)
	n.cards = newCards(n)
	n.life.ctx, n.life.cancel = context.WithCancel(context.Background())
	n.peers = newPeerService(n, hooks.legacy())
	n.join = newJoin(n)
	n.doctor = newDoctor(n)
	if err := n.setup(hooks); err != nil {
		n.life.cancel()
		n.teardown()
		if n.rx != nil {
			n.rx.Close()
		}
		n.closeState()
		if n.life.unlock != nil {
			n.life.unlock()
		}
		return nil, err
	}
	n.run()
	return n, nil
}

func (n *Node) setup(hooks *testHooks) error {
	var err error
	if err = os.MkdirAll(n.cfg.Home, 0o700); err != nil {
		return fmt.Errorf("create home: %w", err)
	}
	if n.life.unlock, err = n.home.Lock(); err != nil {
		return err
	}
	id, created, err := n.home.Init(n.cfg.Name)
	if err != nil {
		return err
	}
	if id, err = defaultName(n.home, id); err != nil {
		return err
	}
	n.id = id
	if created {
		n.log.Info("created identity", "key", id.Pub.String(), "fingerprint", id.Pub.Fingerprint())
	}
	r, newOrg, err := n.loadRoster()
	if err != nil {
		return err
	}
	n.roster.Init(r)
	if n.id, err = n.roster.AdoptPendingKey(n.id, r); err != nil {
		return err
	}
	n.peers.LoadFormer(n.home.Dir)
	n.warnNotMember(r)

	if err := n.openState(hooks); err != nil {
		return err
	}

	lc := n.cfg.Transport // the settings of every link, with our identity and hooks filled in
	lc.Identity = n.id.Key
	if lc.NoiseKey == nil {
		// One static key for the life of the process, on every link: peers
		// tell a restart (a new key) from a second link of the same process.
		if lc.NoiseKey, err = transport.NewStaticKey(); err != nil {
			return err
		}
	}
	lc.Org = r.Org
	lc.Admit = n.admit
	lc.Refused = n.peers.Refuse
	lc.AnswerKnocks = true
	lc.Payload = n.payload
	lc.Logger = n.log.With("component", "transport")
	n.peers.SetLinkConfig(lc)

	addrs := append([]transport.Addr(nil), n.cfg.Listen...)
	if !n.cfg.NoUnixListener {
		addrs = append(addrs, transport.Addr{Network: "unix", Address: n.home.LinkSocket()})
	}
	for _, a := range addrs {
		if a.Network == "unix" {
			// The home lock is ours, so a socket file left here is stale.
			if a.Address == n.home.LinkSocket() {
				_ = os.Remove(a.Address)
			}
		}
		ln, err := transport.Listen(n.life.ctx, a, lc)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", a, err)
		}
		n.peers.AddListener(ln)
		n.log.Info("listening", "addr", ln.Addr().String())
	}
	n.peers.SetAdvertised(peers.Advertise(n.peers.Listeners()))
	if err := n.saveNewOrg(r, newOrg); err != nil {
		return err
	}

	n.peers.AddSeeds(n.cfg.Seeds)

	if n.cfg.MDNS {
		port := 0
		var ips []net.IP
		for _, ln := range n.peers.Listeners() {
			a := ln.Addr()
			if a.Network != "tcp" {
				continue
			}
			ta, err := net.ResolveTCPAddr("tcp", a.Address)
			if err != nil {
				continue
			}
			port = ta.Port
			if ta.IP != nil && !ta.IP.IsUnspecified() && !ta.IP.IsLoopback() {
				ips = append(ips, ta.IP)
			}
			break
		}
		if port == 0 {
			n.log.Warn("mdns disabled: no tcp listener to advertise")
		} else {
			mc := mdns.DefaultConfig()
			mc.Key = n.id.Pub
			mc.Org = r.Org
			mc.RosterVersion = r.Version
			mc.Port = port
			mc.IPs = ips
			mc.Logger = n.log.With("component", "mdns")
			mc.AllOrgs = true // other orgs are counted for meshctl doctor, then ignored
			if n.cfg.MDNSInterface != "" {
				ifi, err := net.InterfaceByName(n.cfg.MDNSInterface)
				if err != nil {
					return fmt.Errorf("mdns interface %q: %w", n.cfg.MDNSInterface, err)
				}
				mc.Interface = ifi
			}
			d, err := mdns.New(mc)
			if err != nil {
				// Discovery is a convenience; seeds and peer exchange still work.
				n.log.Warn("mdns unavailable; relying on seeds and peer exchange", "err", err, "hint", doctor.MDNSHint)
				n.doctor.MDNSFailed(err)
				n.metrics.inc(cMdnsStartFailed)
			} else {
				n.peers.SetDiscovery(d)
			}
		}
	}
	return nil
}

// loadRoster picks the roster to start with: the one persisted in the
// home, possibly superseded by a newer valid --roster file; else the
// --roster file as a bootstrap; else a new one-node org (newOrg), not
// saved yet.
func (n *Node) loadRoster() (r *roster.Roster, newOrg bool, err error) {
	cur, err := n.home.LoadRoster()
	if errors.Is(err, home.ErrBadRoster) && n.cfg.RosterFile != "" {
		// A --roster that verifies replaces a damaged one, as if the home
		// had none (below).
		n.log.Warn("the home's roster is damaged; replacing it with --roster", "file", n.cfg.RosterFile, "err", err)
		cur, err = nil, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if n.cfg.RosterFile != "" {
		pinned, err := readRosterFile(n.cfg.RosterFile)
		if err != nil {
			return nil, false, err
		}
		switch {
		case cur == nil:
			if err := roster.CheckBootstrap(pinned); err != nil {
				return nil, false, fmt.Errorf("roster %s: %w", n.cfg.RosterFile, err)
			}
			if err := n.home.SaveRoster(pinned); err != nil {
				return nil, false, err
			}
			n.log.Info("pinned roster", "file", n.cfg.RosterFile, "org", pinned.Org, "version", pinned.Version, "saved", n.home.RosterPath())
			return pinned, false, nil
		case pinned.Version > cur.Version:
			if err := roster.CheckUpdate(cur, pinned); err != nil {
				return nil, false, fmt.Errorf("roster %s is not a valid update of %s: %w", n.cfg.RosterFile, n.home.RosterPath(), err)
			}
			if err := n.home.SaveRoster(pinned); err != nil {
				return nil, false, err
			}
			return pinned, false, nil
		case pinned.Org != cur.Org:
			return nil, false, fmt.Errorf("roster %s is for org %q but the home holds org %q", n.cfg.RosterFile, pinned.Org, cur.Org)
		}
	}
	if cur != nil {
		if err := roster.CheckBootstrap(cur); err != nil {
			// The persisted roster may be an update signed by admins of an
			// earlier version; it was checked when accepted. Only the
			// signatures themselves are rechecked here (by Parse).
			n.log.Debug("persisted roster is not self-signed; it was accepted as an update", "err", err)
		}
		return cur, false, nil
	}
	org := n.cfg.Org
	if org == "" {
		org = "org-" + n.id.Pub.Fingerprint()
	}
	if r, err = roster.New(org, n.id.Key, n.id.Name); err != nil {
		return nil, false, err
	}
	// Saved by setup once the listeners are open: a start that fails (a
	// port in use) leaves no org of its own behind to get in the way of
	// a later meshctl join.
	return r, true, nil
}

// saveNewOrg persists the one-node org loadRoster made, if it made one.
func (n *Node) saveNewOrg(r *roster.Roster, newOrg bool) error {
	if !newOrg {
		return nil
	}
	if err := n.home.SaveRoster(r); err != nil {
		return err
	}
	n.log.Info("no roster found: started a one-node org with this node as admin",
		"org", r.Org, "roster", n.home.RosterPath())
	return nil
}

func readRosterFile(path string) (*roster.Roster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read roster: %w", err)
	}
	r, err := roster.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("roster %s: %w", path, err)
	}
	return r, nil
}

func (n *Node) run() {
	n.peers.Start()
	n.life.wg.Go(func() { n.own.Run(n.life.ctx) })
	n.rx.Start(n.life.wg.Go)
	mailboxHost{n}.start()
	n.life.wg.Add(1)
	go n.retentionLoop()
	n.life.wg.Go(func() { n.out.Run(n.life.ctx) })
	n.life.wg.Go(func() { n.cards.Run(n.life.ctx) })
	n.life.wg.Go(func() { n.roster.Run(n.life.ctx) })
	n.attach.start()
}

// Close shuts the node down: it says goodbye to every peer, stops
// discovery and listeners, waits for every goroutine, and releases the
// home lock. It is idempotent. Close the servers of its local faces
// first.
func (n *Node) Close() error {
	n.life.closeOnce.Do(func() {
		n.peers.Lock()
		n.peers.Closed = true
		links := n.peers.LinksLocked()
		n.peers.Unlock()
		n.own.AnnounceOffline(links)
		for _, pl := range links {
			pl.SayGoodbye("shutting down")
		}
		n.life.cancel()
		n.life.closeErr = n.teardown()
		if n.rx != nil {
			n.rx.Close()
		}
		n.attach.close()
		n.life.wg.Wait()
		if err := n.closeState(); err != nil && n.life.closeErr == nil {
			n.life.closeErr = err
		}
		if n.life.unlock != nil {
			if err := n.life.unlock(); err != nil && n.life.closeErr == nil {
				n.life.closeErr = err
			}
		}
	})
	return n.life.closeErr
}

// teardown closes what setup opened; safe on a partly set-up node.
func (n *Node) teardown() error {
	var errs []error
	errs = append(errs, n.peers.CloseListeners())
	for _, pl := range n.peers.Links() {
		_ = pl.Conn.Close()
	}
	return errors.Join(errs...)
}

// Identity returns this node's public key.
func (n *Node) Identity() proto.PubKey { return n.id.Pub }

// Roster returns the current roster.
func (n *Node) Roster() *roster.Roster { return n.roster.Current() }

// ControlSocket returns the path of the control socket.
func (n *Node) ControlSocket() string { return n.home.ControlSocket() }

// ListenAddrs returns the bound listen addresses.
func (n *Node) ListenAddrs() []string {
	lns := n.peers.Listeners()
	out := make([]string, 0, len(lns))
	for _, ln := range lns {
		out = append(out, ln.Addr().String())
	}
	return out
}

// admit is the transport's admission hook: only current roster members
// may hold a link.
func (n *Node) admit(p *proto.HandshakePayload) error {
	r := n.Roster()
	if p.Identity.Equal(n.id.Pub) {
		n.metrics.inc(cHandshakeRejectedSelf)
		return errors.New("peer is this node itself")
	}
	if p.Knock {
		return n.join.Answer(p)
	}
	if _, ok := r.Member(p.Identity); !ok {
		if p.Invite != nil {
			return n.join.Admit(p)
		}
		n.join.RefusedNonMember(p)
		n.metrics.inc(cHandshakeRejectedNotMember)
		err := fmt.Errorf("%s is not a member of roster %q v%d", p.Identity.Fingerprint(), r.Org, r.Version)
		if n.peers.Former.Has(p.Identity) {
			return &peers.FormerMemberError{Key: p.Identity, Err: err}
		}
		return err
	}
	return nil
}

// payload supplies our handshake fields at handshake time.
func (n *Node) payload() proto.HandshakePayload {
	select {
	case <-n.peers.AdvertisedSet():
	case <-n.life.ctx.Done(): // setup failed (after any write) or the node closes
	}
	return proto.HandshakePayload{
		RosterVersion: n.Roster().Version,
		Listen:        slices.Clone(n.peers.Advertised()),
		Name:          n.id.Name,
	}
}

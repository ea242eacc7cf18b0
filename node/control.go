package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// controlServer serves the control API on the home's Unix socket.
type controlServer struct {
	n    *Node
	ln   net.Listener
	srv  *http.Server
	mux  *http.ServeMux
	once sync.Once
	done chan struct{}
}

func startControl(n *Node) (*controlServer, error) {
	path := n.home.ControlSocket()
	// We hold the home lock, so any socket file here is stale.
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	c := &controlServer{n: n, ln: ln, mux: http.NewServeMux(), done: make(chan struct{})}
	// Clients keep connections between requests (api.Client); one left
	// idle is closed after IdleTimeout.
	c.srv = &http.Server{Handler: c.mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	c.mux.HandleFunc("GET /v1/status", c.status)
	c.mux.HandleFunc("GET /v1/peers", c.peers)
	c.mux.HandleFunc("GET /v1/roster", c.getRoster)
	c.mux.HandleFunc("POST /v1/roster", c.postRoster)
	c.registerMessagePlane()
	c.registerHistory()
	return c, nil
}

// Handle registers an extra control endpoint (used by later layers).
func (c *controlServer) Handle(pattern string, h http.HandlerFunc) { c.mux.HandleFunc(pattern, h) }

func (c *controlServer) start() {
	c.n.wg.Add(1)
	go func() {
		defer c.n.wg.Done()
		defer close(c.done)
		if err := c.srv.Serve(c.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.n.log.Error("control socket", "err", err)
		}
	}()
}

func (c *controlServer) close() error {
	var err error
	c.once.Do(func() {
		err = c.srv.Close()
		_ = c.ln.Close()
		_ = os.Remove(c.n.home.ControlSocket())
	})
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error, hint string) {
	writeJSON(w, code, api.Error{Error: err.Error(), Hint: hint})
}

func (c *controlServer) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.n.StatusInfo())
}

// Counters returns the node's counters plus the listeners' handshake
// tallies ("handshake.accepted", "handshake.failed").
func (n *Node) Counters() map[string]uint64 {
	c := n.metrics.Snapshot()
	for _, ln := range n.listeners {
		st := ln.Stats()
		if st.Accepted > 0 {
			c["handshake.accepted"] += st.Accepted
		}
		if st.Failed > 0 {
			c["handshake.failed"] += st.Failed
		}
	}
	if n.outbox != nil {
		st := n.outbox.Stats()
		for k, v := range map[string]uint64{"outbox.picked": st.Picked, "outbox.recovered": st.Recovered,
			"outbox.files_sent": st.Sent, "outbox.files_failed": st.Failed, "outbox.malformed": st.Malformed} {
			if v > 0 {
				c[k] = v
			}
		}
		for r, v := range st.FailedByReason {
			c["outbox.failed."+r] = v
		}
	}
	return c
}

// PeerList returns the linked peers, sorted by name then key.
func (n *Node) PeerList() []api.Peer {
	r := n.Roster()
	links := n.linkList()
	out := make([]api.Peer, 0, len(links))
	for _, pl := range links {
		role := "none"
		if m, ok := r.Member(pl.key); ok {
			role = m.Role.String()
		}
		name := pl.payload.Name
		if m, ok := r.Member(pl.key); ok && m.Name != "" {
			name = m.Name
		}
		dir := "inbound"
		if pl.link.Outbound() {
			dir = "outbound"
		}
		est := pl.link.Established()
		out = append(out, api.Peer{
			Key:            pl.key,
			Fingerprint:    pl.key.Fingerprint(),
			Name:           name,
			Role:           role,
			Address:        pl.link.RemoteAddr(),
			Network:        pl.link.Network(),
			Direction:      dir,
			Established:    est.UTC(),
			LinkAgeSeconds: time.Since(est).Seconds(),
			LastSeen:       pl.link.LastRecv().UTC(),
			RosterVersion:  pl.payload.RosterVersion,
			Listen:         pl.payload.Listen,
		})
	}
	slices.SortFunc(out, func(a, b api.Peer) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	return out
}

func (c *controlServer) peers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Peers{Peers: c.n.PeerList()})
}

// RosterSummary renders r for the API.
func RosterSummary(r *roster.Roster) api.Roster {
	out := api.Roster{
		Org:       r.Org,
		Version:   r.Version,
		Timestamp: time.UnixMilli(r.Timestamp).UTC(),
		Quorum:    int(r.Quorum()),
		Members:   []api.Member{},
		Signers:   []proto.PubKey{},
	}
	for _, m := range r.Members {
		out.Members = append(out.Members, api.Member{Key: m.Key, Fingerprint: m.Key.Fingerprint(),
			Name: m.Name, Role: m.Role.String(), Archive: m.Archive})
	}
	for _, s := range r.Doc.Sigs {
		out.Signers = append(out.Signers, s.Signer)
	}
	return out
}

func (c *controlServer) getRoster(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, RosterSummary(c.n.Roster()))
}

func (c *controlServer) postRoster(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, proto.MaxDocSize+1))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("read roster: %w", err), "")
		return
	}
	if len(body) > proto.MaxDocSize {
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Errorf("roster larger than %d bytes", proto.MaxDocSize), "")
		return
	}
	r, err := c.n.PublishRoster(body)
	if err != nil {
		hint := ""
		switch {
		case errors.Is(err, roster.ErrRollback):
			hint = "bump the version: edit the current roster with meshctl roster add/remove/role"
		case errors.Is(err, roster.ErrTooFewSignatures):
			hint = "collect more admin signatures with meshctl roster sign FILE"
		}
		writeErr(w, http.StatusConflict, err, hint)
		return
	}
	writeJSON(w, http.StatusOK, RosterSummary(r))
}

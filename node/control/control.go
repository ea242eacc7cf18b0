// Package control serves meshd's control API: HTTP with JSON bodies on
// the home's Unix socket, the API meshctl and the MCP server speak (the
// wire types are in node/api). It is the front end only: every endpoint
// parses its request, calls one [Backend] method with plain arguments and
// writes the answer. A refusal from the backend carries its HTTP status
// and hint (an error with HTTPStatus and OperatorHint methods, such as
// node/apierr's Error); any other error answers 500.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Backend is what the control API serves: the node and its components
// (node.Backend).
type Backend interface {
	StatusInfo() api.Status
	PeerList() []api.Peer
	Roster() *roster.Roster
	// PublishRoster applies a signed roster document handed in by the
	// operator.
	PublishRoster(doc []byte) (*roster.Roster, error)

	ChannelList() []api.Channel
	Channel(name string) (api.Channel, error)
	NewChannel(req api.CreateChannel) (api.Channel, error)
	UpdateChannel(name string, req api.UpdateChannel) (api.Channel, error)
	DeleteChannel(name string) (api.Channel, error)
	// DraftChannel signs an edit without applying it; PublishChannel
	// applies and spreads a co-signed one.
	DraftChannel(name string, req api.UpdateChannel, del bool) (api.PolicyDraft, error)
	PublishChannel(doc []byte) (api.Channel, error)
	// Blocks and SetBlock read and change the local block list.
	Blocks() api.Blocks
	SetBlock(member string, on bool) (api.Block, error)
	SetSubscription(name, state string) (*api.Channel, error)

	Send(req api.Send) (*api.Sent, error)
	Request(req api.Request) (*api.Sent, error)
	Respond(req api.Respond) (*api.Sent, error)
	// Fetch fetches an inbox item's attachments and waits until they are
	// verified and present, or ctx ends.
	Fetch(ctx context.Context, req api.Fetch) (*api.Fetched, error)
	// Sent lists what the node sent, newest first, with its delivery
	// state; DeliveryStatus is one sent envelope's state per recipient.
	Sent(q api.SentQuery) (*api.SentList, error)
	DeliveryStatus(id uuid.UUID) (*api.Delivery, error)

	// InboxPage lists one page of inbox items (see api.InboxQuery); with
	// q.Wait it blocks, up to q.Timeout or until ctx ends, until an
	// unread waking item exists.
	InboxPage(ctx context.Context, q api.InboxQuery) (*api.Inbox, error)
	// MarkRead marks the inbox item id read; from names its sender when
	// several senders' items share the id.
	MarkRead(id uuid.UUID, from string) (api.Item, error)
	// SubscribeEvents returns the inbox items delivered from now on,
	// unrendered (the reader renders each with Item, on its goroutine),
	// lagged (which reports, and resets, whether items were lost since
	// its last call) and cancel, which ends the subscription.
	SubscribeEvents() (items <-chan api.Delivered, lagged func() bool, cancel func())

	PresenceTable() api.Presence
	// SetPresence overrides our presence for a while (state "auto" ends
	// the override).
	SetPresence(req api.SetPresence) (api.Presence, error)
	// ClientSeen records any request of a local client, and
	// ClientWaiting one that waits on the inbox until end is called:
	// our presence follows them (docs/AGENTS.md "Presence").
	ClientSeen()
	ClientWaiting() (end func())
	// PostSubagentResult puts a subagent's result in our own inbox.
	PostSubagentResult(req api.SubagentResult) (api.Item, error)

	History(channel string, since time.Time, limit int) (*api.History, error)
	Sequence() api.Sequence

	JoinBackend
	CardBackend
	AgentBackend

	// Done is closed when the backend shuts down; event streams end.
	Done() <-chan struct{}
}

// Server serves the control API on a Unix socket.
type Server struct {
	b    Backend
	log  *slog.Logger
	path string
	ln   net.Listener
	srv  *http.Server

	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // the serve goroutine
}

// Listen creates the control socket at path, readable and writable by the
// owner only, replacing a stale socket file (the caller holds the home
// lock, so any file there is stale). [Server.Start] serves it.
func Listen(path string, b Backend, log *slog.Logger) (*Server, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := &Server{b: b, log: log, path: path, ln: ln}
	// Clients keep connections between requests (api.Client); one left
	// idle is closed after IdleTimeout.
	s.srv = &http.Server{Handler: s.seen(s.routes()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return s, nil
}

// Serve creates the control socket at path and serves it ([Listen], then
// [Server.Start]). meshd calls it once its node is up, before it reports
// ready; [Server.Close] stops it, before the node closes.
func Serve(path string, b Backend, log *slog.Logger) (*Server, error) {
	s, err := Listen(path, b, log)
	if err != nil {
		return nil, err
	}
	s.Start()
	return s, nil
}

// seen tells the backend of every request: a local client is there.
func (s *Server) seen(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.b.ClientSeen()
		h.ServeHTTP(w, req)
	})
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.status)
	mux.HandleFunc("GET /v1/peers", s.peers)
	mux.HandleFunc("GET /v1/roster", s.getRoster)
	mux.HandleFunc("POST /v1/roster", s.postRoster)

	mux.HandleFunc("GET /v1/channels", s.listChannels)
	mux.HandleFunc("GET /v1/channels/{name}", s.showChannel)
	mux.HandleFunc("POST /v1/channels", s.createChannel)
	mux.HandleFunc("POST /v1/channels/{name}/policy", s.updateChannel)
	mux.HandleFunc("POST /v1/channels/{name}/delete", s.deleteChannel)
	mux.HandleFunc("POST /v1/channels/{name}/draft", s.draftChannel)
	mux.HandleFunc("POST /v1/channels/publish", s.publishChannel)
	mux.HandleFunc("POST /v1/subscriptions", s.subscribe)
	mux.HandleFunc("GET /v1/blocks", s.listBlocks)
	mux.HandleFunc("POST /v1/blocks", s.block)
	mux.HandleFunc("DELETE /v1/blocks/{member}", s.unblock)
	mux.HandleFunc("POST /v1/send", s.send)
	mux.HandleFunc("POST /v1/request", s.request)
	mux.HandleFunc("POST /v1/respond", s.respond)
	mux.HandleFunc("POST /v1/fetch", s.fetch)
	mux.HandleFunc("GET /v1/sent", s.getSent)
	mux.HandleFunc("GET /v1/sent/{id}", s.getDelivery)
	mux.HandleFunc("GET /v1/inbox", s.getInbox)
	mux.HandleFunc("POST /v1/inbox/{id}/read", s.markRead)
	s.agentRoutes(mux)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/presence", s.getPresence)
	mux.HandleFunc("POST /v1/presence", s.setPresence)
	mux.HandleFunc("POST /v1/subagent-results", s.postSubagentResult)

	mux.HandleFunc("GET /v1/history", s.getHistory)
	mux.HandleFunc("GET /v1/sequence", s.getSequence)
	s.joinRoutes(mux)
	s.cardRoutes(mux)
	return mux
}

// Start serves the socket in a goroutine that [Server.Close] waits for.
func (s *Server) Start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("control socket", "err", err)
		}
	}()
}

// Close closes the socket and every connection, removes the socket file
// and waits for the serve goroutine. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.srv.Close()
		_ = s.ln.Close()
		_ = os.Remove(s.path)
		s.wg.Wait()
	})
	return s.closeErr
}

// maxBody bounds a JSON request.
const maxBody = 2 * proto.MaxBodySize

// writeJSON answers with v as compact JSON, one document and a newline.
// The API's clients are programs (meshctl indents what it prints), and
// indenting them took half the daemon's CPU in a test that lists a 70 MB
// inbox three times (cmd/meshd TestLargeInboxListsFully).
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error, hint string) {
	writeJSON(w, code, api.Error{Error: err.Error(), Hint: hint})
}

// writeRefusal answers a backend error: with the status and hint it
// carries, or 500.
func writeRefusal(w http.ResponseWriter, err error) {
	code, hint := http.StatusInternalServerError, ""
	var st interface{ HTTPStatus() int }
	if errors.As(err, &st) {
		code = st.HTTPStatus()
	}
	var h interface{ OperatorHint() string }
	if errors.As(err, &h) {
		hint = h.OperatorHint()
	}
	writeErr(w, code, err, hint)
}

// readJSON decodes a bounded JSON body strictly.
func readJSON(w http.ResponseWriter, req *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(req.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("bad request body: %w", err), "")
		return false
	}
	return true
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.StatusInfo())
}

func (s *Server) peers(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Peers{Peers: s.b.PeerList()})
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

func (s *Server) getRoster(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, RosterSummary(s.b.Roster()))
}

func (s *Server) postRoster(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, proto.MaxDocSize+1))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("read roster: %w", err), "")
		return
	}
	if len(body) > proto.MaxDocSize {
		writeErr(w, http.StatusRequestEntityTooLarge, fmt.Errorf("roster larger than %d bytes", proto.MaxDocSize), "")
		return
	}
	r, err := s.b.PublishRoster(body)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, RosterSummary(r))
}

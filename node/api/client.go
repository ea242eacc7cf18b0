package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// ErrNoDaemon reports that no meshd answers on the control socket.
var ErrNoDaemon = errors.New("meshd is not running")

// Client talks to a meshd over its control socket.
type Client struct {
	Socket string
	hc     *http.Client
}

// NewClient returns a client for the control socket at path.
func NewClient(path string) *Client {
	return &Client{
		Socket: path,
		hc: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			// Connections are kept for the next request: a client that
			// makes many (meshctl mcp, meshctl bench) would otherwise
			// dial one per request, and the publisher of a bench at
			// 1,000 sends/s accepted a connection per send. meshd closes
			// a connection idle for 2 minutes; the client closes its own
			// first.
			MaxIdleConnsPerHost: maxIdleConns,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
}

// maxIdleConns bounds the idle connections a Client keeps: as many as
// requests it had in flight at once, up to this.
const maxIdleConns = 256

// RemoteError is an error answer from meshd.
type RemoteError struct {
	Status int
	Msg    string
	Hint   string
}

func (e *RemoteError) Error() string { return e.Msg }

// Do sends a request and decodes a JSON answer into out (if non-nil).
func (c *Client) Do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://meshd"+path, rd)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if _, serr := os.Stat(c.Socket); serr != nil || isRefused(err) {
			return fmt.Errorf("%w (no control socket at %s)", ErrNoDaemon, c.Socket)
		}
		return fmt.Errorf("control socket %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("meshd answered %s", resp.Status)
		}
		return &RemoteError{Status: resp.StatusCode, Msg: e.Error, Hint: e.Hint}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Get is Do with GET.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.Do(ctx, http.MethodGet, path, "", nil, out)
}

// Status calls GET /v1/status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.Get(ctx, "/v1/status", &s)
}

// Peers calls GET /v1/peers.
func (c *Client) Peers(ctx context.Context) (*Peers, error) {
	var p Peers
	return &p, c.Get(ctx, "/v1/peers", &p)
}

// PublishRoster calls POST /v1/roster with a signed roster.
func (c *Client) PublishRoster(ctx context.Context, doc []byte) (*Roster, error) {
	var r Roster
	return &r, c.Do(ctx, http.MethodPost, "/v1/roster", "application/cbor", doc, &r)
}

// DefaultTimeout bounds one control call that does not wait for events.
const DefaultTimeout = 10 * time.Second

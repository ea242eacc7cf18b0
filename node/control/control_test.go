package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// refusal is a backend error that carries its status and hint, as
// node.Error does.
type refusal struct {
	status int
	hint   string
	err    error
}

func (r *refusal) Error() string        { return r.err.Error() }
func (r *refusal) Unwrap() error        { return r.err }
func (r *refusal) HTTPStatus() int      { return r.status }
func (r *refusal) OperatorHint() string { return r.hint }

// fakeBackend answers Send with err and Done with done; the other
// methods are not called by these tests.
type fakeBackend struct {
	Backend
	err  error
	done chan struct{}
}

func (f *fakeBackend) ClientSeen()                 {}
func (f *fakeBackend) ClientWaiting() (end func()) { return func() {} }

func (f *fakeBackend) Send(api.Send) (*api.Sent, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &api.Sent{ID: "x"}, nil
}

func (f *fakeBackend) Done() <-chan struct{} { return f.done }

func serve(t *testing.T, b Backend) *api.Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.sock")
	s, err := Listen(path, b, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := s.Close(); err != nil { // idempotent
			t.Errorf("second close: %v", err)
		}
	})
	return api.NewClient(path)
}

func TestRefusalsCarryStatusAndHint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		wantStatus int
		wantMsg    string
		wantHint   string
	}{
		{"typed", &refusal{http.StatusNotFound, "list channels with: meshctl channel list", errors.New(`channel "x": no such channel`)},
			http.StatusNotFound, `channel "x": no such channel`, "list channels with: meshctl channel list"},
		{"wrapped typed", fmt.Errorf("send: %w", &refusal{http.StatusForbidden, "", errors.New("role too low")}),
			http.StatusForbidden, "send: role too low", ""},
		{"untyped", errors.New("disk on fire"), http.StatusInternalServerError, "disk on fire", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := serve(t, &fakeBackend{err: tc.err, done: make(chan struct{})})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := cl.Send(ctx, api.Send{To: "#x", Body: "hi"})
			var re *api.RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("Send = %v, want a RemoteError", err)
			}
			if re.Status != tc.wantStatus || re.Msg != tc.wantMsg || re.Hint != tc.wantHint {
				t.Fatalf("got %d %q hint %q, want %d %q hint %q", re.Status, re.Msg, re.Hint, tc.wantStatus, tc.wantMsg, tc.wantHint)
			}
		})
	}
}

func TestBadBodyIsRefusedBeforeTheBackend(t *testing.T) {
	cl := serve(t, &fakeBackend{err: errors.New("backend must not be called"), done: make(chan struct{})})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := cl.Do(ctx, http.MethodPost, "/v1/send", "application/json", []byte(`{"to":"#x","bogus":1}`), nil)
	var re *api.RemoteError
	if !errors.As(err, &re) || re.Status != http.StatusBadRequest {
		t.Fatalf("unknown field: %v, want 400", err)
	}
}

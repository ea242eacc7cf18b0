package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// controlAPIDoc is the OpenAPI document of the control socket, relative to
// the module root.
const controlAPIDoc = "docs/control-api.yaml"

func init() {
	// POST /v1/roster takes the roster's CBOR bytes; the validator only
	// needs to know the body is opaque.
	openapi3filter.RegisterBodyDecoder("application/cbor", openapi3filter.FileBodyDecoder)
}

// reqCheck says what the document must make of a request.
type reqCheck int

const (
	reqValid   reqCheck = iota // the document accepts it
	reqInvalid                 // the document refuses it, as meshd does
)

// apiChecker sends requests to a meshd's control socket and validates
// each request and answer against docs/control-api.yaml.
type apiChecker struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	// seen records, per operation id, the statuses meshd answered.
	seen map[string]map[int]bool
	// clients holds one HTTP client per control socket.
	clients map[string]*http.Client
}

func loadControlAPI(t *testing.T) *apiChecker {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(root, controlAPIDoc))
	if err != nil {
		t.Fatalf("%s: %v", controlAPIDoc, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", controlAPIDoc, err)
	}
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := &apiChecker{t: t, doc: doc, router: r, seen: map[string]map[int]bool{}, clients: map[string]*http.Client{}}
	t.Cleanup(func() {
		for _, hc := range c.clients {
			hc.CloseIdleConnections()
		}
	})
	return c
}

// client returns the HTTP client for the control socket of home.
func (c *apiChecker) client(home string) *http.Client {
	sock := filepath.Join(home, "meshd.sock")
	if c.clients[sock] == nil {
		c.clients[sock] = unixHTTP(sock)
	}
	return c.clients[sock]
}

// unixHTTP is an HTTP client for a control socket.
func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// route finds the documented operation of req, failing the test when the
// document has none.
func (c *apiChecker) route(req *http.Request) (*routers.Route, map[string]string) {
	c.t.Helper()
	rt, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s %s is not in %s: %v", req.Method, req.URL.Path, controlAPIDoc, err)
	}
	return rt, params
}

// call sends one request to the node at home and validates it and the
// answer. It returns the status and the body.
func (c *apiChecker) call(home string, check reqCheck, method, target, ctype string, body []byte) (int, []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://meshd"+target, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rt, params := c.route(req)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: rt,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	verr := openapi3filter.ValidateRequest(ctx, in)
	switch {
	case check == reqValid && verr != nil:
		c.t.Fatalf("%s %s: the document refuses a request meshd should take: %v\nbody: %s", method, target, verr, body)
	case check == reqInvalid && verr == nil:
		c.t.Fatalf("%s %s: the document accepts a request meshd refuses\nbody: %s", method, target, body)
	}
	// Validation read the body; send it again.
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := c.client(home).Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read answer: %v", method, target, err)
	}
	c.checkAnswer(in, resp, data)
	return resp.StatusCode, data
}

// checkAnswer validates an answer (status, headers and, unless it is a
// stream, the body) against the operation's responses.
func (c *apiChecker) checkAnswer(in *openapi3filter.RequestValidationInput, resp *http.Response, data []byte) {
	c.t.Helper()
	op := in.Route.Operation.OperationID
	if c.seen[op] == nil {
		c.seen[op] = map[int]bool{}
	}
	c.seen[op][resp.StatusCode] = true
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: data == nil},
	}
	out.SetBodyBytes(data)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Fatalf("%s %s answered %d, which %s does not allow: %v\nbody: %s",
			in.Request.Method, in.Request.URL, resp.StatusCode, controlAPIDoc, err, data)
	}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Hint string }
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			c.t.Fatalf("%s %s: error answer without an error text: %s", in.Request.Method, in.Request.URL, data)
		}
	}
}

// json sends a JSON body (nil: none) and decodes a 2xx answer into out.
func (c *apiChecker) json(home, method, target string, in any, want int, out any) []byte {
	c.t.Helper()
	var body []byte
	ctype := ""
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			c.t.Fatal(err)
		}
		ctype = "application/json"
	}
	code, data := c.call(home, reqValid, method, target, ctype, body)
	if code != want {
		c.t.Fatalf("%s %s %s: status %d, want %d: %s", method, target, body, code, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, target, err, data)
		}
	}
	return data
}

// refused sends a request that meshd must refuse with status want and a
// hint (when wantHint), and returns the error text.
func (c *apiChecker) refused(home string, check reqCheck, method, target, ctype string, body []byte, want int, wantHint bool) string {
	c.t.Helper()
	code, data := c.call(home, check, method, target, ctype, body)
	var e struct{ Error, Hint string }
	if err := json.Unmarshal(data, &e); err != nil || code != want {
		c.t.Fatalf("%s %s %s: status %d, want %d: %s", method, target, body, code, want, data)
	}
	if wantHint && e.Hint == "" {
		c.t.Fatalf("%s %s: error %q without a hint", method, target, e.Error)
	}
	return e.Error
}

// eventReader reads a GET /v1/events stream, validating each event
// against the document.
type eventReader struct {
	c      *apiChecker
	lines  chan string // the stream's lines; closed when it ends
	cancel context.CancelFunc
	body   io.Closer
	done   chan struct{} // closed when the line reader has returned
	err    error         // why the stream ended; read after done
}

func (c *apiChecker) openEvents(home string) *eventReader {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://meshd/v1/events", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	rt, params := c.route(req)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: rt}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.client(home).Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	c.checkAnswer(in, resp, nil) // the body never ends: its events are checked one by one
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		c.t.Fatalf("GET /v1/events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	// The greeting comment comes first: the reader is registered.
	if !sc.Scan() || sc.Text() != ": meshd inbox events" {
		c.t.Fatalf("GET /v1/events: first line %q, want the greeting comment", sc.Text())
	}
	r := &eventReader{c: c, lines: make(chan string), cancel: cancel, body: resp.Body, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer close(r.lines)
		for sc.Scan() {
			select {
			case r.lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		r.err = sc.Err()
	}()
	return r
}

// close ends the stream and waits for its line reader.
func (r *eventReader) close() {
	r.cancel()
	r.body.Close()
	<-r.done
}

// next returns the next event's type and data, checking the data against
// the schema the document names for that type (x-event-types).
func (r *eventReader) next() (string, map[string]any) {
	r.c.t.Helper()
	typ, data, ok := r.nextWithin(30 * time.Second)
	if !ok {
		r.c.t.Fatal("event stream: no event within 30s")
	}
	return typ, data
}

// nextWithin is next, reporting false when no line arrives within quiet.
func (r *eventReader) nextWithin(quiet time.Duration) (string, map[string]any, bool) {
	t := r.c.t
	t.Helper()
	types, _ := r.c.doc.Paths.Value("/v1/events").Get.Extensions["x-event-types"].(map[string]any)
	typ, data := "", ""
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for {
		var line string
		select {
		case l, ok := <-r.lines:
			if !ok {
				<-r.done
				t.Fatalf("event stream ended: %v", r.err)
			}
			line = l
		case <-timer.C:
			return "", nil, false
		}
		switch {
		case strings.HasPrefix(line, ":"):
			continue
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if data != "" {
				t.Fatalf("event %q with two data lines: meshd writes one", typ)
			}
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
			if typ == "" && data == "" {
				continue // the end of a comment block
			}
			if typ == "" {
				t.Fatalf("event without a type, data %q", data)
			}
			ref, ok := types[typ].(map[string]any)
			if !ok {
				t.Fatalf("event type %q is not in %s x-event-types", typ, controlAPIDoc)
			}
			name := strings.TrimPrefix(fmt.Sprint(ref["$ref"]), "#/components/schemas/")
			schema := r.c.doc.Components.Schemas[name]
			if schema == nil {
				t.Fatalf("x-event-types names %q, which is not a schema", ref["$ref"])
			}
			var v any
			if err := json.Unmarshal([]byte(data), &v); err != nil {
				t.Fatalf("event %s: data is not JSON: %v: %s", typ, err, data)
			}
			if err := schema.Value.VisitJSON(v, openapi3.VisitAsResponse()); err != nil {
				t.Fatalf("event %s does not match schema %s: %v\n%s", typ, name, err, data)
			}
			m, _ := v.(map[string]any)
			return typ, m, true
		default:
			t.Fatalf("event stream: unexpected line %q", line)
		}
	}
}

// routePattern matches a method and path in an http.ServeMux pattern.
var routePattern = regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE) (/v1/\S*)$`)

// eventPattern matches the event type in a server-sent event being written.
var eventPattern = regexp.MustCompile(`^event: ([a-z_-]+)\n`)

// controlSource lists, from the string literals of the source under node/
// (the status page's own server aside), the control API routes the node
// registers (ServeMux patterns such as "GET /v1/status") and the event
// types /v1/events writes.
func controlSource(t *testing.T) (routes, events []string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(filepath.Join(root, "node"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "statuspage" {
			return filepath.SkipDir // another server, on its own address
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if routePattern.MatchString(s) {
				routes = append(routes, strings.ReplaceAll(s, "...}", "}"))
			}
			if m := eventPattern.FindStringSubmatch(s); m != nil {
				events = append(events, m[1])
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(routes)
	slices.Sort(events)
	return slices.Compact(routes), slices.Compact(events)
}

// documentedRoutes lists "METHOD /path" for every operation in the document.
func (c *apiChecker) documentedRoutes() map[string]*openapi3.Operation {
	out := map[string]*openapi3.Operation{}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			out[method+" "+path] = op
		}
	}
	return out
}

// TestControlAPIDocumentCoversRoutes: every route meshd registers on its
// control socket is in docs/control-api.yaml, and every documented one is
// registered; so are the event types of /v1/events.
func TestControlAPIDocumentCoversRoutes(t *testing.T) {
	testpar.Parallel(t)
	c := loadControlAPI(t)
	src, events := controlSource(t)
	if len(src) < 18 {
		t.Fatalf("found only %d control routes in node/ (%v): did the handlers move?", len(src), src)
	}
	types, _ := c.doc.Paths.Value("/v1/events").Get.Extensions["x-event-types"].(map[string]any)
	if len(events) == 0 || len(types) != len(events) {
		t.Errorf("/v1/events writes event types %v; %s x-event-types documents %d", events, controlAPIDoc, len(types))
	}
	for _, e := range events {
		if types[e] == nil {
			t.Errorf("/v1/events writes \"event: %s\", which %s x-event-types lacks", e, controlAPIDoc)
		}
	}
	doc := c.documentedRoutes()
	for _, r := range src {
		if doc[r] == nil {
			t.Errorf("meshd registers %q, which %s lacks", r, controlAPIDoc)
		}
	}
	for r, op := range doc {
		if !slices.Contains(src, r) {
			t.Errorf("%s documents %q, which meshd does not register", controlAPIDoc, r)
		}
		if op.OperationID == "" || op.Summary == "" {
			t.Errorf("%s: %q needs an operationId and a summary", controlAPIDoc, r)
		}
		if op.Responses.Status(http.StatusOK) == nil {
			t.Errorf("%s: %q documents no 200 answer", controlAPIDoc, r)
		}
	}
}

// notExercised lists the documented answers TestControlAPILive cannot
// provoke, each with its reason. Every other documented status must be
// seen, so the document cannot promise answers meshd never gives.
var notExercised = map[string]string{
	"*/500":              "a local failure (the store, or meshd shutting down)",
	"markRead/409":       "needs two senders' items that share an id: TestReusedRequestIDAmbiguous drives it through meshctl read",
	"adopt/200":          "needs a fresh node and another org: TestKnockRogueLANCannotAdopt drives it through meshctl adopt",
	"reply/409":          "needs two senders' items that share an id, as markRead/409",
	"updateChannel/409":  "needs a roster quorum above 1: TestChannelEditQuorum drives it through meshctl channel set",
	"deleteChannel/409":  "needs a roster quorum above 1, as updateChannel/409",
	"publishChannel/409": "needs a roster quorum above 1: TestChannelEditQuorum drives it through meshctl channel publish",
	"fetch/413":          "needs a sender whose attachment_max_mib is above the fetcher's",
	"fetch/504":          "needs a fetch that outlasts the route's 10-minute wait",
}

// TestControlAPILive drives every control endpoint of two real meshd
// processes (alice admin, bob member) through their Unix sockets, and
// validates each request and answer against docs/control-api.yaml.
func TestControlAPILive(t *testing.T) {
	c := loadControlAPI(t)
	o := newHistOrg(t, "alice", "bob")
	alice, bob := o.homes["alice"], o.homes["bob"]
	const js = "application/json"

	// Bob follows his events from the start.
	ev := c.openEvents(bob)
	defer ev.close()

	// Node endpoints.
	var st struct {
		Name, Role string
		Links      int
	}
	c.json(alice, "GET", "/v1/status", nil, 200, &st)
	if st.Name != "alice" || st.Role != "admin" || st.Links != 1 {
		t.Fatalf("alice status: %+v", st)
	}
	var peers struct{ Peers []struct{ Name, Role string } }
	c.json(alice, "GET", "/v1/peers", nil, 200, &peers)
	if len(peers.Peers) != 1 || peers.Peers[0].Name != "bob" || peers.Peers[0].Role != "member" {
		t.Fatalf("alice peers: %+v", peers)
	}
	var ros struct{ Version uint64 }
	c.json(bob, "GET", "/v1/roster", nil, 200, &ros)

	// Channels: alice (admin) creates them; bob (member) may not.
	c.json(alice, "GET", "/v1/channels", nil, 200, nil)
	var ops struct {
		Name    string
		Writers []string
	}
	c.json(alice, "POST", "/v1/channels", map[string]any{"name": "ops", "writers": []string{"role:admin"}}, 200, &ops)
	if ops.Name != "ops" {
		t.Fatalf("created %+v", ops)
	}
	c.json(alice, "POST", "/v1/channels", map[string]any{"name": "secret", "readers": []string{"role:admin"}}, 200, nil)
	c.refused(alice, reqValid, "POST", "/v1/channels", js, []byte(`{"name":"ops"}`), 400, false)
	if msg := c.refused(bob, reqValid, "POST", "/v1/channels", js, []byte(`{"name":"bobs"}`), 403, false); !strings.Contains(msg, "role too low") {
		t.Fatalf("member creating a channel: %q", msg)
	}
	c.refused(alice, reqInvalid, "POST", "/v1/channels", js, []byte(`{"name":"x","colour":"red"}`), 400, false)
	c.json(alice, "GET", "/v1/channels/ops", nil, 200, nil)
	c.json(alice, "GET", "/v1/channels/%23ops", nil, 200, nil)
	c.refused(alice, reqValid, "GET", "/v1/channels/nope", "", nil, 404, true)

	// Policy edits and the tombstone: alice (admin) signs them; bob may not.
	var edited struct {
		Version  uint64
		Versions []struct{ Version uint64 }
	}
	c.json(alice, "POST", "/v1/channels/ops/policy", map[string]any{"allow_history_fetch": false, "retention_hours": 24}, 200, &edited)
	if edited.Version != 2 || len(edited.Versions) != 2 {
		t.Fatalf("edited ops: %+v", edited)
	}
	if msg := c.refused(alice, reqValid, "POST", "/v1/channels/ops/policy", js, []byte(`{"readers":[],"writers":[]}`), 400, false); !strings.Contains(msg, "channel delete") {
		t.Fatalf("emptying a channel: %q", msg)
	}
	c.refused(alice, reqInvalid, "POST", "/v1/channels/ops/policy", js, []byte(`{"colour":"red"}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/channels/ops/policy", js, []byte(`{"allow_history_fetch":true}`), 403, false)
	c.refused(alice, reqValid, "POST", "/v1/channels/nope/policy", js, []byte(`{}`), 404, true)
	c.json(alice, "POST", "/v1/channels", map[string]any{"name": "tmp"}, 200, nil)
	var deleted struct{ Deleted bool }
	c.json(alice, "POST", "/v1/channels/tmp/delete", nil, 200, &deleted)
	if !deleted.Deleted {
		t.Fatal("tmp not deleted")
	}
	c.refused(alice, reqValid, "POST", "/v1/channels/tmp/delete", "", nil, 400, false)
	c.refused(bob, reqValid, "POST", "/v1/channels/ops/delete", "", nil, 403, false)
	c.refused(alice, reqValid, "POST", "/v1/channels/nope/delete", "", nil, 404, true)

	// The block list.
	c.json(alice, "GET", "/v1/blocks", nil, 200, nil)
	var blocked struct{ Blocked bool }
	c.json(alice, "POST", "/v1/blocks", map[string]string{"member": "bob"}, 200, &blocked)
	if !blocked.Blocked {
		t.Fatal("bob not blocked")
	}
	c.refused(alice, reqValid, "POST", "/v1/blocks", js, []byte(`{"member":"bob"}`), 400, false)
	c.refused(alice, reqValid, "POST", "/v1/blocks", js, []byte(`{"member":"nobody"}`), 404, true)
	c.refused(alice, reqInvalid, "POST", "/v1/blocks", js, []byte(`{}`), 400, false)
	c.json(alice, "GET", "/v1/status", nil, 200, nil)
	c.json(alice, "DELETE", "/v1/blocks/bob", nil, 200, nil)
	c.refused(alice, reqValid, "DELETE", "/v1/blocks/bob", "", nil, 400, false)
	c.refused(alice, reqValid, "DELETE", "/v1/blocks/nobody", "", nil, 404, true)

	// Bob learns the channels from alice, then subscribes.
	o.waitChannel("bob", "ops")
	o.waitChannel("bob", "secret")
	var sub struct{ Subscription string }
	c.json(bob, "POST", "/v1/subscriptions", map[string]string{"channel": "#ops", "state": "subscribed"}, 200, &sub)
	if sub.Subscription != "subscribed" {
		t.Fatalf("subscription: %+v", sub)
	}
	c.refused(bob, reqValid, "POST", "/v1/subscriptions", js, []byte(`{"channel":"ops","state":"bogus"}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/subscriptions", js, []byte(`{"channel":"nope","state":"muted"}`), 404, true)
	c.refused(bob, reqValid, "POST", "/v1/subscriptions", js, []byte(`{"channel":"secret","state":"subscribed"}`), 403, false)

	// Send: a channel message, then the refusals.
	var sent struct {
		ID, To string
		SentTo []string `json:"sent_to"`
	}
	c.json(alice, "POST", "/v1/send", map[string]string{"to": "#ops", "body": "deploy finished"}, 200, &sent)
	if sent.To != "#ops" {
		t.Fatalf("sent: %+v", sent)
	}
	c.refused(alice, reqValid, "POST", "/v1/send", js, []byte(`{"to":"#nope","body":"x"}`), 404, true)
	c.refused(alice, reqInvalid, "POST", "/v1/send", js, []byte(`{"to":"#ops","body":`), 400, false)
	c.refused(alice, reqInvalid, "POST", "/v1/send", js, []byte(`{"to":"#ops","text":"x"}`), 400, false)
	if msg := c.refused(bob, reqValid, "POST", "/v1/send", js, []byte(`{"to":"#ops","body":"x"}`), 403, false); !strings.Contains(msg, "not a writer") {
		t.Fatalf("bob writing to #ops: %q", msg)
	}
	c.json(bob, "POST", "/v1/send", map[string]string{"to": "alice", "body": "hi alice"}, 200, nil)

	// The event stream carries alice's message to bob.
	typ, item := ev.next()
	if typ != "item" || item["id"] != sent.ID || item["body"] != "deploy finished" {
		t.Fatalf("event %s %v, want item %s", typ, item, sent.ID)
	}

	// Inbox: wait, read, mark read; and the refusals.
	var inbox struct {
		Items []struct {
			ID, Kind, Body string
			Read           bool
			RequestID      string `json:"request_id"`
		}
	}
	c.json(bob, "GET", "/v1/inbox?wait=1&timeout=10s", nil, 200, &inbox)
	if len(inbox.Items) == 0 || inbox.Items[0].ID != sent.ID {
		t.Fatalf("bob inbox: %+v", inbox)
	}
	var read struct {
		ID   string
		Read bool
	}
	c.json(bob, "POST", "/v1/inbox/"+sent.ID+"/read", nil, 200, &read)
	if read.ID != sent.ID || !read.Read {
		t.Fatalf("marked read: %+v", read)
	}
	c.json(bob, "GET", "/v1/inbox?all=1&limit=5", nil, 200, nil)
	c.json(bob, "GET", "/v1/inbox?wait=true&timeout=100ms", nil, 200, nil)
	c.refused(bob, reqValid, "POST", "/v1/inbox/not-a-uuid/read", "", nil, 400, false)
	c.refused(bob, reqValid, "POST", "/v1/inbox/0f8f7b0e-3a43-4d8e-9b55-6c1e0b8f2a11/read", "", nil, 404, true)
	c.refused(bob, reqInvalid, "GET", "/v1/inbox?limit=many", "", nil, 400, false)
	c.refused(bob, reqValid, "GET", "/v1/inbox?timeout=soon", "", nil, 400, false)

	// Requests: alice (admin) asks bob; bob (member) may not ask.
	var rq struct {
		RequestID string `json:"request_id"`
		Hop       *int
	}
	c.json(alice, "POST", "/v1/request", map[string]any{"to": "bob", "intent": "disk.usage", "params": map[string]string{"path": "/var"}}, 200, &rq)
	if rq.RequestID == "" || rq.Hop == nil {
		t.Fatalf("request: %+v", rq)
	}
	if msg := c.refused(bob, reqValid, "POST", "/v1/request", js, []byte(`{"to":"alice","intent":"x"}`), 403, false); !strings.Contains(msg, "role too low") {
		t.Fatalf("member request: %q", msg)
	}
	c.refused(alice, reqValid, "POST", "/v1/request", js, []byte(`{"to":"nobody","intent":"x"}`), 404, true)
	c.refused(alice, reqInvalid, "POST", "/v1/request", js, []byte(`{"to":"bob"`), 400, false)

	// Delivery state: the request is queued or delivered; the channel
	// message counts its readers.
	var rqSent struct{ ID string }
	c.json(alice, "POST", "/v1/request", map[string]any{"to": "bob", "intent": "delivery.check"}, 200, &rqSent)
	c.json(alice, "GET", "/v1/sent?limit=10", nil, 200, nil)
	c.json(alice, "GET", "/v1/sent?pending=1", nil, 200, nil)
	var dl struct {
		Recipients []struct{ State string }
	}
	c.json(alice, "GET", "/v1/sent/"+rqSent.ID, nil, 200, &dl)
	if len(dl.Recipients) != 1 || (dl.Recipients[0].State != "queued" && dl.Recipients[0].State != "delivered") {
		t.Fatalf("delivery of the request: %+v", dl)
	}
	c.json(alice, "GET", "/v1/sent/"+sent.ID, nil, 200, nil)
	c.refused(alice, reqValid, "GET", "/v1/sent/not-an-id", "", nil, 400, false)
	c.refused(alice, reqValid, "GET", "/v1/sent/0193a1c2-7f4e-7cc1-9a4e-3b1f0c2d9e11", "", nil, 404, true)
	c.refused(alice, reqInvalid, "GET", "/v1/sent?limit=x", "", nil, 400, false)
	var reqItemID string
	for {
		typ, item := ev.next()
		if typ == "item" && item["kind"] == "request" {
			if item["request_id"] != rq.RequestID || item["intent"] != "disk.usage" {
				t.Fatalf("request event: %v", item)
			}
			reqItemID, _ = item["id"].(string)
			break
		}
	}
	c.json(bob, "POST", "/v1/respond", map[string]any{"request_id": rq.RequestID, "status": "completed", "result": map[string]string{"used": "41%"}}, 200, nil)
	// The response reaches alice's inbox (bob's DM is there too).
	testwait.For(t, 10*time.Second, "the response in alice's inbox", func() bool {
		var in struct {
			Items []struct{ Kind, RequestID, Status string }
		}
		c.json(alice, "GET", "/v1/inbox?all=1", nil, 200, &in)
		return slices.ContainsFunc(in.Items, func(it struct{ Kind, RequestID, Status string }) bool {
			return it.Kind == "response" && it.Status == "completed"
		})
	})
	// Paging alice's inbox one item at a time lists what one answer does.
	var whole struct{ Items []struct{ ID string } }
	c.json(alice, "GET", "/v1/inbox?all=1", nil, 200, &whole)
	var paged []string
	for cursor := "start"; cursor != ""; {
		var page struct {
			Items []struct{ ID string }
			Next  string
		}
		c.json(alice, "GET", "/v1/inbox?all=1&limit=1&cursor="+url.QueryEscape(cursor), nil, 200, &page)
		if len(page.Items) != 1 || len(paged) > len(whole.Items) {
			t.Fatalf("inbox page after %q: %+v", cursor, page)
		}
		paged = append(paged, page.Items[0].ID)
		cursor = page.Next
	}
	if len(whole.Items) < 2 || len(paged) != len(whole.Items) || paged[0] != whole.Items[0].ID || paged[len(paged)-1] != whole.Items[len(whole.Items)-1].ID {
		t.Fatalf("paged %v, one answer %+v", paged, whole.Items)
	}
	c.refused(alice, reqValid, "GET", "/v1/inbox?cursor=AAAA", "", nil, 400, false)
	c.refused(alice, reqValid, "GET", "/v1/inbox?cursor=%21%21", "", nil, 400, false)
	c.refused(bob, reqValid, "POST", "/v1/respond", js, []byte(`{"request_id":"0f8f7b0e-3a43-4d8e-9b55-6c1e0b8f2a11","status":"completed"}`), 404, true)
	c.refused(bob, reqValid, "POST", "/v1/respond", js, []byte(`{"request_id":"`+rq.RequestID+`","status":"maybe"}`), 400, false)
	c.exerciseRespondHints(bob, rq.RequestID, reqItemID)
	c.exerciseAgentLoop(alice, bob, sent.ID)

	// Presence.
	c.json(alice, "GET", "/v1/presence", nil, 200, nil)
	var pres struct {
		Entries []struct {
			Name, State string
			Self        bool
		}
	}
	c.json(alice, "POST", "/v1/presence", map[string]string{"state": "away"}, 200, &pres)
	if !slices.ContainsFunc(pres.Entries, func(e struct {
		Name, State string
		Self        bool
	}) bool {
		return e.Self && e.State == "away"
	}) {
		t.Fatalf("presence after away: %+v", pres)
	}
	c.refused(alice, reqValid, "POST", "/v1/presence", js, []byte(`{"state":"asleep"}`), 400, false)
	c.json(alice, "POST", "/v1/presence", map[string]any{"state": "auto"}, 200, nil)
	c.json(alice, "POST", "/v1/presence", map[string]any{"note": "running tests on main", "for_seconds": 60}, 200, nil)
	c.refused(alice, reqValid, "POST", "/v1/presence", js, []byte(`{"note":"two\nlines"}`), 400, false)
	c.refused(alice, reqValid, "POST", "/v1/presence", js, []byte(`{}`), 400, false)

	// Subagent results.
	var posted struct{ Kind, SubagentID string }
	c.json(alice, "POST", "/v1/subagent-results", map[string]any{"subagent_id": "w1", "summary": "done", "result": []int{1}}, 200, &posted)
	if posted.Kind != "subagent_result" {
		t.Fatalf("subagent result posted as %+v", posted)
	}
	c.refused(alice, reqValid, "POST", "/v1/subagent-results", js, []byte(`{"subagent_id":"a\tb","summary":"x"}`), 400, false)

	// History and sequence.
	var hist struct {
		Channel  string
		Messages []struct{ ID, Body string }
	}
	c.json(alice, "GET", "/v1/history?channel=ops&since=1h&limit=10", nil, 200, &hist)
	if hist.Channel != "ops" || len(hist.Messages) != 1 || hist.Messages[0].ID != sent.ID {
		t.Fatalf("history: %+v", hist)
	}
	c.refused(alice, reqInvalid, "GET", "/v1/history", "", nil, 400, true)
	c.refused(alice, reqValid, "GET", "/v1/history?channel=nope", "", nil, 404, true)
	c.refused(alice, reqValid, "GET", "/v1/history?channel=ops&since=yesterday", "", nil, 400, false)
	c.refused(alice, reqInvalid, "GET", "/v1/history?channel=ops&limit=-1", "", nil, 400, false)
	var seq struct{ Last []struct{ To string } }
	c.json(alice, "GET", "/v1/sequence", nil, 200, &seq)
	if len(seq.Last) == 0 {
		t.Fatalf("sequence after sends: %+v", seq)
	}

	// Roster publishing: the current roster again, garbage, an oversized
	// document, then a real update.
	cur, err := os.ReadFile(filepath.Join(alice, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	const cb = "application/cbor"
	c.refused(alice, reqValid, "POST", "/v1/roster", cb, cur, 409, true)
	c.refused(alice, reqValid, "POST", "/v1/roster", cb, []byte("not a roster"), 409, false)
	c.refused(alice, reqValid, "POST", "/v1/roster", cb, make([]byte, 1<<20+1), 413, false)
	var carol struct{ Key string }
	carolHome := filepath.Join(t.TempDir(), "carol")
	meshctlJSON(t, o.meshctl, &carol, "--home", carolHome, "init", "--name", "carol")
	o.ctl("alice", "roster", "add", carol.Key, "--role", "observer", "--name", "carol")
	next, err := os.ReadFile(filepath.Join(alice, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	var pub struct {
		Version uint64
		Members []struct{ Name string }
	}
	if code, data := c.call(alice, reqValid, "POST", "/v1/roster", cb, next); code != 200 || json.Unmarshal(data, &pub) != nil {
		t.Fatalf("publish the next roster: %d %s", code, data)
	}
	if pub.Version != ros.Version+1 || len(pub.Members) != 3 {
		t.Fatalf("published roster: %+v (was v%d)", pub, ros.Version)
	}

	// Carol, an observer, may read but not send or respond.
	pinned := filepath.Join(t.TempDir(), "roster.cbor")
	if err := os.WriteFile(pinned, next, 0o644); err != nil {
		t.Fatal(err)
	}
	dc := startDaemon(t, o.meshd, carolHome, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned)
	waitStatus(t, o.meshctl, carolHome, dc)
	c.json(carolHome, "GET", "/v1/status", nil, 200, &st)
	if st.Role != "observer" {
		t.Fatalf("carol status: %+v", st)
	}
	for _, r := range []struct{ path, body string }{
		{"/v1/send", `{"to":"alice","body":"x"}`},
		{"/v1/respond", `{"request_id":"` + rq.RequestID + `","status":"completed"}`},
	} {
		if msg := c.refused(carolHome, reqValid, "POST", r.path, js, []byte(r.body), 403, false); !strings.Contains(msg, "role too low") {
			t.Fatalf("observer %s: %q", r.path, msg)
		}
	}

	// A reader that stops reading is told it lagged: a few large items
	// fill its socket, 256 more its queue, and meshd drops the rest for
	// it rather than wait. It says so before the next item it delivers.
	slow := c.openEvents(bob)
	defer slow.close()
	big := strings.Repeat("x", 250<<10)
	for range 3 {
		c.json(alice, "POST", "/v1/send", map[string]string{"to": "#ops", "body": big}, 200, nil)
	}
	const smalls = 300
	for i := range smalls {
		c.json(alice, "POST", "/v1/send", map[string]string{"to": "#ops", "body": fmt.Sprint("small ", i)}, 200, nil)
	}
	// Wait until bob has them all, so the reader's queue overflowed.
	testwait.For(t, 30*time.Second, "bob to store the last message", func() bool {
		var h struct{ Messages []struct{ Body string } }
		c.json(bob, "GET", "/v1/history?channel=ops&limit=1", nil, 200, &h)
		return len(h.Messages) == 1 && h.Messages[0].Body == fmt.Sprint("small ", smalls-1)
	})
	// meshd hands an item to the readers' queues after it commits, so
	// the queue may still be filling, and dropping, while the reader
	// drains it: then "lagged" comes mid-drain, before the items queued
	// after the drop. Either way the reader is told exactly where it
	// lost items, once per gap, and never gets more than was sent.
	drained, lagged := 0, 0
	for {
		typ, _, ok := slow.nextWithin(time.Second)
		if !ok {
			break
		}
		switch typ {
		case "item":
			drained++
		case "lagged":
			lagged++
		default:
			t.Fatalf("slow reader: %s event while it caught up", typ)
		}
		if drained > 3+smalls {
			t.Fatal("slow reader: more items than were sent")
		}
	}
	if drained >= 3+smalls {
		t.Fatalf("slow reader got all %d items: nothing was dropped, so this tests nothing", drained)
	}
	var marker struct{ ID string }
	c.json(alice, "POST", "/v1/send", map[string]string{"to": "#ops", "body": "after the gap"}, 200, &marker)
	typ, it := slow.next()
	if typ == "lagged" {
		lagged++
		typ, it = slow.next()
	}
	if lagged == 0 {
		t.Fatalf("slow reader, after %d of %d items: never told it lagged", drained, 3+smalls)
	}
	if typ != "item" || it["id"] != marker.ID {
		t.Fatalf("slow reader after lagged: %s %v, want item %s", typ, it, marker.ID)
	}

	c.exerciseJoinRoutes(alice, bob)
	c.exerciseCards(alice, bob) // agent cards and cancel
	c.exerciseChannelDrafts(alice, bob)
	c.exerciseAttachments(alice, bob)

	// Every documented operation answered, with every documented status
	// but those listed in notExercised.
	for route, op := range c.documentedRoutes() {
		for code := range op.Responses.Map() {
			n, _ := strconv.Atoi(code)
			if c.seen[op.OperationID][n] {
				continue
			}
			if _, ok := notExercised["*/"+code]; ok {
				continue
			}
			if _, ok := notExercised[op.OperationID+"/"+code]; ok {
				continue
			}
			t.Errorf("%s (%s): documented status %s never seen", route, op.OperationID, code)
		}
	}
}

// TestAgentsDocPythonIsTheExample: the Python shown in docs/AGENTS.md is
// taken word for word from docs/examples/meshd_client.py, which
// TestPythonClientExample runs.
func TestAgentsDocPythonIsTheExample(t *testing.T) {
	testpar.Parallel(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "AGENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "docs", "examples", "meshd_client.py"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(doc, []byte("\n## (d) The control API"))
	if !ok {
		t.Fatal("docs/AGENTS.md has no section on the control API")
	}
	blocks := regexp.MustCompile("(?s)```python\n(.*?)```").FindAllSubmatch(section, -1)
	if len(blocks) != 2 {
		t.Fatalf("docs/AGENTS.md shows %d Python blocks for the control API, want 2", len(blocks))
	}
	for _, b := range blocks {
		if !bytes.Contains(script, b[1]) {
			t.Errorf("docs/AGENTS.md shows Python that docs/examples/meshd_client.py lacks:\n%s", b[1])
		}
	}
}

// TestPythonClientExample runs docs/examples/meshd_client.py, the example
// in docs/AGENTS.md, against two real meshd processes.
func TestPythonClientExample(t *testing.T) {
	testpar.Parallel(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found; .ci/run installs it")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "docs", "examples", "meshd_client.py")
	o := newHistOrg(t, "alice", "bob")
	alice, bob := o.homes["alice"], o.homes["bob"]
	client := func(home string, args ...string) *exec.Cmd {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		cmd := exec.CommandContext(ctx, py, append([]string{script, "--home", home}, args...)...)
		cmd.Env = cleanEnv()
		return cmd
	}
	run := func(home string, args ...string) []map[string]any {
		t.Helper()
		var stderr bytes.Buffer
		cmd := client(home, args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("meshd_client.py %v: %v\n%s", args, err, stderr.String())
		}
		return jsonLines(t, out)
	}

	st := run(alice, "status")
	if len(st) != 1 || st[0]["name"] != "alice" || st[0]["role"] != "admin" || st[0]["links"] != 1.0 {
		t.Fatalf("status: %v", st)
	}
	o.ctl("alice", "channel", "create", "ops")
	o.waitChannel("bob", "ops")
	o.ctl("bob", "subscribe", "ops")

	// Bob follows his events with the example while alice sends.
	follow := client(bob, "events", "--count", "2")
	var stderr bytes.Buffer
	follow.Stderr = &stderr
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"listening": true`) {
		t.Fatalf("events: first line %q, want listening\n%s", lines.Text(), stderr.String())
	}
	for _, body := range []string{"one from python", "two from python"} {
		sent := run(alice, "send", "#ops", body)
		if len(sent) != 1 || sent[0]["to"] != "#ops" || len(sent[0]["sent_to"].([]any)) != 1 {
			t.Fatalf("send: %v", sent)
		}
	}
	var got []string
	for lines.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("events line %q: %v", lines.Text(), err)
		}
		got = append(got, fmt.Sprint(ev["from"], ": ", ev["body"]))
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("events: %v\n%s", err, stderr.String())
	}
	if want := []string{"alice: one from python", "alice: two from python"}; !slices.Equal(got, want) {
		t.Fatalf("events printed %q, want %q", got, want)
	}

	inbox := run(bob, "inbox")
	if len(inbox) != 2 || inbox[0]["body"] != "one from python" || inbox[0]["from"] != "alice" || inbox[0]["to"] != "#ops" {
		t.Fatalf("inbox: %v", inbox)
	}

	// An error answer is printed with its hint, exit status 1.
	cmd := client(alice, "send", "#nope", "x")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errb.String(), "meshd: ") || !strings.Contains(errb.String(), "hint: ") {
		t.Fatalf("send to an unknown channel: %v\n%s", err, errb.String())
	}
}

func jsonLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var res []map[string]any
	for line := range bytes.Lines(out) {
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		res = append(res, v)
	}
	return res
}

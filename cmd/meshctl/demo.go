package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/roster"
)

const usageDemo = `usage: meshctl demo [--keep] [--dir DIR] [--json]

Start a throwaway mesh of three nodes inside this process, on loopback, and
walk through what meshd does: identities and a roster (alice admin, bob
member, carol observer), links and the full mesh, a channel, a channel
message, a direct message, a request and its response, the mailbox files
and their offline check. Each step shows the meshctl commands that do the
same on real nodes. No meshd needs to run, and nothing outside the demo's
directory is touched.

Without --keep the demo closes the nodes and removes its directory when it
is done, within 15 seconds. With --keep the mesh keeps running until
Ctrl-C, and the demo prints the 'meshctl --home ...' lines to poke at it
from another terminal.

flags:
  --keep      keep the mesh running until Ctrl-C
  --dir DIR   put the three homes under DIR, a new or empty directory that
              is kept afterwards (default: a temporary directory, removed)

With --json, each step is one line of JSON: {"step", "title", "commands",
"output"}, and a last line {"done": true, ...}.

examples:
  meshctl demo
  meshctl demo --keep --dir /tmp/mesh
`

// demoBudget bounds the demo's steps; closing takes well under a second
// more, so the demo ends within 15 s.
const demoBudget = 12 * time.Second

// demoMembers is the demo's org.
var demoMembers = []demoMember{
	{"alice", roster.RoleAdmin},
	{"bob", roster.RoleMember},
	{"carol", roster.RoleObserver},
}

// demoFlags are the flags of 'meshctl demo'.
type demoFlags struct {
	keep    bool
	dirFlag string
}

func (fl *demoFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&fl.keep, "keep", false, "")
	fs.StringVar(&fl.dirFlag, "dir", "", "")
}

func runDemo(a *app, fl *demoFlags, pos []string) error {
	err := a.nargs(pos, 0, 0)
	if err != nil {
		return err
	}
	start := time.Now()
	dir := fl.dirFlag
	if dir == "" {
		// Short: the control sockets live under it, and a Unix socket
		// path must stay under about 100 bytes.
		if dir, err = os.MkdirTemp("", "meshd-demo-"); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(dir)
	} else {
		if dir, err = filepath.Abs(dir); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		empty, err := emptyDir(dir)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if !empty {
			return withHint(fmt.Errorf("demo: --dir %s is not empty", dir), "give a new or empty directory, or leave --dir out for a temporary one")
		}
	}

	// Ctrl-C at any point closes the nodes and removes the directory.
	ictx, stop := interruptContext()
	defer stop()
	p := &demoPrinter{a: a}
	ctx, cancel := context.WithTimeout(ictx, demoBudget)
	defer cancel()
	m, err := p.run(ctx, dir)
	if m != nil {
		defer m.close()
	}
	if err != nil {
		p.flush()
		if ictx.Err() != nil {
			return errors.New("demo: interrupted")
		}
		return fmt.Errorf("demo: %w", err)
	}

	if fl.keep {
		p.keep(m)
		<-ictx.Done()
	}
	if err := m.close(); err != nil {
		return fmt.Errorf("demo: close nodes: %w", err)
	}
	p.done(dir, fl.dirFlag == "", time.Since(start))
	return nil
}

// demoPrinter prints the demo's steps, as text or JSON lines.
type demoPrinter struct {
	a    *app
	n    int
	step *demoStep // being filled, for JSON
	home func(name string) string
}

// demoStep is one step of the demo in JSON.
type demoStep struct {
	Step     int      `json:"step"`
	Title    string   `json:"title"`
	Commands []string `json:"commands,omitempty"`
	Output   []string `json:"output,omitempty"`
}

// begin starts step title.
func (p *demoPrinter) begin(title string) {
	p.flush()
	p.n++
	if p.a.json {
		p.step = &demoStep{Step: p.n, Title: title}
		return
	}
	fmt.Fprintf(p.a.Stdout, "\n== %d. %s\n", p.n, title)
}

// cmd shows a command that does what the step does.
func (p *demoPrinter) cmd(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if p.step != nil {
		p.step.Commands = append(p.step.Commands, s)
		return
	}
	fmt.Fprintf(p.a.Stdout, "   $ %s\n", s)
}

// mc shows a meshctl command on the node called name.
func (p *demoPrinter) mc(name, format string, args ...any) {
	p.cmd("meshctl --home %s %s", quoteShell(p.home(name)), fmt.Sprintf(format, args...))
}

// out shows what came of the step, line by line.
func (p *demoPrinter) out(format string, args ...any) {
	s := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	for line := range strings.SplitSeq(s, "\n") {
		if p.step != nil {
			p.step.Output = append(p.step.Output, line)
			continue
		}
		fmt.Fprintf(p.a.Stdout, "     %s\n", line)
	}
}

// item shows an inbox item as 'meshctl inbox' does.
func (p *demoPrinter) item(it api.Item) {
	var b strings.Builder
	writeItem(&b, &it, false)
	p.out("%s", b.String())
}

// flush prints the JSON of the step being filled.
func (p *demoPrinter) flush() {
	if p.step != nil {
		writeJSONLine(p.a.Stdout, p.step)
		p.step = nil
	}
}

// run starts the mesh and walks through the steps. It returns the mesh,
// if it started, to be closed by the caller.
func (p *demoPrinter) run(ctx context.Context, dir string) (*demoMesh, error) {
	p.home = func(name string) string { return filepath.Join(dir, name) }
	if !p.a.json {
		fmt.Fprintf(p.a.Stdout, "meshd demo: three nodes in this process, on loopback, with homes under %s.\n", dir)
		fmt.Fprintln(p.a.Stdout, "Each step shows the commands that do the same on real nodes.")
	}

	p.begin("identities and the roster: alice admin, bob member, carol observer")
	m, err := startDemoMesh(dir, "demo", demoMembers)
	if err != nil {
		return nil, err
	}
	alice, bob, carol := m.node("alice"), m.node("bob"), m.node("carol")
	for _, d := range m.nodes {
		p.mc(d.name, "init --name %s", d.name)
	}
	p.mc("alice", "roster init --org demo")
	for _, mb := range demoMembers[1:] {
		p.mc("alice", "roster add %s --role %s --name %s", m.node(mb.name).id.Pub, mb.role, mb.name)
	}
	for _, d := range m.nodes[1:] {
		p.cmd("cp %s %s", quoteShell(filepath.Join(alice.home, "roster.cbor")), quoteShell(filepath.Join(d.home, "roster.cbor")))
	}
	r := alice.n.Roster()
	p.out("roster %q version %d, signed by alice, in each home", r.Org, r.Version)

	p.begin("three nodes start; bob and carol know only alice's address")
	seed, err := tcpListenAddr(alice.n)
	if err != nil {
		return m, err
	}
	for i, d := range m.nodes {
		seedFlag := ""
		if i > 0 {
			seedFlag = " --seed tcp://" + seed.Address
		}
		p.cmd("meshd --home %s --listen tcp://127.0.0.1:0 --no-mdns%s &", quoteShell(d.home), seedFlag)
	}
	p.out("alice listens on tcp://%s", seed.Address)

	p.begin("a full mesh: peer exchange tells bob and carol about each other")
	t0 := time.Now()
	if err := m.waitFullMesh(ctx); err != nil {
		return m, err
	}
	p.mc("alice", "peers")
	for _, d := range m.nodes {
		var names []string
		for _, pr := range d.n.Backend().PeerList() {
			names = append(names, pr.Name+" ("+pr.Role+")")
		}
		p.out("%s links %s", d.name, strings.Join(names, " and "))
	}
	p.out("(all linked %s after start)", ago(time.Since(t0)))

	p.begin("alice creates #demo; bob and carol subscribe")
	p.mc("alice", "channel create demo")
	ch, err := alice.c.CreateChannel(ctx, api.CreateChannel{Name: "demo"})
	if err != nil {
		return m, fmt.Errorf("create #demo: %w", err)
	}
	p.out("#%s: readers %s, writers %s", ch.Name, strings.Join(ch.Readers, ", "), strings.Join(ch.Writers, ", "))
	for _, d := range []*demoNode{bob, carol} {
		// The signed policy reaches them over the links first.
		if err := pollUntil(ctx, "#demo to reach "+d.name, func() bool {
			_, err := d.c.Channel(ctx, "demo")
			return err == nil
		}); err != nil {
			return m, err
		}
		p.mc(d.name, "subscribe demo")
		if _, err := d.c.Subscribe(ctx, api.Subscribe{Channel: "demo", State: "subscribed"}); err != nil {
			return m, fmt.Errorf("%s subscribes: %w", d.name, err)
		}
	}
	p.out("bob and carol are subscribed to #demo")

	p.begin("alice sends to #demo; bob and carol receive it")
	const hello = "hello, mesh"
	p.mc("alice", "send '#demo' %s", quoteShell(hello))
	s, err := alice.c.Send(ctx, api.Send{To: "#demo", Body: hello})
	if err != nil {
		return m, fmt.Errorf("send to #demo: %w", err)
	}
	p.out("sent %s to #demo (%d peers)", s.ID, len(s.SentTo))
	for _, d := range []*demoNode{bob, carol} {
		it, err := waitItem(ctx, d, func(it api.Item) bool { return it.Body == hello })
		if err != nil {
			return m, err
		}
		p.mc(d.name, "inbox")
		p.item(it)
	}

	p.begin("carol is an observer: she reads #demo, but may not write to it")
	p.mc("carol", "send '#demo' %s", quoteShell("may I?"))
	if _, err := carol.c.Send(ctx, api.Send{To: "#demo", Body: "may I?"}); err != nil {
		p.out("meshctl: %v", err)
	} else {
		p.out("sent, though carol is an observer: her peers will drop it")
	}

	p.begin("alice sends bob a direct message")
	const dm = "hi bob, the tests are red again"
	p.mc("alice", "dm bob %s", quoteShell(dm))
	if _, err := alice.c.Send(ctx, api.Send{To: "bob", Body: dm}); err != nil {
		return m, fmt.Errorf("dm bob: %w", err)
	}
	it, err := waitItem(ctx, bob, func(it api.Item) bool { return it.Body == dm })
	if err != nil {
		return m, err
	}
	p.mc("bob", "inbox")
	p.item(it)

	p.begin("a request: alice (admin; only operators and admins may ask) asks bob to run the tests, and bob answers")
	params := `{"branch": "main"}`
	p.mc("alice", "request bob run-tests --params %s", quoteShell(params))
	rq, err := alice.c.Request(ctx, api.Request{To: "bob", Intent: "run-tests", Params: json.RawMessage(params)})
	if err != nil {
		return m, fmt.Errorf("request: %w", err)
	}
	p.out("sent request %s to bob", rq.RequestID)
	req, err := waitItem(ctx, bob, func(it api.Item) bool { return it.Kind == "request" && it.RequestID == rq.RequestID })
	if err != nil {
		return m, err
	}
	p.mc("bob", "inbox")
	p.item(req)
	result := `{"passed": 412, "failed": 0}`
	p.mc("bob", "respond %s completed --result %s", req.RequestID, quoteShell(result))
	if _, err := bob.c.Respond(ctx, api.Respond{RequestID: req.RequestID, Status: "completed", Result: json.RawMessage(result)}); err != nil {
		return m, fmt.Errorf("respond: %w", err)
	}
	resp, err := waitItem(ctx, alice, func(it api.Item) bool { return it.Kind == "response" && it.RequestID == rq.RequestID })
	if err != nil {
		return m, err
	}
	p.mc("alice", "inbox")
	p.item(resp)
	p.mc("bob", "read %s", req.ID)
	if _, err := bob.c.MarkRead(ctx, req.ID); err != nil {
		return m, fmt.Errorf("mark read: %w", err)
	}
	p.out("bob marks the request read: it no longer wakes 'meshctl wait'")

	p.begin("the mailbox: every inbox item as a plain-text file")
	files := p.mailboxes(ctx, m)
	if len(files) == 0 {
		p.out("no mailbox files: the mailbox mirror is not enabled in this meshd")
	}

	p.begin("verify a mailbox file offline, with no daemon")
	p.verify(bob, files)
	return m, nil
}

// waitItem waits until d's inbox holds an item that matches.
func waitItem(ctx context.Context, d *demoNode, match func(api.Item) bool) (api.Item, error) {
	var found api.Item
	err := pollUntil(ctx, "an item in "+d.name+"'s inbox", func() bool {
		in, err := d.c.Inbox(ctx, api.InboxQuery{All: true})
		if err != nil {
			return false
		}
		for _, it := range in.Items {
			if match(it) {
				found = it
				return true
			}
		}
		return false
	})
	return found, err
}

// demoMailboxWait is how long the demo gives the mailbox mirror to write
// its files after the last delivery.
const demoMailboxWait = time.Second

// mailboxes lists the mailbox files of each home and returns bob's.
func (p *demoPrinter) mailboxes(ctx context.Context, m *demoMesh) map[string][]string {
	files := map[string][]string{}
	list := func() {
		for _, d := range m.nodes {
			files[d.name] = mailboxFiles(d.home)
		}
	}
	// One file per inbox item, if the mirror writes any: wait for them.
	items := map[string]int{}
	for _, d := range m.nodes {
		if in, err := d.c.Inbox(ctx, api.InboxQuery{All: true}); err == nil {
			items[d.name] = len(in.Items)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, demoMailboxWait)
	defer cancel()
	_ = pollUntil(wctx, "mailbox files", func() bool {
		list()
		for _, d := range m.nodes {
			if len(files[d.name]) < items[d.name] {
				return false
			}
		}
		return true
	})
	list()
	total := 0
	for _, d := range m.nodes {
		names := files[d.name]
		total += len(names)
		if len(names) == 0 {
			continue
		}
		p.cmd("%s", lsInboxes(d.home))
		for _, f := range names {
			p.out("%s", f)
		}
	}
	if total == 0 {
		return nil
	}
	return files
}

// verify runs 'meshctl verify' on one of bob's mailbox files, when this
// meshctl has that command.
func (p *demoPrinter) verify(bob *demoNode, files map[string][]string) {
	if p.a.find([]string{"verify"}) == nil {
		p.out("skipped: this meshctl has no verify command yet")
		return
	}
	if len(files["bob"]) == 0 {
		p.out("skipped: there is no mailbox file to verify")
		return
	}
	file := files["bob"][0]
	for _, f := range files["bob"] {
		if data, err := os.ReadFile(f); err == nil && bytes.Contains(data, []byte("Kind: request")) {
			file = f
			break
		}
	}
	p.mc("bob", "verify %s", quoteShell(file))
	// As run does, on this command table.
	var out bytes.Buffer
	sub := &app{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, commands: p.a.commands}
	cmd, rest, err := sub.dispatch([]string{"--home", bob.home, "verify", file})
	if err == nil {
		sub.cmd = cmd
		err = cmd.exec(sub, rest)
	}
	code := sub.report(err)
	p.out("%s", out.String())
	if code != 0 {
		p.out("(meshctl verify exited %d)", code)
	}
}

// keep prints how to poke at the running mesh.
func (p *demoPrinter) keep(m *demoMesh) {
	p.begin("the mesh keeps running: try these in another terminal, then Ctrl-C here")
	p.mc("alice", "status")
	p.mc("bob", "inbox --all")
	p.mc("carol", "tail")
	p.mc("alice", "send '#demo' %s", quoteShell("still there?"))
	p.mc("bob", "dm alice %s", quoteShell("yes"))
	p.mc("alice", "wait --timeout 1m")
	p.flush()
}

// done says how the demo ended.
func (p *demoPrinter) done(dir string, removed bool, took time.Duration) {
	p.flush()
	what := "kept " + dir
	if removed {
		what = "removed " + dir
	}
	if p.a.json {
		writeJSONLine(p.a.Stdout, map[string]any{"done": true, "dir": dir, "removed": removed, "seconds": took.Seconds()})
		return
	}
	fmt.Fprintf(p.a.Stdout, "\ndone in %s: closed the three nodes and %s\n", ago(took), what)
}

// lsInboxes is the shell line that lists a home's inbox files: the home
// quoted, the glob outside the quotes, so that it works when pasted.
func lsInboxes(home string) string {
	return "ls " + quoteShell(filepath.Join(home, "mailbox")) + "/*/inbox/"
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

const usageJoin = `usage: meshctl join TOKEN|- [--name NAME] [--force] [--timeout D] [--json]

Join an org with an invite token from one of its admins ('meshctl invite'
on their node). TOKEN is the one line they sent ("meshinv1:..."), or - to
read it from standard input, which keeps it out of the shell's history.

join creates this node's identity if the home has none, reaches the admin's
node at the addresses in the token, checks that it answers with the key the
token names, and presents the invite. The admin's node adds this node to
the roster and sends it back; join saves it as this node's roster, and the
token's addresses as its seeds (<home>/seeds), so that a plain 'meshd'
then links with no --seed. Unix socket addresses are kept only when join
reached the admin's node over one (the same host).

Where the org's roster needs more than one admin's signature, the
inviting node writes the update adding this node for the other admins to
sign ('meshctl roster sign', then 'meshctl roster publish'); join waits,
asking again every 2 seconds, until it is published.

A home that holds a one-node org of its own (what a first plain 'meshd'
creates) is switched to the new org: its roster, history store, invites,
seeds and mailbox are moved to <home>/left-ORG-TIME/ (nothing is deleted);
the identity stays. A home that belongs to another org with other
members is refused unless --force. meshd must not be running on the home.

flags:
  --name NAME    this node's name (default: the invite's, else the host name)
  --force        leave another org this home belongs to
  --timeout D    how long to try (default 30s; 1h where the org's quorum
                 is more than 1, to wait for the other admins' signatures)

examples:
  meshctl join meshinv1:omdhY21lLW9yZ...
  meshctl --home /srv/agent1 join - < token.txt
  meshctl join "$TOKEN" --name build-3 && meshd
`

// joinRetry is how often join asks again while the update adding it
// waits for admin signatures.
const joinRetry = 2 * time.Second

// joinResult is the JSON output of join.
type joinResult struct {
	Org           string       `json:"org"`
	Key           proto.PubKey `json:"key"`
	Fingerprint   string       `json:"fingerprint"`
	Name          string       `json:"name,omitempty"`
	Role          string       `json:"role"`
	RosterVersion uint64       `json:"roster_version"`
	Admin         string       `json:"admin"`
	Via           string       `json:"via"`
	Seeds         []string     `json:"seeds"`
	Home          string       `json:"home"`
	// Left names the org this home belonged to before, and where its
	// roster and history went.
	Left    string `json:"left,omitempty"`
	LeftDir string `json:"left_dir,omitempty"`
	Already bool   `json:"already_member,omitempty"`
}

// errInviteRefused: the admin's node closed the link without sending the
// roster, which is what it does with an invite it does not honour.
var errInviteRefused = errors.New("the admin's node refused the invite")

// joinFlags are the flags of 'meshctl join'.
type joinFlags struct {
	name    string
	force   bool
	timeout time.Duration
}

func (fl *joinFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.name, "name", "", "")
	fs.BoolVar(&fl.force, "force", false, "")
	fs.DurationVar(&fl.timeout, "timeout", 0, "")
}

func runJoin(a *app, fl *joinFlags, pos []string) error {
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	text := pos[0]
	if text == "-" {
		b, err := a.readStdin("token", proto.MaxInviteToken+2)
		if err != nil {
			return err
		}
		text = string(b)
	}
	tok, err := proto.ParseInviteToken(text)
	if err != nil {
		return withHint(err, "copy the whole line 'meshctl invite' printed, starting with %s", proto.InviteTokenPrefix)
	}
	if exp := time.Unix(int64(tok.Expires), 0); !time.Now().Before(exp) {
		return withHint(fmt.Errorf("the invite expired at %s", exp.Local().Format(time.DateTime)),
			"ask an admin for a new one: meshctl invite --role %s", tok.Role)
	}

	h := a.home()
	unlock, err := h.Lock()
	if err != nil {
		if errors.Is(err, home.ErrLocked) {
			return withHint(err, "stop meshd on this home first, then join, then start it again")
		}
		return err
	}
	defer unlock()
	want := fl.name
	if want == "" {
		want = tok.Name
	}
	if want == "" {
		if cur, err := h.LoadIdentity(); err != nil || cur.Name == "" {
			want = hostName()
		}
	}
	id, _, err := h.Init(want)
	if err != nil {
		return err
	}
	res := joinResult{Org: tok.Org, Key: id.Pub, Fingerprint: id.Pub.Fingerprint(), Admin: tok.Admin.Fingerprint(), Home: h.Dir}

	// What does the home belong to now?
	cur, err := h.LoadRoster()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cur = nil
	case errors.Is(err, home.ErrBadRoster):
		if !fl.force {
			return withHint(err, "join with --force to replace the damaged roster")
		}
		cur = nil
	case err != nil:
		return err
	}
	leave, waitNoted := false, false
	if cur != nil {
		_, member := cur.Member(id.Pub)
		switch {
		case cur.Org == tok.Org && member:
			res.Already = true
		case len(cur.Members) == 1 && member:
			leave = true
			if !a.json {
				fmt.Fprintf(a.Stdout, "this home holds a one-node org of its own (%q, roster v%d): replacing it with org %q\n",
					cur.Org, cur.Version, tok.Org)
			}
		case !fl.force:
			return withHint(fmt.Errorf("this home belongs to org %q (roster v%d, %d members); joining %q would leave it",
				cur.Org, cur.Version, len(cur.Members), tok.Org),
				"use another --home for the new org, or add --force to leave %q (its roster, history and mailbox are moved aside, not deleted)", cur.Org)
		default:
			leave = true
		}
	}

	if fl.timeout == 0 {
		fl.timeout = 30 * time.Second
		if tok.Quorum > 1 {
			fl.timeout = time.Hour
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), fl.timeout)
	defer cancel()
	var r *roster.Roster
	var via string
	for {
		r, via, err = joinExchange(ctx, id, tok)
		if !errors.Is(err, errInviteRefused) || tok.Quorum <= 1 {
			break
		}
		// The admin's node waits for other admins to sign the update
		// that adds us: try again until it is published.
		if !waitNoted && !a.json {
			fmt.Fprintf(a.Stdout, "the org's roster needs %d admin signatures: waiting (up to %v) for the other admins to sign and publish the update adding this node (%s)\n",
				tok.Quorum, fl.timeout, id.Pub.Fingerprint())
		}
		waitNoted = true
		select {
		case <-ctx.Done():
			return withHint(fmt.Errorf("no roster update adding this node was published within %v: %w", fl.timeout, err),
				"ask the org's admins to sign it (the inviting node's 'meshctl invite list' names the file), or use a longer --timeout")
		case <-time.After(joinRetry):
		}
	}
	if err != nil {
		return err
	}
	if leave {
		res.Left = cur.Org
		if res.LeftDir, err = leaveOrg(h, cur.Org); err != nil {
			return err
		}
	}
	if err := h.SaveRoster(r); err != nil {
		return err
	}
	m, _ := r.Member(id.Pub)
	if m.Name != "" && m.Name != id.Name {
		if id, _, err = h.Init(m.Name); err != nil {
			return err
		}
	}
	res.Seeds = joinSeeds(tok, via)
	if err := writeSeeds(h, res.Seeds); err != nil {
		return err
	}
	res.Name, res.Role, res.RosterVersion, res.Via = m.Name, m.Role.String(), r.Version, via
	if a.json {
		return a.printJSON(res)
	}
	if res.LeftDir != "" {
		fmt.Fprintf(a.Stdout, "moved org %q's roster, history and mailbox to %s\n", res.Left, res.LeftDir)
	}
	if res.Already {
		fmt.Fprintf(a.Stdout, "this node was already a member of org %q: its roster and seeds are refreshed\n", r.Org)
	}
	fmt.Fprintf(a.Stdout, "joined org %q as %s (%s, %s), roster v%d\n", r.Org, m.Role, nameCell(m.Name), id.Pub.Fingerprint(), r.Version)
	fmt.Fprintf(a.Stdout, "seeds saved in %s\n\nstart the node with:\n  meshd%s\n", filepath.Join(h.Dir, "seeds"), homeArg(a))
	return nil
}

// homeArg is the --home argument that names the home meshctl used, if
// it is not the default.
func homeArg(a *app) string {
	if a.homeFlag == "" {
		return ""
	}
	return " --home " + a.homeFlag
}

func hostName() string {
	n, err := os.Hostname()
	if err != nil {
		return ""
	}
	n, _, _ = strings.Cut(n, ".")
	if roster.CheckName(n) != nil {
		return ""
	}
	return n
}

// joinExchange reaches the admin's node at each address of the token in
// turn, presents the invite, and waits for the roster it sends once it
// admitted us. It returns the roster and the address that answered.
func joinExchange(ctx context.Context, id home.Identity, tok *proto.InviteToken) (*roster.Roster, string, error) {
	cfg := transport.Config{
		Identity: id.Key,
		Org:      tok.Org,
		Payload: func() proto.HandshakePayload {
			return proto.HandshakePayload{Name: id.Name, Invite: tok.Proof()}
		},
	}
	var errs []error
	for _, s := range joinOrder(tok.Addrs) {
		addr, err := transport.ParseAddr(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, err := transport.Dial(ctx, addr, cfg, &tok.Admin)
		if err != nil {
			errs = append(errs, err)
			// Another key at a TCP address is someone else answering
			// for the admin: stop. At a Unix socket path it is usually
			// another node of this host whose home has the same path.
			if errors.Is(err, transport.ErrUnexpectedPeer) && addr.Network != "unix" || ctx.Err() != nil {
				break
			}
			continue
		}
		r, err := awaitRoster(ctx, l, id, tok)
		if err != nil {
			return nil, "", err
		}
		return r, s, nil
	}
	return nil, "", withHint(fmt.Errorf("could not reach the admin's node: %w", errors.Join(errs...)),
		"check that its meshd runs and that this machine can reach one of: %s", strings.Join(tok.Addrs, ", "))
}

// awaitRoster runs the admitted link until the admin's node sends the
// roster naming us, then says goodbye.
func awaitRoster(ctx context.Context, l *transport.Link, id home.Identity, tok *proto.InviteToken) (*roster.Roster, error) {
	got := make(chan []byte, 1)
	l.Start(func(frame []byte) {
		if len(frame) > 0 && proto.FrameType(frame[0]) == proto.FrameRoster {
			select {
			case got <- append([]byte(nil), frame[1:]...):
			default:
			}
		}
	})
	defer l.Close()
	for {
		select {
		case b := <-got:
			r, err := roster.Parse(b)
			if err != nil {
				return nil, fmt.Errorf("roster from the admin's node: %w", err)
			}
			if _, ok := r.Member(id.Pub); r.Org != tok.Org || !ok {
				continue // an older roster; ours follows
			}
			_ = l.SendWait(ctx, append([]byte{byte(proto.FrameGoodbye)}, "joined"...))
			return r, nil
		case <-l.Done():
			return nil, withHint(errInviteRefused,
				"the token may be wrong, expired, used or revoked; ask the admin for a new one ('meshctl invite list' shows its state)")
		case <-ctx.Done():
			return nil, fmt.Errorf("no roster from the admin's node: %w", ctx.Err())
		}
	}
}

// leaveOrg moves the roster and history of the org the home belonged to
// into a directory of its own in the home, and returns its path.
func leaveOrg(h home.Home, org string) (string, error) { return h.LeaveOrg(org) }

// joinOrder puts the token's Unix socket addresses last: they reach the
// admin's node only from its own host.
func joinOrder(addrs []string) []string {
	out := slices.Clone(addrs)
	slices.SortStableFunc(out, func(a, b string) int {
		ua, ub := strings.HasPrefix(a, "unix:"), strings.HasPrefix(b, "unix:")
		switch {
		case ua == ub:
			return 0
		case ua:
			return 1
		}
		return -1
	})
	return out
}

// joinSeeds returns the token's addresses the joiner keeps as seeds: all
// of them, but Unix sockets only when it reached the admin's node over
// one (it is on the same host); another host's socket can never reach it
// (PROTOCOL.md §14.9).
func joinSeeds(tok *proto.InviteToken, via string) []string {
	local := strings.HasPrefix(via, "unix:")
	var out []string
	for _, s := range append(slices.Clone(tok.Addrs), tok.Seeds...) {
		if (local || !strings.HasPrefix(s, "unix:")) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// writeSeeds writes the seeds file meshd reads at start.
func writeSeeds(h home.Home, seeds []string) error { return h.WriteSeeds("'meshctl join'", seeds) }

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// request --any: ask whoever can. The candidates are the members whose
// card lists the intent, online first, then away (offline members are
// not asked); each is asked in turn until one accepts (or answers in
// full) within --accept-timeout. A rejection, or no answer in time,
// moves on to the next. The requests left unanswered stay with their
// peers: a peer that accepts one late still does the work, and its
// answer still arrives in the inbox.

// defaultAcceptTimeout is how long --any waits for each candidate.
const defaultAcceptTimeout = 30 * time.Second

// anyTry is one candidate --any asked, and what came of it.
type anyTry struct {
	Peer      string `json:"peer"`
	RequestID string `json:"request_id"`
	// Outcome is accepted, completed, failed, rejected or timed_out.
	Outcome string `json:"outcome"`
}

// anyResult is the --json answer of request --any without --wait.
type anyResult struct {
	Request *api.Sent `json:"request"`
	Peer    string    `json:"peer"`
	Tried   []anyTry  `json:"tried"`
	// Answer is the final answer when it came before the acceptance.
	Answer *api.Item `json:"answer,omitempty"`
}

type anyOpts struct {
	intent        string
	params        json.RawMessage
	replyTo       string
	wait          bool
	timeout       time.Duration
	acceptTimeout time.Duration
}

// eventPump reads an event stream into a channel until stop is called.
type eventPump struct {
	ch     chan pumped
	stop   chan struct{}
	events *api.EventStream
}

type pumped struct {
	ev  api.Event
	err error
}

func newEventPump(events *api.EventStream) *eventPump {
	p := &eventPump{ch: make(chan pumped), stop: make(chan struct{}), events: events}
	go func() {
		for {
			ev, err := events.Next()
			select {
			case p.ch <- pumped{ev, err}:
			case <-p.stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *eventPump) close() {
	close(p.stop)
	p.events.Close()
}

// nextResponse returns the next response to request rid, or ok false
// when deadline passes first (a zero deadline never passes) or ctx ends.
func (p *eventPump) nextResponse(ctx context.Context, rid string, deadline time.Time) (it api.Item, ok bool, err error) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return api.Item{}, false, ctx.Err()
		case <-expired:
			return api.Item{}, false, nil
		case n := <-p.ch:
			if n.err != nil {
				return api.Item{}, false, n.err
			}
			if n.ev.Lagged || n.ev.Item.Kind != "response" || n.ev.Item.RequestID != rid {
				continue
			}
			return n.ev.Item, true, nil
		}
	}
}

// anyCandidates lists the members to ask for intent: online, then away.
func anyCandidates(ctx context.Context, c *api.Client, intent string) ([]api.Card, error) {
	ctx, cancel := context.WithTimeout(ctx, api.DefaultTimeout)
	defer cancel()
	cs, err := c.Cards(ctx, intent)
	if err != nil {
		return nil, err
	}
	var out []api.Card
	for _, c := range cs.Cards {
		if !c.Self && (c.Presence == "online" || c.Presence == "away") {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no online or away member's card lists intent %s (see: meshctl agents --intent %s)", fieldValue(intent), quoteShell(intent))
	}
	return out, nil
}

// anyTaken is what askAny found: the request a candidate took, that
// candidate, its first answer, and every candidate asked.
type anyTaken struct {
	sent  *api.Sent
	peer  string
	first api.Item
	tried []anyTry
}

// askAny asks cands (anyCandidates) for o.intent in turn until one takes the
// request. note, when set, is told of each ask and each move on. A nil
// taken with a nil error means that no candidate took it.
func askAny(ctx context.Context, c *api.Client, pump *eventPump, cands []api.Card, o anyOpts, note func(format string, args ...any)) (*anyTaken, []anyTry, error) {
	if note == nil {
		note = func(string, ...any) {}
	}
	var tried []anyTry
	for _, cd := range cands {
		peer := orDash(cd.Name)
		if cd.Name == "" {
			peer = cd.Fingerprint
		}
		s, err := call(ctx, func(ctx context.Context) (*api.Sent, error) {
			return c.Request(ctx, api.Request{To: cd.Fingerprint, Intent: o.intent, Params: o.params, ReplyTo: o.replyTo})
		})
		if err != nil {
			return nil, tried, err
		}
		note("asked %s (%s): request %s", printable(peer, false), cd.Presence, printable(s.RequestID, false))
		it, ok, err := pump.nextResponse(ctx, s.RequestID, time.Now().Add(o.acceptTimeout))
		if err != nil {
			return nil, tried, err
		}
		try := anyTry{Peer: peer, RequestID: s.RequestID, Outcome: "timed_out"}
		if ok {
			try.Outcome = it.Status
		}
		tried = append(tried, try)
		if !ok || it.Status == "rejected" {
			why := fmt.Sprintf("no answer within %v", o.acceptTimeout)
			if ok {
				why = "rejected"
			}
			note("%s: %s; asking the next", printable(peer, false), why)
			continue
		}
		return &anyTaken{sent: s, peer: peer, first: it, tried: tried}, tried, nil
	}
	return nil, tried, nil
}

func (a *app) requestAny(o anyOpts) error {
	cands, err := anyCandidates(context.Background(), a.client(), o.intent)
	if err != nil {
		return a.remoteErr(err)
	}
	events, err := a.client().OpenEvents(context.Background())
	if err != nil {
		return a.remoteErr(err)
	}
	pump := newEventPump(events)
	defer pump.close()
	var note func(string, ...any)
	if !a.json {
		note = func(format string, args ...any) { fmt.Fprintf(a.Stdout, format+"\n", args...) }
	}
	t, tried, err := askAny(context.Background(), a.client(), pump, cands, o, note)
	if err != nil {
		return a.remoteErr(err)
	}
	if t == nil {
		if a.json {
			_ = a.printJSON(map[string]any{"tried": tried, "taken": false})
		}
		return fmt.Errorf("no member took the request: %d asked", len(tried))
	}
	return a.anyTaken(pump, t.sent, t.peer, t.first, t.tried, o)
}

// anyTaken reports the candidate that took the request, and with --wait
// waits for its final answer.
func (a *app) anyTaken(pump *eventPump, s *api.Sent, peer string, first api.Item, tried []anyTry, o anyOpts) error {
	final := first.Status != "accepted" && first.Status != "progress"
	if !a.json {
		if err := writeItem(a.Stdout, &first, true); err != nil {
			return err
		}
	}
	if !o.wait || final {
		if final {
			a.markRead(first.ID)
		}
		if a.json {
			r := anyResult{Request: s, Peer: peer, Tried: tried}
			if final {
				r.Answer = &first
			}
			return a.printJSON(r)
		}
		if final && first.Status != "completed" {
			return exitStatus(exitError)
		}
		return nil
	}
	var deadline time.Time
	if o.timeout > 0 {
		deadline = time.Now().Add(o.timeout)
	}
	for {
		it, ok, err := pump.nextResponse(context.Background(), s.RequestID, deadline)
		if err != nil {
			return a.remoteErr(err)
		}
		if !ok {
			if a.json {
				_ = a.printJSON(map[string]any{"request": s, "peer": peer, "tried": tried, "timed_out": true})
			} else {
				fmt.Fprintf(a.Stdout, "no final answer within %v\n", o.timeout)
			}
			return exitStatus(exitTimeout)
		}
		if !a.json {
			if err := writeItem(a.Stdout, &it, true); err != nil {
				return err
			}
		}
		if it.Status == "accepted" || it.Status == "progress" {
			continue
		}
		a.markRead(it.ID)
		if a.json {
			if err := a.printJSON(it); err != nil {
				return err
			}
		}
		if it.Status != "completed" {
			return exitStatus(exitError)
		}
		return nil
	}
}

// markRead marks an answer read, as request --wait does; a failure is
// only reported.
func (a *app) markRead(id string) {
	ctx, cancel := a.ctx()
	defer cancel()
	if _, err := a.client().MarkRead(ctx, id); err != nil {
		fmt.Fprintf(a.Stderr, "warning: mark %s read: %v\n", printable(id, false), err)
	}
}

// runRequestAny checks the flags of request --any and runs it.
func (a *app) runRequestAny(pos []string, anyone bool, intent string, acceptTimeout time.Duration, params *jsonFlag,
	replyTo string, wait bool, timeout time.Duration, strict bool) error {
	switch {
	case !anyone:
		return a.usageErrorf("--intent goes with --any; to ask one peer: meshctl request PEER INTENT")
	case strict:
		return a.usageErrorf("--strict does not apply to --any: it asks only members whose card lists the intent")
	case intent != "" && len(pos) > 0, intent == "" && len(pos) != 1:
		return a.usageErrorf("with --any, give the intent once, as --intent INTENT, and no PEER")
	case acceptTimeout <= 0:
		return a.usageErrorf("--accept-timeout must be positive")
	case timeout != 0 && !wait:
		return a.usageErrorf("--timeout needs --wait")
	}
	if intent == "" {
		intent = pos[0]
	}
	if len(intent) > proto.MaxIntentLen || !utf8.ValidString(intent) {
		return a.usageErrorf("INTENT must be 1 to %d bytes of UTF-8", proto.MaxIntentLen)
	}
	p, err := a.jsonValue("params", params)
	if err != nil {
		return err
	}
	return a.requestAny(anyOpts{intent: intent, params: p, replyTo: replyTo, wait: wait, timeout: timeout, acceptTimeout: acceptTimeout})
}

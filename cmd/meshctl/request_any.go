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

// request --any: ask whoever can. meshd does the asking (POST
// /v1/request/any, see api.RequestAny); meshctl shows whom it asked and,
// with --wait, waits for the final answer of the member that took it.

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
// when deadline passes first (a zero deadline never passes).
func (p *eventPump) nextResponse(rid string, deadline time.Time) (it api.Item, ok bool, err error) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
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

func (a *app) requestAny(o anyOpts) error {
	// With --wait, the answers after the first come by the event
	// stream: open it before asking, so none slips past.
	var pump *eventPump
	if o.wait {
		events, err := a.client().OpenEvents(context.Background())
		if err != nil {
			return a.remoteErr(err)
		}
		pump = newEventPump(events)
		defer pump.close()
	}
	r, err := a.client().RequestAny(context.Background(), api.RequestAny{Intent: o.intent, Params: o.params, ReplyTo: o.replyTo,
		AcceptTimeoutSeconds: o.acceptTimeout.Seconds()})
	if err != nil {
		return a.remoteErr(err)
	}
	if !a.json {
		for _, t := range r.Tried {
			peer := partyName(t.Party)
			fmt.Fprintf(a.Stdout, "asked %s (%s): request %s\n", peer, t.Presence, printable(t.RequestID, false))
			switch t.Outcome {
			case "timed_out":
				fmt.Fprintf(a.Stdout, "%s: no answer within %v; asking the next\n", peer, o.acceptTimeout)
			case "rejected":
				fmt.Fprintf(a.Stdout, "%s: rejected; asking the next\n", peer)
			}
		}
	}
	if !r.Taken {
		if a.json {
			_ = a.printJSON(r)
		}
		return fmt.Errorf("no member took the request: %d asked", len(r.Tried))
	}
	return a.anyTaken(pump, r, o)
}

// anyTaken reports the member that took the request, and with --wait
// waits for its final answer.
func (a *app) anyTaken(pump *eventPump, r *api.AnyResult, o anyOpts) error {
	first := *r.Answer
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
		it, ok, err := pump.nextResponse(r.Request.RequestID, deadline)
		if err != nil {
			return a.remoteErr(err)
		}
		if !ok {
			if a.json {
				_ = a.printJSON(map[string]any{"request": r.Request, "peer": r.Peer, "tried": r.Tried, "timed_out": true})
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
	case acceptTimeout > api.MaxAcceptTimeout:
		return a.usageErrorf("--accept-timeout must be at most %v", api.MaxAcceptTimeout)
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

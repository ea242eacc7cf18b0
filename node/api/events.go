package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
)

// Event is one event of GET /v1/events: an inbox item as it is delivered,
// a note that the reader fell behind, or (on a stream that asked for them,
// see [EventStream.Attachments]) an item's attachments now present.
type Event struct {
	// Lagged reports that meshd dropped items for this reader because it
	// fell 256 items behind; read the inbox to catch up. Item is empty.
	Lagged bool
	// Ready, when set, is an "attachments" event; Item is empty.
	Ready *AttachmentsReady
	// Item is the delivered inbox item when Lagged is false and Ready nil.
	Item Item
}

// AttachmentsReady is the data of an "attachments" event: the attachments
// of inbox item ID once the fetch of some of them finished and their
// verified files are in place beside the mailbox file. Each present one
// has Path set; one still to fetch (on demand, or it failed) has none.
// An item may get more than one such event, the last listing the most.
type AttachmentsReady struct {
	Kind        string       `json:"kind"` // always "attachments"
	ID          string       `json:"id"`
	From        Party        `json:"from"`
	Attachments []Attachment `json:"attachments"`
}

// ReadyDelivered is a Delivered that announces an item's attachments
// present, not a new item: its Item has Kind "attachments", ID and From
// and Attachments only. Readers of new items skip it.
type ReadyDelivered interface {
	Delivered
	Ready() AttachmentsReady
}

// Delivered is an inbox item as meshd hands it to a reader of its
// deliveries (the event stream, the status page): Item renders it. The
// node's commit stage only queues it, so each reader renders on its own
// goroutine, and a reader that drops it never renders it.
type Delivered interface{ Item() Item }

// Rendered is a Delivered item rendered already.
type Rendered Item

// Item returns r.
func (r Rendered) Item() Item { return Item(r) }

// ErrEventsEnded reports that meshd ended the event stream: it stopped,
// or is restarting.
var ErrEventsEnded = errors.New("meshd ended the event stream")

// MaxEventSize bounds one event read from the stream: an item carries at
// most a 256 KiB body, params or result, which JSON escaping can make up
// to six times larger.
const MaxEventSize = 8 << 20

// EventStream is an open GET /v1/events stream. Read it with
// [EventStream.Next] from one goroutine; [EventStream.Close] may be
// called from any.
type EventStream struct {
	// Attachments makes Next return "attachments" events too (Event.Ready);
	// set it before the first Next. Without it they are skipped.
	Attachments bool

	ctx  context.Context
	body io.ReadCloser
	sc   *bufio.Scanner
	data bytes.Buffer // the data lines of the event being read
}

// OpenEvents calls GET /v1/events and returns the stream once meshd has
// answered, and so has registered this reader: every item delivered from
// then on is in the stream. The stream lasts until ctx ends or it is
// closed. It fails wrapping [ErrNoDaemon] when no meshd answers, or with
// a [*RemoteError].
func (c *Client) OpenEvents(ctx context.Context) (*EventStream, error) {
	return c.openEvents(ctx, "http://meshd/v1/events")
}

// OpenEventsPassive is [Client.OpenEvents] for a stream that does not
// count as the agent waiting on the inbox (GET /v1/events?passive=1):
// the MCP server's doorbell, which follows events while its host's
// model is at work.
func (c *Client) OpenEventsPassive(ctx context.Context) (*EventStream, error) {
	return c.openEvents(ctx, "http://meshd/v1/events?passive=1")
}

func (c *Client) openEvents(ctx context.Context, url string) (*EventStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		if _, serr := os.Stat(c.Socket); serr != nil || isRefused(err) {
			return nil, fmt.Errorf("%w (no control socket at %s)", ErrNoDaemon, c.Socket)
		}
		return nil, fmt.Errorf("control socket %s: %w", c.Socket, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("meshd answered %s", resp.Status)
		}
		return nil, &RemoteError{Status: resp.StatusCode, Msg: e.Error, Hint: e.Hint}
	}
	return newEventStream(ctx, resp.Body), nil
}

func newEventStream(ctx context.Context, body io.ReadCloser) *EventStream {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEventSize)
	return &EventStream{ctx: ctx, body: body, sc: sc}
}

// Next waits for the next event. It fails with [ErrEventsEnded] when meshd
// ends the stream, with the context's error when it ends, and with an
// error saying why when the stream breaks or an event does not parse.
// Events of types other than "item" and "lagged" ("attachments" too,
// unless s.Attachments is set) are skipped, so meshd may add some.
func (s *EventStream) Next() (Event, error) {
	var typ string
	s.data.Reset()
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if len(line) > 0 && line[0] == ':' {
			continue // a comment: the greeting and keepalives
		}
		if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				typ = string(value)
			case "data":
				if s.data.Len() > 0 {
					s.data.WriteByte('\n')
				}
				if s.data.Len()+len(value) > MaxEventSize {
					return Event{}, fmt.Errorf("event stream: event larger than %d bytes", MaxEventSize)
				}
				s.data.Write(value)
			}
			continue
		}
		// A blank line ends the event.
		switch {
		case typ == "lagged":
			return Event{Lagged: true}, nil
		case typ == "attachments" && s.Attachments && s.data.Len() > 0:
			r := new(AttachmentsReady)
			if err := json.Unmarshal(s.data.Bytes(), r); err != nil {
				return Event{}, fmt.Errorf("event stream: decode attachments: %w", err)
			}
			return Event{Ready: r}, nil
		case (typ == "item" || typ == "") && s.data.Len() > 0:
			var ev Event
			if err := json.Unmarshal(s.data.Bytes(), &ev.Item); err != nil {
				return Event{}, fmt.Errorf("event stream: decode item: %w", err)
			}
			return ev, nil
		}
		typ = ""
		s.data.Reset()
	}
	err := s.sc.Err()
	switch {
	case s.ctx.Err() != nil:
		return Event{}, s.ctx.Err()
	case err == nil, errors.Is(err, io.ErrUnexpectedEOF):
		// Ended cleanly, or cut by a meshd closing its connections.
		return Event{}, ErrEventsEnded
	case errors.Is(err, bufio.ErrTooLong):
		return Event{}, fmt.Errorf("event stream: line longer than %d bytes", MaxEventSize)
	}
	return Event{}, fmt.Errorf("event stream: %w", err)
}

// Close ends the stream; a Next blocked in another goroutine returns.
func (s *EventStream) Close() error { return s.body.Close() }

// Events opens GET /v1/events and yields its events as they arrive, until
// ctx ends or the loop stops. It yields an error and stops when the stream
// cannot be opened or fails (see [Client.OpenEvents] and
// [EventStream.Next]); when ctx ends it stops without one.
func (c *Client) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		s, err := c.OpenEvents(ctx)
		if err != nil {
			if ctx.Err() == nil {
				yield(Event{}, err)
			}
			return
		}
		defer s.Close()
		for {
			ev, err := s.Next()
			if err != nil {
				if ctx.Err() == nil {
					yield(Event{}, err)
				}
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

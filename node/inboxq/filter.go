package inboxq

import (
	"strings"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// Match turns an API inbox filter into the store's: a match on the
// envelope's metadata (nil when the filter keeps every item) and a lower
// bound on the delivery time. A filter naming an unknown member or
// channel, or a kind that no item has, is refused.
func (q *Queries) Match(f api.InboxFilter) (func(*history.Meta) bool, time.Time, error) {
	since, err := api.ParseSince(f.Since, time.Now())
	if err != nil {
		return nil, time.Time{}, apierr.BadRequest("%v", err)
	}
	var tests []func(*history.Meta) bool
	if strings.TrimPrefix(strings.TrimSpace(f.From), "@") != "" {
		m, err := q.host.ResolvePeer(f.From)
		if err != nil {
			return nil, time.Time{}, err
		}
		tests = append(tests, func(x *history.Meta) bool { return x.From.Equal(m.Key) })
	}
	self := q.cfg.Self
	switch k := strings.TrimSpace(f.Kind); k {
	case "":
	case api.KindDeliveryFailed:
		tests = append(tests, func(x *history.Meta) bool { return x.From.Equal(self) })
	case "message", "request", "response":
		kind := map[string]proto.Kind{"message": proto.KindMessage, "request": proto.KindRequest, "response": proto.KindResponse}[k]
		tests = append(tests, func(x *history.Meta) bool { return x.Kind == kind && !x.From.Equal(self) })
	default:
		q.host.Count(FilterRefused)
		return nil, time.Time{}, apierr.BadRequest("kind %q: want message, request, response or delivery_failed", k)
	}
	switch c := strings.TrimSpace(f.Channel); c {
	case "":
	case "@":
		tests = append(tests, func(x *history.Meta) bool { return x.To.Kind == proto.DestPeer })
	default:
		p, err := q.host.ResolveChannel(c)
		if err != nil {
			q.host.Count(FilterRefused)
			return nil, time.Time{}, err
		}
		id := p.ID
		tests = append(tests, func(x *history.Meta) bool { return x.To.Kind == proto.DestChannel && x.To.Channel == id })
	}
	if len(tests) == 0 {
		return nil, since, nil
	}
	return func(x *history.Meta) bool {
		for _, t := range tests {
			if !t(x) {
				return false
			}
		}
		return true
	}, since, nil
}

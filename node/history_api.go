package node

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/meshd/meshd/node/api"
)

// ---- control endpoints ----

// registerHistory adds the history control endpoints.
func (c *controlServer) registerHistory() {
	c.mux.HandleFunc("GET /v1/history", c.getHistory)
	c.mux.HandleFunc("GET /v1/sequence", c.getSequence)
}

func (c *controlServer) getHistory(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	name := q.Get("channel")
	if name == "" {
		writeErr(w, http.StatusBadRequest, errors.New("channel is required"), "list channels with: meshctl channel list")
		return
	}
	since, err := api.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		writeErr(w, http.StatusBadRequest, err, "")
		return
	}
	limit := api.DefaultHistoryLimit
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > api.MaxHistoryLimit {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number from 1 to %d", s, api.MaxHistoryLimit), "")
			return
		}
		if v > 0 {
			limit = v
		}
	}
	out, err := c.n.History(name, since, limit)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// History lists the newest limit messages of a channel in our store sent
// at or after since (zero: no bound), oldest first.
func (n *Node) History(name string, since time.Time, limit int) (*api.History, error) {
	p, err := n.resolveChannel(name)
	if err != nil {
		return nil, err
	}
	stored, err := n.store.ChannelMessages(p.ID, since, limit)
	if err != nil {
		return nil, err
	}
	out := &api.History{Channel: p.Name, ChannelID: p.ID.String(), Messages: make([]api.HistoryMessage, 0, len(stored))}
	if st, err := n.store.Stats(); err == nil {
		out.Stored = st.Channels[p.ID]
	}
	for i := range stored {
		m := &stored[i]
		x := api.HistoryMessage{
			ID:          m.ID.String(),
			From:        n.party(m.From),
			Channel:     p.Name,
			Sent:        m.Time().UTC(),
			Received:    m.Received.UTC(),
			Epoch:       m.Epoch.String(),
			Seq:         m.Seq,
			FromHistory: m.FromHistory,
			Size:        m.Size,
		}
		se, err := m.Envelope()
		if err != nil {
			n.log.Warn("stored envelope unreadable", "id", m.ID, "err", err)
			continue
		}
		if se.Message != nil {
			x.Body = se.Message.Body
			if se.Message.InReplyTo != nil {
				x.InReplyTo = se.Message.InReplyTo.String()
			}
		}
		out.Messages = append(out.Messages, x)
	}
	return out, nil
}

func (c *controlServer) getSequence(w http.ResponseWriter, _ *http.Request) {
	n := c.n
	out := api.Sequence{Epoch: n.counter.Epoch().String(), NewEpoch: n.counter.Fresh(), Last: []api.SequenceEntry{}}
	for d, last := range n.counter.Snapshot() {
		out.Last = append(out.Last, api.SequenceEntry{To: n.destText(d), Last: last})
	}
	slices.SortFunc(out.Last, func(a, b api.SequenceEntry) int { return cmp.Compare(a.To, b.To) })
	writeJSON(w, http.StatusOK, out)
}

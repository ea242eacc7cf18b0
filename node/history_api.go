package node

import (
	"cmp"
	"slices"
	"time"

	"github.com/meshd/meshd/node/api"
)

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

// Sequence returns our sender epoch and the last sequence number used
// per destination.
func (n *Node) Sequence() api.Sequence {
	out := api.Sequence{Epoch: n.out.Counter().Epoch().String(), NewEpoch: n.out.Counter().Fresh(), Last: []api.SequenceEntry{}}
	for d, last := range n.out.Counter().Snapshot() {
		out.Last = append(out.Last, api.SequenceEntry{To: n.destText(d), Last: last})
	}
	slices.SortFunc(out.Last, func(a, b api.SequenceEntry) int { return cmp.Compare(a.To, b.To) })
	return out
}

package ownpresence

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshd/meshd/internal/clockgrid"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
)

// Announcer announces this node's presence and keeps the presence table
// current. Create it with [New]; run [Announcer.Run].
type Announcer struct {
	host  Host
	cfg   Config
	log   *slog.Logger
	table *presence.Table     // shared with the receive pipeline
	pub   *presence.Publisher // numbers our announcements
	act   *activity
}

// New returns an announcer over table, counting the agent's activity from
// now.
func New(host Host, cfg Config, table *presence.Table, log *slog.Logger) *Announcer {
	return &Announcer{host: host, cfg: cfg, log: log, table: table, pub: presence.NewPublisher(0),
		act: newActivity(cfg.PresenceAwayAfter, cfg.PresenceOfflineAfter, time.Now())}
}

// Table is the presence table the announcer keeps: our peers' presence,
// touched by the node's receive pipeline and aged out by Run.
func (s *Announcer) Table() *presence.Table { return s.table }

// Run refreshes our own presence every third of the TTL, so peers never
// see us silent, follows the agent's activity, and ages out peers that
// went quiet, until ctx ends.
func (s *Announcer) Run(ctx context.Context) {
	s.refresh()
	refresh := s.cfg.PresenceTTL / 3
	check := min(s.cfg.PresenceTTL/4, 2*time.Second)
	// Refreshes fall on multiples of the period on the clock, so that a
	// node receives its peers' refreshes together (see the node's
	// exchangeLoop).
	rt := time.NewTimer(clockgrid.Next(time.Now(), refresh))
	// Checks too, so that they share the wake-ups of the node's other
	// idle timers (keepalives, outbox scans), not wake it at the phase
	// of its start.
	ct := time.NewTimer(clockgrid.Next(time.Now(), check))
	defer rt.Stop()
	defer ct.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rt.C:
			rt.Reset(clockgrid.Next(time.Now(), refresh))
			s.refresh()
		case <-s.act.kick:
			s.follow(time.Now())
		case now := <-ct.C:
			ct.Reset(clockgrid.Next(now, check))
			s.follow(now)
			for _, k := range s.table.Expire(now) {
				s.host.Count(Expired)
				s.log.Info("peer offline: silent longer than presence ttl", "peer", k.Fingerprint(), "ttl", s.cfg.PresenceTTL)
			}
		}
	}
}

// follow announces the state the agent's activity gives, if it is not
// the one announced last.
func (s *Announcer) follow(now time.Time) {
	s.act.publishing.Lock()
	defer s.act.publishing.Unlock()
	st := s.act.state(now)
	if st.State == s.pub.Current().State && st.Note == s.act.lastNote() {
		return
	}
	if st.State != s.pub.Current().State {
		s.host.Changed(st.State)
		s.log.Debug("presence follows the agent", "state", st.State.String(), "source", st.Source, "why", st.Reason)
	}
	s.publish(st.State, st.Note)
}

// refresh announces the current state again.
func (s *Announcer) refresh() {
	s.act.publishing.Lock()
	defer s.act.publishing.Unlock()
	st := s.act.state(time.Now())
	s.publish(st.State, st.Note)
}

// envelope signs an announcement of state, with note.
func (s *Announcer) envelope(state proto.PresenceState, note string) (*proto.SignedEnvelope, error) {
	p := s.pub.Next(state, time.Now())
	p.Note = note
	return s.host.Sign(proto.ToOrg(s.host.Roster().Org), proto.KindPresence, Lifetime(s.cfg.PresenceTTL, s.cfg.MaxTTL), func(e *proto.Envelope) {
		e.Presence = &p
	})
}

// Lifetime is the ttl_secs of our Presence envelopes: our presence_ttl,
// in whole seconds (rounded up, at least 1, at most maxTTL, the dedupe
// horizon), so receivers with a shorter presence_ttl wait as long as we
// do between refreshes (PROTOCOL.md §14.7).
func Lifetime(ttl, maxTTL time.Duration) time.Duration {
	secs := (ttl + time.Second - 1) / time.Second
	return min(max(secs, 1), maxTTL/time.Second) * time.Second
}

// publish announces state, and note if any, to every linked peer and
// records it in our own table; the caller holds s.act.publishing.
func (s *Announcer) publish(state proto.PresenceState, note string) {
	ses, err := s.Envelopes(state, note)
	if err != nil {
		s.log.Error("presence", "err", err)
		return
	}
	s.table.Observe(s.host.Self(), *ses[len(ses)-1].Presence, time.Now())
	s.act.published(note)
	for _, pl := range s.host.Links() {
		s.sendFrames(pl, ses)
	}
	s.host.Count(Sent)
}

// Envelopes signs the announcements of state (PROTOCOL.md §14.7): one
// without a note, which every node takes, and, when there is a note, one
// with it and the next seq, sent in a presence-note frame, which older
// nodes ignore and newer ones take in place of the first.
func (s *Announcer) Envelopes(state proto.PresenceState, note string) ([]*proto.SignedEnvelope, error) {
	se, err := s.envelope(state, "")
	if err != nil || note == "" {
		return []*proto.SignedEnvelope{se}, err
	}
	noted, err := s.envelope(state, note)
	if err != nil {
		return nil, err
	}
	return []*proto.SignedEnvelope{se, noted}, nil
}

func (s *Announcer) sendFrames(pl *peers.Link, ses []*proto.SignedEnvelope) {
	s.host.SendFrame(pl, proto.FrameEnvelope, ses[0].Raw)
	for _, se := range ses[1:] {
		s.host.SendFrame(pl, proto.FramePresenceNote, se.Raw)
	}
}

// SendTo tells one new peer our current state.
func (s *Announcer) SendTo(pl *peers.Link) {
	s.act.publishing.Lock()
	defer s.act.publishing.Unlock()
	cur := s.pub.Current()
	if cur.State == 0 {
		return
	}
	ses, err := s.Envelopes(cur.State, s.act.lastNote())
	if err != nil {
		return
	}
	s.sendFrames(pl, ses)
}

// AnnounceOffline says Offline to the given links (graceful shutdown). A
// nil announcer (a node whose start failed) says nothing.
func (s *Announcer) AnnounceOffline(links []*peers.Link) {
	if s == nil {
		return
	}
	se, err := s.envelope(proto.Offline, "")
	if err != nil {
		return
	}
	s.act.published("")
	for _, pl := range links {
		s.host.SendFrame(pl, proto.FrameEnvelope, se.Raw)
	}
}

package syncer

import "github.com/meshd/meshd/proto"

// Idle reports whether no round is due, no request of ours awaits an
// answer and no join is left to backfill.
func (s *Syncer) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.due) == 0 && len(s.pending) == 0 && len(s.joins) == 0
}

// Serving returns how many requests of peer k are being served.
func (s *Syncer) Serving(k proto.PubKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.serving[k]; b != nil {
		return b.inflight
	}
	return 0
}

// ResumeFrom keeps req as where paging with peer stopped in its channel:
// the next round with peer sends req instead of a fresh request.
func (s *Syncer) ResumeFrom(peer proto.PubKey, req *proto.HistoryRequest) { s.saveCursor(peer, req) }

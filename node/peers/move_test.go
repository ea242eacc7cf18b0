package peers

import (
	"testing"
	"time"
)

// TestMoveRuleScope: the agreement decides only a pair of one Unix and
// one TCP link, keeps the Unix one, and is used once.
func TestMoveRuleScope(t *testing.T) {
	now := time.Now()
	p := &Peer{}
	if _, ok := MovedLocked(p, "tcp", "unix", now); ok {
		t.Fatal("no agreement, yet the rule decided")
	}
	p.Move.Agreed = now.Add(time.Second)
	if _, ok := MovedLocked(p, "tcp", "tcp", now); ok {
		t.Fatal("the rule decided between two TCP links")
	}
	if _, ok := MovedLocked(p, "unix", "unix", now); ok {
		t.Fatal("the rule decided between two Unix links")
	}
	if keepNew, ok := MovedLocked(p, "tcp", "unix", now); !ok || !keepNew {
		t.Fatal("the new Unix link lost")
	}
	if _, ok := MovedLocked(p, "unix", "tcp", now); ok {
		t.Fatal("the agreement was used twice")
	}
	p.Move.Agreed = now.Add(time.Second)
	if keepNew, ok := MovedLocked(p, "unix", "tcp", now); !ok || keepNew {
		t.Fatal("the registered Unix link lost")
	}
	p.Move.Agreed = now.Add(-time.Second)
	if _, ok := MovedLocked(p, "unix", "tcp", now); ok {
		t.Fatal("an expired agreement decided")
	}
}

package rostergossip

import (
	"sync"

	"github.com/meshd/meshd/roster"
)

// nameIndexCache holds the name index of the current roster, rebuilt
// when the roster changes, so displays can tell a unique name from one
// another member's resembles without comparing every pair each time.
type nameIndexCache struct {
	mu sync.Mutex // guards the fields below
	r  *roster.Roster
	ix roster.NameIndex
}

// of returns the name index of r.
func (c *nameIndexCache) of(r *roster.Roster) roster.NameIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r != r {
		c.r, c.ix = r, r.Names()
	}
	return c.ix
}

// NameIndex returns the name index of r (the current roster, as a
// caller read it), built once per roster: it tells a unique name from one
// another member's resembles.
func (k *Keeper) NameIndex(r *roster.Roster) roster.NameIndex { return k.names.of(r) }

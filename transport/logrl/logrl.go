// Package logrl rate-limits repetitive log lines, the transport's and the
// node's. A peer that sends a flood of bad input must not be able to flood
// the log: the first line of each kind (a key, usually peer and reason) is
// logged, later ones within the interval are counted, and the next line
// logged for that key carries the count of lines suppressed since. All
// keys together write at most a budget of lines per interval; lines past
// it go to one shared overflow key, whose count then covers lines of many
// keys.
package logrl

import (
	"sync"
	"time"
)

// DefaultInterval is how often one key may log. Ten seconds keeps a
// flood to six lines a minute per kind while a new kind of trouble still
// shows at once.
const DefaultInterval = 10 * time.Second

// DefaultMaxKeys bounds the keys a [Limiter] tracks. Past it, keys that
// have not logged within the interval are forgotten, and if none can be,
// new keys share one overflow key: a peer that varies its key (many
// source addresses, say) gets no more lines than one key would.
const DefaultMaxKeys = 4096

// DefaultBudget bounds the lines all keys together may write per
// interval; past it, lines count against the overflow key. It caps what
// a peer that varies its key (a flood from many addresses) can write:
// 100 lines per 10 s.
const DefaultBudget = 100

// overflowKey is shared by every key that finds the table full, or the
// budget spent.
const overflowKey = "\x00overflow"

// Limiter decides which log lines to write. The zero value is not ready;
// use [New]. It is safe for concurrent use.
type Limiter struct {
	interval time.Duration
	maxKeys  int
	budget   int

	mu          sync.Mutex // guards the fields below
	keys        map[string]*entry
	windowStart time.Time // start of the current budget window
	windowLines int       // lines written in it
}

type entry struct {
	last       time.Time // when a line was last written for the key
	suppressed uint64    // lines not written since
}

// New returns a Limiter that lets each key log once per interval, for at
// most maxKeys keys. Zero values take the defaults.
func New(interval time.Duration, maxKeys int) *Limiter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Limiter{interval: interval, maxKeys: maxKeys, budget: DefaultBudget, keys: map[string]*entry{}}
}

// Allow reports whether a line for key may be written at now, and if so
// how many lines for key were suppressed since the last one written (the
// caller adds it to the line). Otherwise the line is counted.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.windowStart) >= l.interval {
		l.windowStart, l.windowLines = now, 0
	}
	e := l.keys[key]
	if l.windowLines >= l.budget && key != overflowKey && (e == nil || now.Sub(e.last) >= l.interval) {
		// This line would be written, but the budget is spent: it counts
		// against the overflow key, which writes once per interval.
		if e != nil {
			e.suppressed++
		}
		key, e = overflowKey, l.keys[overflowKey]
		if e == nil {
			e = &entry{last: now}
			l.keys[key] = e
			return true, 0
		}
	}
	if e == nil {
		if len(l.keys) >= l.maxKeys {
			l.pruneLocked(now)
		}
		if len(l.keys) >= l.maxKeys {
			key = overflowKey
			e = l.keys[key]
		}
		if e == nil {
			e = &entry{}
			l.keys[key] = e
			e.last = now
			l.windowLines++
			return true, 0
		}
	}
	if now.Sub(e.last) < l.interval {
		e.suppressed++
		return false, 0
	}
	suppressed = e.suppressed
	e.last, e.suppressed = now, 0
	l.windowLines++
	return true, suppressed
}

// pruneLocked forgets keys that could log again and have nothing
// suppressed: forgetting them loses no count.
func (l *Limiter) pruneLocked(now time.Time) {
	for k, e := range l.keys {
		if k != overflowKey && e.suppressed == 0 && now.Sub(e.last) >= l.interval {
			delete(l.keys, k)
		}
	}
}

package channel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/uuid"
	"github.com/meshd/meshd/internal/fsutil"
)

// SubState is a node's local interest in a channel. It never travels: a
// reader stores a channel's envelopes in history whatever its state, and
// the state only decides what reaches the inbox and the mailbox.
type SubState uint8

// The subscription states. The numbers are stable, never renumber.
const (
	// Unsubscribed: history only; nothing reaches the inbox.
	Unsubscribed SubState = 0
	// Subscribed: delivered to the inbox at normal priority, and wakes.
	Subscribed SubState = 1
	// Muted: delivered at low priority, and does not wake.
	Muted SubState = 2
)

var subStateNames = [...]string{"unsubscribed", "subscribed", "muted"}

// Valid reports whether s is one of the three states.
func (s SubState) Valid() bool { return int(s) < len(subStateNames) }

// String returns the lowercase name of the state.
func (s SubState) String() string {
	if s.Valid() {
		return subStateNames[s]
	}
	return fmt.Sprintf("substate(%d)", uint8(s))
}

// ParseSubState parses a lowercase state name.
func ParseSubState(s string) (SubState, error) {
	for i, n := range subStateNames {
		if n == s {
			return SubState(i), nil
		}
	}
	return 0, fmt.Errorf("unknown subscription state %q (want unsubscribed, subscribed or muted)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (s SubState) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("unknown subscription state %d", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *SubState) UnmarshalText(b []byte) error {
	v, err := ParseSubState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Subscriptions is the node's subscription state per channel, persisted
// to a JSON file after every change. It is safe for concurrent use.
//
// The file holds {"channels": {"<channel id>": "subscribed" | "muted"}};
// channels not listed are unsubscribed. It is replaced atomically
// (temporary file, fsync, rename, fsync of the directory), mode 0600.
type Subscriptions struct {
	path string

	mu    sync.Mutex             // guards state and serializes writes of the file
	state map[uuid.UUID]SubState // guarded by mu; never holds Unsubscribed
}

type subsFile struct {
	Channels map[uuid.UUID]SubState `json:"channels"`
}

// OpenSubscriptions reads the subscription file at path. A missing file
// means no subscriptions; it is created on the first [Subscriptions.Set].
func OpenSubscriptions(path string) (*Subscriptions, error) {
	s := &Subscriptions{path: path, state: map[uuid.UUID]SubState{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open subscriptions: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f subsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("open subscriptions %s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("open subscriptions %s: data after the object", path)
	}
	for id, st := range f.Channels {
		if id == uuid.Nil {
			return nil, fmt.Errorf("open subscriptions %s: nil channel id", path)
		}
		if st != Unsubscribed {
			s.state[id] = st
		}
	}
	return s, nil
}

// Path returns the file the subscriptions are saved to.
func (s *Subscriptions) Path() string { return s.path }

// Get returns the state of channel id: Unsubscribed unless set otherwise.
func (s *Subscriptions) Get(id uuid.UUID) SubState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state[id]
}

// Set sets the state of channel id and saves the file before returning.
// If saving fails, the state is left as it was.
func (s *Subscriptions) Set(id uuid.UUID, st SubState) error {
	if !st.Valid() {
		return fmt.Errorf("set subscription of %s: unknown state %d", id, uint8(st))
	}
	if id == uuid.Nil {
		return fmt.Errorf("set subscription: nil channel id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[id] == st {
		return nil
	}
	next := maps.Clone(s.state)
	if st == Unsubscribed {
		delete(next, id)
	} else {
		next[id] = st
	}
	if err := s.writeLocked(next); err != nil {
		return fmt.Errorf("set subscription of %s to %s: %w", id, st, err)
	}
	s.state = next
	return nil
}

// All returns a copy of every channel's state that is not Unsubscribed.
func (s *Subscriptions) All() map[uuid.UUID]SubState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.state)
}

// writeLocked saves state to the file. s.mu must be held.
func (s *Subscriptions) writeLocked(state map[uuid.UUID]SubState) error {
	b, err := json.MarshalIndent(subsFile{Channels: state}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(s.path, b, 0o600); err != nil {
		return err
	}
	return fsutil.SyncDir(dir)
}

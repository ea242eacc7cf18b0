package proto

import "github.com/google/uuid"

// NewEpoch returns a fresh random sender epoch. A sender starts a new epoch
// whenever it cannot prove it remembers its counters (new install, lost
// store), so receivers reset gap tracking instead of seeing a replay.
func NewEpoch() uuid.UUID { return uuid.New() }

// NewID returns a new envelope or request id (UUID v7: time-ordered).
func NewID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

package proto

import (
	"testing"

	"github.com/google/uuid"
)

func TestNewIDs(t *testing.T) {
	a, b := NewID(), NewID()
	if a == b || a.Version() != 7 || a.Variant() != uuid.RFC4122 {
		t.Fatalf("NewID: %s %s", a, b)
	}
	e := NewEpoch()
	if e == NewEpoch() || e.Version() != 4 {
		t.Fatalf("NewEpoch: %s", e)
	}
}

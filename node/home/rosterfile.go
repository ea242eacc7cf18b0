package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// LoadRoster reads and parses the home's roster. If there is none, the
// error wraps fs.ErrNotExist (os.ErrNotExist). Parsing verifies every
// signature but does not judge authority: the roster in the home is the
// node's trust anchor, accepted when it was installed.
func (h Home) LoadRoster() (*roster.Roster, error) {
	r, err := ReadRoster(h.RosterPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no roster at %s (create one with `meshctl roster init --org ORG`, or get one from an admin): %w",
			h.RosterPath(), fs.ErrNotExist)
	}
	return r, err
}

// SaveRoster writes r as the home's roster, atomically.
func (h Home) SaveRoster(r *roster.Roster) error {
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return fmt.Errorf("save roster: %w", err)
	}
	return WriteRoster(h.RosterPath(), r)
}

// ReadRoster reads and parses a roster file of at most [proto.MaxDocSize]
// bytes.
func ReadRoster(path string) (*roster.Roster, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read roster: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, proto.MaxDocSize+1))
	if err != nil {
		return nil, fmt.Errorf("read roster %s: %w", path, err)
	}
	r, err := roster.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteRoster writes r's wire form to path atomically (mode 0644: a
// roster is public).
func WriteRoster(path string, r *roster.Roster) error {
	b, err := r.Encode()
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b, 0o644)
}

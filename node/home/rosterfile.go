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
//
// A roster file that does not parse or whose signatures do not verify
// fails with an error wrapping [ErrBadRoster] that names the file and the
// fix.
func (h Home) LoadRoster() (*roster.Roster, error) {
	r, err := ReadRoster(h.RosterPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no roster at %s (create one with `meshctl roster init --org ORG`, or get one from an admin): %w",
			h.RosterPath(), fs.ErrNotExist)
	}
	var pe *parseError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%w: %s is damaged (%w): start meshd once with --roster FILE, a copy of the org's current roster "+
			"(from an admin, or another node's roster.cbor), which replaces it", ErrBadRoster, h.RosterPath(), pe.err)
	}
	return r, err
}

// ErrBadRoster: the home's roster file does not parse or its signatures do
// not verify.
var ErrBadRoster = errors.New("bad roster file")

// parseError marks a roster file that was read but does not parse.
type parseError struct {
	path string
	err  error
}

func (e *parseError) Error() string { return fmt.Sprintf("%s: %v", e.path, e.err) }
func (e *parseError) Unwrap() error { return e.err }

// Is makes a roster file that does not parse match [ErrBadRoster].
func (e *parseError) Is(target error) bool { return target == ErrBadRoster }

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
		return nil, &parseError{path: path, err: err}
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

package channel

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
)

// policyExt is the file name extension of a saved policy.
const policyExt = ".cbor"

// tempPrefix starts the name of every temporary file this package
// writes, so leftovers of a crash can be recognised and removed.
const tempPrefix = fsutil.TempPrefix

// Save writes every policy held to dir as <channel id>.cbor (the signed
// wire form), each atomically: a temporary file, fsync, rename, and one
// fsync of the directory at the end. Files that already hold the right
// bytes are left alone. Files of channels the set no longer holds are
// removed, as are temporary policy files left by a crash; other files are
// left alone. dir is created (mode 0700) if needed.
func (s *Set) Save(dir string) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save channel policies: %w", err)
	}
	held := map[string]bool{}
	dirty := false
	for _, p := range s.snapshot() {
		name := p.ID.String() + policyExt
		held[name] = true
		b, err := p.Encode()
		if err != nil {
			return fmt.Errorf("save channel policies: %w", err)
		}
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := fsutil.WriteAtomic(path, b, 0o600); err != nil {
			return fmt.Errorf("save %s: %w", p, err)
		}
		dirty = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("save channel policies: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if held[n] || !(isPolicyFile(n) || isPolicyTemp(n)) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("save channel policies: %w", err)
		}
		dirty = true
	}
	if dirty {
		if err := fsutil.SyncDir(dir); err != nil {
			return fmt.Errorf("save channel policies: %w", err)
		}
	}
	return nil
}

// Load adds the policies saved in dir by [Set.Save]. A missing dir is an
// empty one. Each file is parsed as strictly as a policy from a peer
// (every signature must verify) and must be named after its channel id,
// and name conflicts are settled by the rules of [Set]. Authority is not
// checked, since no roster is given: call [Set.Revalidate] with the
// current roster afterwards. A file that fails is skipped, the others are
// loaded, and the error names every file that failed.
func (s *Set) Load(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load channel policies: %w", err)
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !isPolicyFile(n) {
			continue
		}
		path := filepath.Join(dir, n)
		p, err := loadFile(path, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.mu.Lock()
		o, err := s.addLocked(p)
		s.mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("load %s: %w", path, err))
		case o.Dropped != nil:
			errs = append(errs, fmt.Errorf("load %s: %w: dropped %s (id %s), its name is claimed by channel %s, created first",
				path, ErrNameTaken, o.Dropped, o.Dropped.ID, p.ID))
		}
	}
	return errors.Join(errs...)
}

func loadFile(path, name string) (*Policy, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if fi.Size() > proto.MaxDocSize {
		return nil, fmt.Errorf("load %s: %d bytes exceeds %d", path, fi.Size(), proto.MaxDocSize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if want := p.ID.String() + policyExt; name != want {
		return nil, fmt.Errorf("load %s: holds channel %s", path, p.ID)
	}
	return p, nil
}

// isPolicyFile reports whether name is "<canonical uuid>.cbor".
func isPolicyFile(name string) bool {
	base, ok := strings.CutSuffix(name, policyExt)
	if !ok {
		return false
	}
	id, err := uuid.Parse(base)
	return err == nil && id.String() == base
}

// isPolicyTemp reports whether name is a temporary file that fsutil.WriteAtomic
// made for a policy file: ".tmp-<canonical uuid>.cbor.<random>".
func isPolicyTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return false
	}
	base, _, ok := strings.Cut(rest, policyExt+".")
	return ok && isPolicyFile(base+policyExt)
}

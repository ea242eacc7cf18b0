package peers

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"slices"
	"sync"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// maxFormerMembers bounds the keys remembered as removed members.
const maxFormerMembers = 4096

// FormerMembersFile lists, one key per line, members removed by roster
// updates this node applied: the peers that get the roster when refused.
const FormerMembersFile = "former-members"

// FormerMembers holds the members removed by roster updates this node
// applied, kept in a file of the home so that it outlives a restart. It
// is safe for concurrent use.
type FormerMembers struct {
	path string
	mu   sync.Mutex // guards keys and the file
	keys map[proto.PubKey]bool
}

// LoadFormerMembers reads the file at path. A missing file is an empty
// set; a damaged line is skipped; a file that cannot be read leaves the
// set empty and is returned as the error (the set only decides whom we
// tell).
func LoadFormerMembers(path string) (*FormerMembers, error) {
	f := &FormerMembers{path: path, keys: map[proto.PubKey]bool{}}
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return f, nil
		}
		return f, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() && len(f.keys) < maxFormerMembers {
		if k, err := proto.ParsePubKey(string(bytes.TrimSpace(sc.Bytes()))); err == nil {
			f.keys[k] = true
		}
	}
	return f, nil
}

// Has reports whether k was removed from the roster by an update this
// node applied. A nil set holds no one.
func (f *FormerMembers) Has(k proto.PubKey) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[k]
}

// NoteRemoved remembers the members of cur that next drops, forgets
// those next adds back, and writes the file when that changed anything.
func (f *FormerMembers) NoteRemoved(cur, next *roster.Roster) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	for _, m := range cur.Members {
		if _, ok := next.Member(m.Key); !ok && !f.keys[m.Key] && len(f.keys) < maxFormerMembers {
			f.keys[m.Key] = true
			changed = true
		}
	}
	for _, m := range next.Members {
		if f.keys[m.Key] {
			delete(f.keys, m.Key) // added back
			changed = true
		}
	}
	if !changed {
		return nil
	}
	lines := make([]string, 0, len(f.keys))
	for k := range f.keys {
		lines = append(lines, k.String())
	}
	slices.Sort(lines)
	var buf bytes.Buffer
	for _, s := range lines {
		buf.WriteString(s)
		buf.WriteByte('\n')
	}
	return fsutil.WriteAtomic(f.path, buf.Bytes(), 0o600)
}

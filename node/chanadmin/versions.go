package chanadmin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
)

// maxVersionsKept bounds the versions remembered per channel: the oldest
// go first.
const maxVersionsKept = 64

// policyVersion is what meshctl channel show lists of one version.
type policyVersion struct {
	Version   uint64         `json:"version"`
	Timestamp int64          `json:"timestamp"`
	Signers   []proto.PubKey `json:"signers"`
	ReadText  []string       `json:"readers"`
	WriteText []string       `json:"writers"`
	History   bool           `json:"allow_history_fetch"`
	Hours     uint32         `json:"retention_hours"`
	Messages  uint32         `json:"retention_messages"`
	Deleted   bool           `json:"deleted,omitempty"`
	Accepted  time.Time      `json:"accepted"`
}

// chanVersions remembers the policy versions this node accepted, per
// channel, in <home>/channel-versions.json. A node keeps one policy per
// channel (PROTOCOL.md §11.3); this is only the record that meshctl
// channel show prints. Versions that passed while the node was away are
// not in it.
type chanVersions struct {
	path string
	mu   sync.Mutex
	m    map[uuid.UUID][]policyVersion // guarded by mu
}

func openChanVersions(path string) (*chanVersions, error) {
	c := &chanVersions{path: path, m: map[uuid.UUID][]policyVersion{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("channel versions: %w", err)
	}
	if err := json.Unmarshal(b, &c.m); err != nil {
		// A record, not state: start again rather than refuse to start.
		return &chanVersions{path: path, m: map[uuid.UUID][]policyVersion{}}, fmt.Errorf("channel versions %s: %w", path, err)
	}
	return c, nil
}

// add records p unless its version is held already.
func (c *chanVersions) add(p *channel.Policy) {
	v := policyVersion{Version: p.Version, Timestamp: p.Timestamp, Signers: p.Signers(), History: p.AllowHistory,
		Hours: p.RetentionHours, Messages: p.RetentionMessages, Deleted: p.Deleted(), Accepted: time.Now().UTC()}
	for _, x := range p.ReadACL {
		v.ReadText = append(v.ReadText, x.String())
	}
	for _, x := range p.WriteACL {
		v.WriteText = append(v.WriteText, x.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	vs := c.m[p.ID]
	for i := range vs {
		if vs[i].Version == p.Version {
			vs[i] = v // a winning concurrent edit of the same version
			return
		}
	}
	vs = append(vs, v)
	if len(vs) > maxVersionsKept {
		vs = vs[len(vs)-maxVersionsKept:]
	}
	c.m[p.ID] = vs
}

// seed records the held version of every channel that has no record
// (policies held before this record existed).
func (c *chanVersions) seed(ps []*channel.Policy) {
	for _, p := range ps {
		c.mu.Lock()
		_, ok := c.m[p.ID]
		c.mu.Unlock()
		if !ok {
			c.add(p)
		}
	}
}

// get returns the versions of channel id, oldest first.
func (c *chanVersions) get(id uuid.UUID) []policyVersion {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]policyVersion(nil), c.m[id]...)
}

// save writes the record; the lock is held throughout, so an older
// snapshot never overwrites a newer one.
func (c *chanVersions) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(c.m)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(c.path, b, 0o600)
}

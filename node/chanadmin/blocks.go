package chanadmin

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// maxBlocks bounds the block list; a roster holds at most as many members.
const maxBlocks = proto.MaxArrayElements

// blockList is the members this node blocks, a local decision that never
// travels: what they send is still verified, stored, acknowledged and
// served to peers' catch-up as before, so the member is not told and the
// mesh still relays it, but nothing of it reaches this node's inbox, its
// event stream or its mailbox. It is kept in <home>/blocks.json.
type blockList struct {
	path string
	mu   sync.RWMutex
	m    map[proto.PubKey]blockEntry // guarded by mu
}

type blockEntry struct {
	Key   proto.PubKey `json:"key"`
	Since time.Time    `json:"since"`
}

func openBlockList(path string) (*blockList, error) {
	b := &blockList{path: path, m: map[proto.PubKey]blockEntry{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("block list: %w", err)
	}
	var es []blockEntry
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, fmt.Errorf("block list %s: %w (fix the file, or remove it and block again: meshctl block MEMBER)", path, err)
	}
	for _, e := range es {
		if !e.Key.IsZero() {
			b.m[e.Key] = e
		}
	}
	return b, nil
}

// has reports whether k is blocked.
func (b *blockList) has(k proto.PubKey) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.m[k]
	return ok
}

// set blocks (on) or unblocks k, persisting the list; changed is false
// when k already was in that state.
func (b *blockList) set(k proto.PubKey, on bool) (changed bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[k]; ok == on {
		return false, nil
	}
	if on && len(b.m) >= maxBlocks {
		return false, fmt.Errorf("the block list holds %d members, its limit", maxBlocks)
	}
	old, had := b.m[k]
	if on {
		b.m[k] = blockEntry{Key: k, Since: time.Now().UTC().Truncate(time.Second)}
	} else {
		delete(b.m, k)
	}
	if err := b.saveLocked(); err != nil {
		if had {
			b.m[k] = old
		} else {
			delete(b.m, k)
		}
		return false, err
	}
	return true, nil
}

func (b *blockList) list() []blockEntry {
	b.mu.RLock()
	out := make([]blockEntry, 0, len(b.m))
	for _, e := range b.m {
		out = append(out, e)
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(x, y blockEntry) int { return cmp.Compare(x.Key.String(), y.Key.String()) })
	return out
}

func (b *blockList) saveLocked() error {
	es := make([]blockEntry, 0, len(b.m))
	for _, e := range b.m {
		es = append(es, e)
	}
	slices.SortFunc(es, func(x, y blockEntry) int { return cmp.Compare(x.Key.String(), y.Key.String()) })
	data, err := json.MarshalIndent(es, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteAtomic(b.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save block list: %w", err)
	}
	return nil
}

// Blocked reports whether this node blocks k.
func (a *Admin) Blocked(k proto.PubKey) bool { return a.blocks.has(k) }

// CarryBlock blocks next, a member's new key, when its previous key prev
// was blocked, so that a key rotation does not lift a block.
func (a *Admin) CarryBlock(prev, next proto.PubKey, label string) {
	if a.blocks.has(prev) && !a.blocks.has(next) {
		if _, err := a.blocks.set(next, true); err != nil {
			a.log.Warn("block a member's new key", "member", label, "err", err)
		}
	}
}

// Blocks lists the members this node blocks (GET /v1/blocks).
func (a *Admin) Blocks() api.Blocks {
	r := a.host.Roster()
	out := api.Blocks{Blocks: []api.Block{}}
	for _, e := range a.blocks.list() {
		bl := api.Block{Key: e.Key.String(), Fingerprint: e.Key.Fingerprint(), Since: e.Since}
		if m, ok := r.Member(e.Key); ok {
			bl.Name = m.Name
		}
		out.Blocks = append(out.Blocks, bl)
	}
	return out
}

// SetBlock blocks (on) or unblocks the member who (a key, fingerprint or
// roster name). Blocking this node itself is refused; a key that is not
// in the roster may be blocked by its full key, ahead of its joining.
func (a *Admin) SetBlock(who string, on bool) (api.Block, error) {
	k, err := a.blockKey(who)
	if err != nil {
		return api.Block{}, err
	}
	if k.Equal(a.host.Self()) {
		return api.Block{}, apierr.BadRequest("this node cannot block itself")
	}
	changed, err := a.blocks.set(k, on)
	if err != nil {
		return api.Block{}, apierr.New(http.StatusInternalServerError, "check the home directory's disk and permissions", "%w", err)
	}
	if !changed {
		state := "blocked"
		if !on {
			state = "not blocked"
		}
		return api.Block{}, apierr.BadRequest("%s is already %s", a.host.Roster().Label(k), state)
	}
	a.log.Info("block list changed", "member", k.Fingerprint(), "blocked", on)
	bl := api.Block{Key: k.String(), Fingerprint: k.Fingerprint(), Blocked: on}
	if m, ok := a.host.Roster().Member(k); ok {
		bl.Name = m.Name
	}
	if on {
		bl.Since = time.Now().UTC().Truncate(time.Second)
	}
	return bl, nil
}

// blockKey resolves who to a key: a roster member, or (to unblock a
// member who left, or block ahead of a join) a full key.
func (a *Admin) blockKey(who string) (proto.PubKey, error) {
	m, err := a.host.ResolvePeer(who)
	if err == nil {
		return m.Key, nil
	}
	if k, kerr := proto.ParsePubKey(strings.TrimPrefix(strings.TrimSpace(who), "@")); kerr == nil {
		return k, nil
	}
	return proto.PubKey{}, err
}

package rostergossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// ErrRefused wraps every reason a roster update is not applied.
var ErrRefused = errors.New("roster update refused")

// Keeper holds the current roster and applies its updates. Create it
// with [New], give it the roster to start with ([Keeper.Init]) and run
// [Keeper.Run]; it is safe for concurrent use.
type Keeper struct {
	host Host
	home home.Home
	log  *slog.Logger

	// cur is the current roster: set by Init, then replaced only by
	// Apply, with mu and the peers mutex held. Readers load it without
	// a lock.
	cur atomic.Pointer[roster.Roster]
	// mu serialises roster updates: the check against the current
	// version, the swap and the write of the roster file happen as one
	// step, so the file always holds the newest version applied.
	mu sync.Mutex

	rekey rekeyState

	names nameIndexCache // the name index of the roster last asked about (names.go)
}

// New returns a keeper of the roster of the node in h, with no roster
// yet.
func New(host Host, h home.Home, log *slog.Logger) *Keeper {
	return &Keeper{host: host, home: h, log: log, rekey: rekeyState{changed: make(chan struct{}, 1)}}
}

// Init sets the roster the node starts with.
func (k *Keeper) Init(r *roster.Roster) { k.cur.Store(r) }

// Current returns the current roster (nil before Init).
func (k *Keeper) Current() *roster.Roster { return k.cur.Load() }

// Push sends r to pl.
func (k *Keeper) Push(pl *peers.Link, r *roster.Roster) {
	b, err := r.Encode()
	if err != nil {
		k.log.Error("encode roster", "err", err)
		return
	}
	k.host.Count(Pushed)
	k.host.SendFrame(pl, proto.FrameRoster, b)
}

// HandleFrame takes a roster a peer pushed: a newer valid version is
// applied and gossiped on; an older one is answered with ours.
func (k *Keeper) HandleFrame(pl *peers.Link, payload []byte) {
	r, err := roster.Parse(payload)
	if err != nil {
		k.host.Count(Malformed)
		k.host.Refused(pl, "roster.malformed", err)
		return
	}
	cur := k.Current()
	if r.Org == cur.Org && r.Version == cur.Version {
		return // already have it
	}
	if r.Org == cur.Org && r.Version < cur.Version {
		// The peer is behind: bring it up to date.
		k.host.Count(Rollback)
		k.Push(pl, cur)
		return
	}
	if _, err := k.Apply(r, pl); err != nil {
		k.host.Refused(pl, "roster.rejected", err, "version", r.Version)
	}
}

// PublishRoster applies a roster handed in by the local operator (meshctl
// roster publish): it must be a valid update of the current roster. On
// success it is persisted and pushed to every linked peer at once. A
// refusal is an [*apierr.Error] with status 409 that wraps [ErrRefused].
func (k *Keeper) PublishRoster(b []byte) (*roster.Roster, error) {
	r, err := roster.Parse(b)
	if err != nil {
		k.host.Count(Malformed)
		return nil, refusal(fmt.Errorf("%w: %w", ErrRefused, err))
	}
	if r, err = k.Apply(r, nil); err != nil {
		return nil, refusal(err)
	}
	return r, nil
}

// refusal gives a refused roster update its status and hint.
func refusal(err error) error {
	hint := ""
	switch {
	case errors.Is(err, roster.ErrRollback):
		hint = "bump the version: edit the current roster with meshctl roster add/remove/role"
	case errors.Is(err, roster.ErrTooFewSignatures):
		hint = "collect more admin signatures with meshctl roster sign FILE"
	}
	return &apierr.Error{Status: http.StatusConflict, Err: err, Hint: hint}
}

// Reload applies r, read again from the roster file (SIGHUP), if it is
// not the current version.
func (k *Keeper) Reload(r *roster.Roster) error {
	if cur := k.Current(); r.Org == cur.Org && r.Version == cur.Version {
		k.log.Info("roster reload: unchanged", "version", r.Version)
		return nil
	}
	_, err := k.Apply(r, nil)
	return err
}

// Apply checks r against the current roster under the acceptance rules,
// then persists it, pushes it to every link but from, and disconnects
// members it removed. Updates are applied one at a time, so two links
// delivering v3 and v4 at once cannot leave v3 in the roster file after
// v4 was applied.
func (k *Keeper) Apply(r *roster.Roster, from *peers.Link) (*roster.Roster, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.Current()
	if err := roster.CheckUpdate(cur, r); err != nil {
		k.host.Rejected(reason(err))
		return nil, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if _, ok := r.Member(k.host.Self()); !ok {
		// We were removed. Accept the truth, keep no links; the operator
		// learns it from the log and the status.
		k.log.Warn("this node was removed from the roster", "org", r.Org, "version", r.Version)
	}
	push, drop := k.host.Swap(cur, r, func() { k.cur.Store(r) }, from)
	if err := k.home.SaveRoster(r); err != nil {
		k.host.Count(PersistFailed)
		k.log.Error("persist roster", "err", err)
	}
	k.rekeyed(cur, r)
	k.host.Count(Accepted)
	src := "local"
	if from != nil {
		src = from.Key.Fingerprint()
	}
	k.log.Info("roster updated", "org", r.Org, "from_version", cur.Version, "version", r.Version,
		"members", len(r.Members), "source", src)
	k.host.Applied(cur, r)
	for _, pl := range push {
		k.Push(pl, r)
	}
	for _, pl := range drop {
		k.host.Count(LinkRemovedMember)
		k.log.Info("disconnecting member removed from roster", "peer", pl.Key.Fingerprint())
		k.host.CloseLink(pl, "removed from roster")
	}
	return r, nil
}

// reason names a refusal for metrics.
func reason(err error) string {
	switch {
	case errors.Is(err, roster.ErrWrongOrg):
		return "wrong_org"
	case errors.Is(err, roster.ErrRollback):
		return "rollback"
	case errors.Is(err, roster.ErrUnknownSigner):
		return "unknown_signer"
	case errors.Is(err, roster.ErrTooFewSignatures):
		return "too_few_signatures"
	case errors.Is(err, proto.ErrBadSignature):
		return "bad_signature"
	}
	return "invalid"
}

package join

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport/logrl"
)

// Invite lifetimes: the default and the bounds of what may be asked.
const (
	DefaultInviteTTL = 24 * time.Hour
	minInviteTTL     = time.Minute
	maxInviteTTL     = 30 * 24 * time.Hour
	// maxInvites bounds the invites file: used, revoked and expired
	// invites are dropped a week after they stopped being usable, and
	// no more than this many are kept at all.
	maxInvites       = 1024
	inviteKeepExpiry = 7 * 24 * time.Hour
)

// InvitesFile, in the home, holds the invites this node made.
const InvitesFile = "invites.json"

// storedInvite is one invite in the invites file. Only the hash of the
// secret is kept: the file alone does not let anyone join.
type storedInvite struct {
	ID      string       `json:"id"`          // hex of the 8-byte id
	Hash    string       `json:"secret_hash"` // hex SHA-256 of the secret
	Role    string       `json:"role"`
	Name    string       `json:"name,omitempty"`
	Created time.Time    `json:"created"`
	Expires time.Time    `json:"expires"`
	Used    *time.Time   `json:"used,omitempty"`
	UsedBy  proto.PubKey `json:"used_by,omitzero"`
	Revoked *time.Time   `json:"revoked,omitempty"`
	// Update is the file of the roster update that adds UsedBy, written
	// when the roster's quorum needs more admins' signatures; the invite
	// waits until a roster naming UsedBy is in force.
	Update string `json:"roster_update,omitempty"`
}

func (s *storedInvite) state(now time.Time) string {
	switch {
	case s.Used != nil:
		return "used"
	case s.Update != "" && s.Revoked == nil:
		return "waiting"
	case s.Revoked != nil:
		return "revoked"
	case !now.Before(s.Expires):
		return "expired"
	}
	return "usable"
}

func (s *storedInvite) api(now time.Time) api.Invite {
	return api.Invite{ID: s.ID, Role: s.Role, Name: s.Name, Created: s.Created, Expires: s.Expires,
		State: s.state(now), Used: s.Used, UsedBy: s.UsedBy, RosterUpdate: s.Update}
}

// settleLocked marks used the waiting invites whose joiner the roster in
// force now lists: the update the other admins signed was published.
func (b *Invites) settleLocked(r *roster.Roster, now time.Time) bool {
	changed := false
	for _, s := range b.list {
		if s.Update != "" && s.Used == nil && s.Revoked == nil {
			if _, ok := r.Member(s.UsedBy); ok {
				s.Used, changed = &now, true
			}
		}
	}
	return changed
}

// Invites holds the invites this node made.
type Invites struct {
	h    Host
	log  *slog.Logger
	rl   *logrl.Limiter
	home string
	path string
	mu   sync.Mutex      // guards list, and serialises the use of an invite with the roster update it makes
	list []*storedInvite // loaded lazily, on first use
	read bool            // list was loaded
}

// NewInvites returns the invites kept in the home of cfg, read on first
// use.
func NewInvites(h Host, cfg Config) *Invites {
	cfg = cfg.withDefaults()
	return &Invites{h: h, log: cfg.Logger, rl: cfg.RateLog, home: cfg.Home, path: filepath.Join(cfg.Home, InvitesFile)}
}

// loadLocked reads the invites file once.
func (b *Invites) loadLocked() error {
	if b.read {
		return nil
	}
	data, err := os.ReadFile(b.path)
	if errors.Is(err, os.ErrNotExist) {
		b.read = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read invites: %w", err)
	}
	var list []*storedInvite
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("invites file %s is damaged: %w", b.path, err)
	}
	b.list, b.read = list, true
	return nil
}

func (b *Invites) saveLocked(now time.Time) error {
	b.list = slices.DeleteFunc(b.list, func(s *storedInvite) bool {
		end := s.Expires
		if s.Used != nil {
			end = *s.Used
		} else if s.Revoked != nil {
			end = *s.Revoked
		}
		return s.state(now) != "usable" && now.Sub(end) > inviteKeepExpiry
	})
	if len(b.list) > maxInvites {
		b.list = b.list[len(b.list)-maxInvites:]
	}
	data, err := json.MarshalIndent(b.list, "", "  ")
	if err != nil {
		return err
	}
	if err := home.WriteFileAtomic(b.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save invites: %w", err)
	}
	return nil
}

func (b *Invites) findLocked(id string) *storedInvite {
	for _, s := range b.list {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// invitable refuses to make or honour invites where this node cannot
// sign the roster update.
func (b *Invites) invitable(r *roster.Roster) error {
	if !r.IsAdmin(b.h.Self()) {
		return apierr.New(http.StatusForbidden, "run 'meshctl invite' on an admin's node; 'meshctl roster show' lists the admins",
			"this node is not an admin of roster %q v%d", r.Org, r.Version)
	}
	return nil
}

// CreateInvite makes a single-use invite and returns its token. The
// token is returned once and never logged; the node keeps only the hash
// of its secret.
func (b *Invites) CreateInvite(req api.CreateInvite) (*api.InviteCreated, error) {
	r := b.h.Roster()
	role, err := roster.ParseRole(req.Role)
	if err != nil {
		return nil, apierr.BadRequest("role: %w", err)
	}
	if err := checkInviteName(r, req.Name); err != nil {
		return nil, err
	}
	ttl := DefaultInviteTTL
	if req.ExpiresSeconds != 0 {
		ttl = time.Duration(req.ExpiresSeconds * float64(time.Second))
	}
	if ttl < minInviteTTL || ttl > maxInviteTTL {
		return nil, apierr.BadRequest("expiry %v: want %v to %v", ttl, minInviteTTL, maxInviteTTL)
	}
	if err := b.invitable(r); err != nil {
		return nil, err
	}
	self, others := b.inviteAddrs()
	if len(self) == 0 {
		return nil, apierr.New(http.StatusConflict, "start meshd with a --listen address the new node can reach",
			"this node has no address to put in the token")
	}
	id := make([]byte, proto.InviteIDLen)
	secret := make([]byte, proto.InviteSecretLen)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	sum := sha256.Sum256(secret)
	s := &storedInvite{ID: hex.EncodeToString(id), Hash: hex.EncodeToString(sum[:]), Role: role.String(),
		Name: req.Name, Created: now, Expires: now.Add(ttl)}
	tok := &proto.InviteToken{Org: r.Org, Admin: b.h.Self(), Addrs: self, Seeds: others, ID: id, Secret: secret,
		Expires: uint64(s.Expires.Unix()), Name: req.Name, Role: s.Role, Quorum: uint64(r.Quorum())}

	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.loadLocked(); err != nil {
		return nil, err
	}
	b.list = append(b.list, s)
	if err := b.saveLocked(now); err != nil {
		b.list = b.list[:len(b.list)-1]
		return nil, err
	}
	b.h.Count(InviteCreated)
	b.log.Info("invite created", "invite", s.ID, "role", s.Role, "name", s.Name, "expires", s.Expires)
	return &api.InviteCreated{Invite: s.api(now), Token: tok.String()}, nil
}

// inviteAddrs returns the addresses a joiner can reach this node at, and
// those of other members it knows (the joiner's later seeds). Loopback
// and Unix addresses are kept: a joiner on this host needs them.
func (b *Invites) inviteAddrs() (self, others []string) {
	for _, a := range b.h.Advertised() {
		if proto.CheckListenAddr(a) == nil && len(self) < proto.MaxListenAddrs {
			self = append(self, a)
		}
	}
	for _, s := range b.h.PeerAddrs() {
		if proto.CheckListenAddr(s) == nil && !slices.Contains(others, s) && len(others) < proto.MaxListenAddrs {
			others = append(others, s)
		}
	}
	slices.Sort(others)
	return self, others
}

// InviteList returns the invites this node made, newest first.
func (b *Invites) InviteList() (api.Invites, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := api.Invites{Invites: []api.Invite{}}
	if err := b.loadLocked(); err != nil {
		return out, err
	}
	now := time.Now()
	if b.settleLocked(b.h.Roster(), now.UTC()) {
		if err := b.saveLocked(now); err != nil {
			b.log.Warn("invites", "err", err)
		}
	}
	for i := len(b.list) - 1; i >= 0; i-- {
		out.Invites = append(out.Invites, b.list[i].api(now))
	}
	return out, nil
}

// RevokeInvite makes an invite unusable.
func (b *Invites) RevokeInvite(id string) (*api.Invite, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.loadLocked(); err != nil {
		return nil, err
	}
	s := b.findLocked(strings.ToLower(id))
	if s == nil {
		return nil, apierr.NotFound("list invites with: meshctl invite list", "no invite %q", id)
	}
	now := time.Now().UTC()
	if st := s.state(now); st == "used" || st == "revoked" {
		return nil, apierr.New(http.StatusConflict, "", "invite %s is already %s", s.ID, st)
	}
	s.Revoked = &now
	if err := b.saveLocked(now); err != nil {
		s.Revoked = nil
		return nil, err
	}
	b.h.Count(InviteRevoked)
	b.log.Info("invite revoked", "invite", s.ID)
	a := s.api(now)
	return &a, nil
}

// ErrInviteRefused is what a joiner whose invite fails is told, whatever
// the reason: the reason is logged and counted here, not revealed.
var ErrInviteRefused = errors.New("invite refused")

// Admit decides on a joiner that is not a member and presents an
// invite (handshake message 3). A valid, unexpired, unused invite makes
// the joiner a member: the roster's next version, signed by this node,
// is applied and spread before the link is admitted, so the link comes
// up as an ordinary member link and the joiner is sent the roster.
func (b *Invites) Admit(p *proto.HandshakePayload) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	fail := func(reason string, id string) error {
		b.h.CountReason(InviteRejected, reason)
		// Rate-limited per (peer, reason) like every line a peer can
		// cause: a flood of bad invites is counted, not logged line by
		// line.
		rateLog(b.rl, b.log, slog.LevelWarn, "invite refused", p.Identity.Fingerprint(), "invite_"+reason,
			"reason", reason, "invite", id, "peer", p.Identity.Fingerprint(),
			"claimed_name", p.Name, "addr", p.Remote)
		return ErrInviteRefused
	}
	if err := b.loadLocked(); err != nil {
		b.log.Error("invites", "err", err)
		return fail("store", "")
	}
	id := hex.EncodeToString(p.Invite.ID)
	s := b.findLocked(id)
	if s == nil {
		return fail("unknown", id)
	}
	sum := sha256.Sum256(p.Invite.Secret)
	want, err := hex.DecodeString(s.Hash)
	if err != nil || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		return fail("bad_secret", id)
	}
	now := time.Now().UTC()
	st := s.state(now)
	if st == "waiting" && s.UsedBy.Equal(p.Identity) && now.Before(s.Expires) {
		b.log.Info("invite waits for admin signatures", "invite", id, "peer", p.Identity.Fingerprint(), "roster_update", s.Update)
		return fail("awaiting_signatures", id)
	}
	if st != "usable" {
		return fail(st, id)
	}
	cur := b.h.Roster()
	if err := b.invitable(cur); err != nil {
		b.log.Warn("invite cannot be honoured", "invite", id, "err", err)
		return fail("not_admin", id)
	}
	role, err := roster.ParseRole(s.Role)
	if err != nil {
		return fail("store", id)
	}
	next := cur.Next()
	m := roster.Member{Key: p.Identity, Role: role, Name: b.inviteeName(cur, s, p)}
	err = next.Add(m)
	if err != nil && m.Name != "" {
		// The name was taken meanwhile: join unnamed rather than not at all.
		m.Name = ""
		next = cur.Next()
		err = next.Add(m)
	}
	if err != nil {
		b.log.Warn("invite: add member", "invite", id, "err", err)
		return fail("roster", id)
	}
	if err := b.h.SignRoster(next); err != nil {
		return fail("roster", id)
	}
	if cur.Quorum() > 1 {
		return b.awaitSignatures(s, next, p, now, fail)
	}
	if err := b.h.ApplyRoster(next); err != nil {
		b.log.Warn("invite: apply roster", "invite", id, "err", err)
		return fail("roster", id)
	}
	s.Used, s.UsedBy = &now, p.Identity
	if err := b.saveLocked(now); err != nil {
		// The roster update stands and the invite is marked used in
		// memory, so it cannot be used twice by this process.
		b.log.Error("invite used but not saved", "invite", id, "err", err)
	}
	b.h.Count(InviteUsed)
	b.log.Info("invite used: member added", "invite", id, "peer", p.Identity.Fingerprint(), "name", m.Name,
		"role", role.String(), "addr", p.Remote, "roster_version", next.Version)
	return nil
}

// awaitSignatures handles a valid invite where this node's signature is
// not enough: the update adding the joiner, signed by this node, is
// written beside the roster for the other admins to sign and publish, and
// the invite is bound to this joiner. The link is refused for now; the
// joiner retries, and is admitted as a member once the update is in force.
func (b *Invites) awaitSignatures(s *storedInvite, next *roster.Roster, p *proto.HandshakePayload, now time.Time,
	fail func(string, string) error) error {
	path := filepath.Join(b.home, fmt.Sprintf("roster-v%d-invite-%s.cbor", next.Version, s.ID))
	if err := home.WriteRoster(path, next); err != nil {
		b.log.Error("invite: write roster update", "invite", s.ID, "err", err)
		return fail("roster", s.ID)
	}
	s.Update, s.UsedBy = path, p.Identity
	if err := b.saveLocked(now); err != nil {
		b.log.Error("invite: save", "invite", s.ID, "err", err)
	}
	b.h.Count(InviteAwaitingSignatures)
	b.log.Warn("invite used: the roster update adding the member needs more admin signatures",
		"invite", s.ID, "peer", p.Identity.Fingerprint(), "name", p.Name, "quorum", next.Quorum(),
		"roster_update", path, "hint", "other admins: meshctl roster sign FILE; then meshctl roster publish FILE")
	return fail("awaiting_signatures", s.ID)
}

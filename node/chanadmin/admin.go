package chanadmin

import (
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/roster"
)

// The files the admin keeps in the home.
const (
	VersionsFile = "channel-versions.json"
	BlocksFile   = "blocks.json"
)

// hintChannels is the hint of a channel the node does not know.
const hintChannels = "list channels with: meshctl channel list"

// Config is where the admin keeps its files and the channel quota.
type Config struct {
	Home        string // the home: the version record and the block list
	ChannelsDir string // where the channel set is persisted
	// The per-sender channel quota: messages a minute (0: no limit), the
	// messages a bucket holds, and wire bytes an hour (0: no limit).
	SenderRate         int
	SenderBurst        int
	SenderBytesPerHour int64
}

// Admin is the channel administration of this node. Create it with
// [New]; it is safe for concurrent use.
type Admin struct {
	host     Host
	log      *slog.Logger
	cfg      Config
	set      *channel.Set
	subs     *channel.Subscriptions
	versions *chanVersions
	blocks   *blockList
	quota    *chanQuota
}

// New opens the version record and the block list in cfg.Home, for the
// channel set and subscriptions the node loaded. A damaged block list is
// an error (it names the file and the fix); a damaged version record is
// logged and started again.
func New(host Host, set *channel.Set, subs *channel.Subscriptions, cfg Config, log *slog.Logger) (*Admin, error) {
	a := &Admin{host: host, log: log, cfg: cfg, set: set, subs: subs,
		quota: newChanQuota(max(cfg.SenderRate, 0), cfg.SenderBurst, max(cfg.SenderBytesPerHour, 0))}
	var err error
	if a.versions, err = openChanVersions(filepath.Join(cfg.Home, VersionsFile)); err != nil {
		log.Warn("channel version record unreadable; starting it again", "err", err)
	}
	a.versions.seed(set.All())
	if a.blocks, err = openBlockList(filepath.Join(cfg.Home, BlocksFile)); err != nil {
		return nil, err
	}
	return a, nil
}

// Set is the channel set the admin keeps: the policies this node holds.
func (a *Admin) Set() *channel.Set { return a.set }

// Subscriptions is this node's subscription to each channel.
func (a *Admin) Subscriptions() *channel.Subscriptions { return a.subs }

// Resolve finds a channel by name (with or without '#') or id.
func (a *Admin) Resolve(q string) (*channel.Policy, error) {
	p, err := a.set.Lookup(q)
	if err != nil {
		return nil, apierr.NotFound(hintChannels, "%w", err) // the error names q
	}
	return p, nil
}

// Channel returns the channel named (or with the id) q, with the
// versions this node accepted.
func (a *Admin) Channel(q string) (api.Channel, error) {
	p, err := a.Resolve(q)
	if err != nil {
		return api.Channel{}, err
	}
	c := a.ChannelInfo(p)
	r := a.host.Roster()
	for _, v := range a.versions.get(p.ID) {
		cv := api.ChannelVersion{Version: v.Version, Made: time.UnixMilli(v.Timestamp).UTC(), History: v.History,
			Hours: int(v.Hours), Messages: int(v.Messages), Deleted: v.Deleted, Accepted: v.Accepted,
			Signers: []string{}, Readers: labels(v.ReadText, r), Writers: labels(v.WriteText, r)}
		for _, k := range v.Signers {
			cv.Signers = append(cv.Signers, r.Label(k))
		}
		c.Versions = append(c.Versions, cv)
	}
	return c, nil
}

// labels renders principal texts as ChannelInfo does.
func labels(texts []string, r *roster.Roster) []string {
	out := []string{}
	for _, s := range texts {
		if p, err := channel.ParsePrincipal(s, nil); err == nil {
			s = p.Label(r)
		}
		out = append(out, s)
	}
	return out
}

// ChannelInfo renders a policy for the API.
func (a *Admin) ChannelInfo(p *channel.Policy) api.Channel {
	r := a.host.Roster()
	self := a.host.Self()
	hours, msgs := p.EffectiveRetention()
	c := api.Channel{
		ID:                p.ID.String(),
		Name:              p.Name,
		Version:           p.Version,
		Readers:           []string{},
		Writers:           []string{},
		Admins:            []string{},
		AllowHistoryFetch: p.AllowHistory,
		RetentionHours:    int(hours.Hours()),
		RetentionMessages: msgs,
		Subscription:      a.subs.Get(p.ID).String(),
		CanRead:           p.CanRead(r, self),
		CanWrite:          p.CanWrite(r, self),
		Deleted:           p.Deleted(),
	}
	for _, x := range p.ReadACL {
		c.Readers = append(c.Readers, x.Label(r))
	}
	for _, x := range p.WriteACL {
		c.Writers = append(c.Writers, x.Label(r))
	}
	for _, k := range p.Admins {
		if m, ok := r.Member(k); ok {
			c.Admins = append(c.Admins, m.Label())
		} else {
			c.Admins = append(c.Admins, k.Fingerprint())
		}
	}
	return c
}

// SetSubscription sets our subscription state for a channel.
func (a *Admin) SetSubscription(name, state string) (*api.Channel, error) {
	p, err := a.Resolve(name)
	if err != nil {
		return nil, err
	}
	st, err := channel.ParseSubState(state)
	if err != nil {
		return nil, apierr.BadRequest("%w", err)
	}
	if st != channel.Unsubscribed && p.Deleted() {
		return nil, apierr.Forbidden("#%s was deleted (policy v%d)", p.Name, p.Version)
	}
	if st != channel.Unsubscribed && !p.CanRead(a.host.Roster(), a.host.Self()) {
		return nil, apierr.Forbidden("not a reader of #%s (readers: %s)", p.Name, principals(p.ReadACL))
	}
	if err := a.subs.Set(p.ID, st); err != nil {
		return nil, err
	}
	a.host.ChannelsChanged()
	c := a.ChannelInfo(p)
	return &c, nil
}

// principals renders an ACL for an error message.
func principals(ps []channel.Principal) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// myRole is this node's role in the current roster.
func (a *Admin) myRole() roster.Role {
	role, _ := a.host.Roster().Role(a.host.Self())
	return role
}

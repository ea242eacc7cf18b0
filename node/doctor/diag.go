package doctor

import (
	"log/slog"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// Thresholds of the doctor's checks.
const (
	// SkewWarn is the clock difference to a peer that is reported (log,
	// status, doctor): a third of proto.MaxClockSkew, past which the
	// peer's envelopes are dropped as from the future.
	SkewWarn = 10 * time.Second
	// skewFresh is how long a skew measurement counts.
	skewFresh = 15 * time.Minute
	// diskLowBytes and diskLowFraction: the home's file system is nearly
	// full below both.
	diskLowBytes    = 256 << 20
	diskLowFraction = 0.02
	maxForeignOrgs  = 16
	// ForeignOrgFresh is how long a node of another org counts after
	// mDNS last reported it: mDNS reports an unchanged node every
	// minute (mdns.Config: RefreshEvery rounds of QueryInterval), so
	// one gone for three minutes has left.
	ForeignOrgFresh = 3 * time.Minute
)

// MDNSHint is the advice when mDNS cannot start: on a single host (no
// multicast interface, or no route), seeds or the loopback interface.
const MDNSHint = "without mDNS this node finds peers only through seeds: give --seed tcp://HOST:PORT, or, with every node on this host, --mdns-interface lo after: sudo ip route add 224.0.0.0/4 dev lo"

// Diagnosis holds what the node noticed for meshctl doctor, and runs its
// checks.
type Diagnosis struct {
	h   Host
	cfg Config
	log *slog.Logger

	mu          sync.Mutex // guards the fields below
	mdnsErr     error      // why mDNS did not start, if it did not
	foreignOrgs map[string]*foreignOrg
	skew        map[proto.PubKey]skewSample
	now         func() time.Time // time.Now; tests move it
}

type foreignOrg struct {
	nodes map[proto.PubKey]time.Time // when mDNS last reported each
	last  time.Time
}

type skewSample struct {
	skew   time.Duration // the peer's clock minus ours, transit included
	at     time.Time
	logged time.Time
}

// New returns a doctor with nothing noticed yet.
func New(h Host, cfg Config) *Diagnosis {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Diagnosis{h: h, cfg: cfg, log: log, foreignOrgs: map[string]*foreignOrg{},
		skew: map[proto.PubKey]skewSample{}, now: time.Now}
}

// MDNSFailed records why mDNS could not start.
func (d *Diagnosis) MDNSFailed(err error) {
	d.mu.Lock()
	d.mdnsErr = err
	d.mu.Unlock()
}

// SawForeignOrg records a node that mDNS found in another org: the usual
// reason a node that ran plain meshd once does not link with its
// neighbours.
func (d *Diagnosis) SawForeignOrg(org string, k proto.PubKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for o, f := range d.foreignOrgs {
		if now.Sub(f.last) >= ForeignOrgFresh {
			delete(d.foreignOrgs, o) // left: said again if it comes back
		}
	}
	f := d.foreignOrgs[org]
	if f == nil {
		if len(d.foreignOrgs) >= maxForeignOrgs {
			return
		}
		f = &foreignOrg{nodes: map[proto.PubKey]time.Time{}}
		d.foreignOrgs[org] = f
		d.h.Count(ForeignOrg)
		r, self := d.h.Roster(), d.h.Self()
		hint := "to join it, ask one of its admins for an invite: meshctl invite, then meshctl join TOKEN here"
		if r.IsAdmin(self) && !(seenOrg{r.Org, []proto.PubKey{self}}).stray(r) {
			hint = "to bring such a node into this org: meshctl invite --role member here, then meshctl join TOKEN on it"
		}
		d.log.Info("mdns: ignoring nodes of another org", "org", org, "ours", r.Org, "hint", hint)
	}
	for k2, at := range f.nodes {
		if now.Sub(at) >= ForeignOrgFresh {
			delete(f.nodes, k2)
		}
	}
	if _, ok := f.nodes[k]; ok || len(f.nodes) < 64 {
		f.nodes[k] = now
	}
	f.last = now
}

// ObserveClock records the clock difference a fresh envelope shows: one
// signed by from at sent that came straight from its sender over the
// sender's own link (direct); others are ignored.
func (d *Diagnosis) ObserveClock(from proto.PubKey, sent time.Time, direct bool, now time.Time) {
	if !direct {
		return
	}
	skew := sent.Sub(now)
	d.mu.Lock()
	s := d.skew[from]
	s.skew, s.at = skew, now
	logIt := skew.Abs() > SkewWarn && now.Sub(s.logged) > time.Hour
	if logIt {
		s.logged = now
	}
	d.skew[from] = s
	d.mu.Unlock()
	if logIt {
		d.h.Count(ClockSkewed)
		d.log.Warn("clock skew with a peer", "peer", from.Fingerprint(), "skew", skew.Round(time.Millisecond).String(),
			"hint", "one of the two clocks is off; keep clocks in sync with NTP (meshctl doctor says which)")
	}
}

// ObserveFutureClock records the clock difference an envelope shows when
// it claims to be from more than SkewWarn in the future: queueing and
// store-and-forward only ever make envelopes look older, so this is the
// sender's clock (or ours), even for an envelope then dropped as from the
// future. Envelopes within SkewWarn cost one comparison.
func (d *Diagnosis) ObserveFutureClock(from proto.PubKey, sent time.Time, direct bool, now time.Time) {
	if sent.Sub(now) > SkewWarn {
		d.ObserveClock(from, sent, direct, now)
	}
}

// MaxSkew returns the largest recent clock difference to a peer.
func (d *Diagnosis) MaxSkew(now time.Time) (time.Duration, proto.PubKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var worst time.Duration
	var who proto.PubKey
	for k, s := range d.skew {
		if now.Sub(s.at) < skewFresh && s.skew.Abs() > worst.Abs() {
			worst, who = s.skew, k
		}
	}
	return worst, who
}

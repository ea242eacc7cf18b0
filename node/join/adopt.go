package join

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// AdoptState reports whether this node may adopt another org, what it
// knocked at and which admins its user confirmed (GET /v1/adopt).
func (k *Knocks) AdoptState() api.Adopt {
	r := k.h.Roster()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := api.Adopt{Fresh: FreshRoster(r, k.h.Self()) != nil, Org: r.Org,
		Confirmed: append([]string{}, k.confirmed...), Knocked: []api.Knocked{}}
	for _, t := range k.targets {
		out.Knocked = append(out.Knocked, t.Knocked)
	}
	slices.SortFunc(out.Knocked, func(x, y api.Knocked) int { return y.LastKnock.Compare(x.LastKnock) })
	return out
}

// Adopt confirms an org by the fingerprint of one of its admins: a roster
// signed by that admin that lists this node is adopted even when it came
// over a link mDNS found (POST /v1/adopt). The nodes mDNS found are
// knocked at again at once.
func (k *Knocks) Adopt(req api.AdoptRequest) (*api.Adopt, error) {
	fp, err := parseAdminFingerprint(req.Fingerprint)
	if err != nil {
		return nil, err
	}
	if FreshRoster(k.h.Roster(), k.h.Self()) == nil {
		r := k.h.Roster()
		return nil, apierr.New(http.StatusConflict, "to move this node to another org: meshctl join --force with an invite from one of its admins",
			"this node belongs to org %q (roster v%d, %d members): only a node of a one-node org of its own adopts another org", r.Org, r.Version, len(r.Members))
	}
	k.mu.Lock()
	if !slices.Contains(k.confirmed, fp) {
		if len(k.confirmed) >= maxConfirmed {
			k.confirmed = k.confirmed[1:]
		}
		k.confirmed = append(k.confirmed, fp)
	}
	var again []transport.Addr
	for _, t := range k.targets {
		if t.Via == viaMDNS {
			again = append(again, t.addr)
		}
	}
	k.mu.Unlock()
	k.h.Count(AdoptConfirmed)
	k.log.Info("org confirmed by its admin's fingerprint: a roster it signed that lists this node is adopted", "admin", fp)
	k.h.Go(func() {
		for _, a := range again {
			k.knock(a, viaMDNS)
		}
	})
	out := k.AdoptState()
	return &out, nil
}

// parseAdminFingerprint accepts an admin's key (ed25519:...) or its
// fingerprint (16 hex digits) and returns the fingerprint.
func parseAdminFingerprint(s string) (string, error) {
	s = strings.TrimSpace(s)
	if k, err := proto.ParsePubKey(s); err == nil {
		return k.Fingerprint(), nil
	}
	fp := strings.ToLower(s)
	if len(fp) == 16 && strings.Trim(fp, "0123456789abcdef") == "" {
		return fp, nil
	}
	return "", apierr.New(http.StatusBadRequest,
		"give the fingerprint of one of the org's admins: 16 hex digits, as meshctl id prints on that admin's node",
		"%q is not a key or fingerprint: an org id alone can be claimed by any node on the LAN", s)
}

// FinishAdoption switches the home to the org of ad, once the node that
// adopted it is closed: the one-node org's roster, history, seeds and
// mailbox go to <home>/left-ORG-TIME/ (as meshctl join does), the adopted
// roster becomes the home's, and the address it came from its seed. It
// returns the directory the old org went to. meshd then starts again.
func FinishAdoption(dir string, ad Adoption) (string, error) {
	h := home.Open(dir)
	unlock, err := h.Lock()
	if err != nil {
		return "", err
	}
	defer func() { _ = unlock() }()
	left, err := h.LeaveOrg(ad.Left)
	if err != nil {
		return "", err
	}
	if err := h.SaveRoster(ad.Roster); err != nil {
		return left, err
	}
	var seeds []string
	if a, err := transport.ParseAddr(ad.From); err == nil && a.Network == "tcp" {
		seeds = append(seeds, a.String())
	}
	return left, h.WriteSeeds("meshd on adopting org "+strconv.Quote(ad.Roster.Org), seeds)
}

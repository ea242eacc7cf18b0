package roster

import (
	"fmt"
	"strings"

	"github.com/meshd/meshd/proto"
)

// MinFingerprintPrefix is the shortest hex prefix of a NodeID that
// [Roster.Lookup] treats as a fingerprint.
const MinFingerprintPrefix = 8

// Lookup resolves what a human typed to members: the full key text
// ("ed25519:..."), a fingerprint or any hex prefix of at least
// [MinFingerprintPrefix] digits of the NodeID, or a display name (in any
// case when no name matches exactly). A query
// that matches no one fails with [ErrNotMember]. A query that matches
// several members returns them all together with an [*AmbiguousError];
// callers must not pick one, since names and short prefixes are not
// identities.
func (r *Roster) Lookup(query string) ([]Member, error) {
	if strings.HasPrefix(query, proto.KeyPrefix) {
		k, err := proto.ParsePubKey(query)
		if err != nil {
			return nil, err
		}
		m, ok := r.Member(k)
		if !ok {
			return nil, fmt.Errorf("%s is %w of %s", k.Fingerprint(), ErrNotMember, r)
		}
		return []Member{m}, nil
	}
	prefix := strings.ToLower(query)
	if !isHexPrefix(prefix) {
		prefix = ""
	}
	var out []Member
	for _, m := range r.Members {
		if (query != "" && m.Name == query) || (prefix != "" && strings.HasPrefix(m.Key.NodeID().String(), prefix)) {
			out = append(out, m)
		}
	}
	if len(out) == 0 && query != "" {
		// Names ignore case when nothing matches exactly: "Bob" finds bob.
		for _, m := range r.Members {
			if strings.EqualFold(m.Name, query) {
				out = append(out, m)
			}
		}
	}
	switch len(out) {
	case 0:
		return nil, fmt.Errorf("%w: no one in %s matches %q (want a key, a fingerprint or a name)", ErrNotMember, r, query)
	case 1:
		return out, nil
	}
	return out, &AmbiguousError{Query: query, Matches: out}
}

func isHexPrefix(s string) bool {
	if len(s) < MinFingerprintPrefix || len(s) > 2*len(proto.NodeID{}) {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

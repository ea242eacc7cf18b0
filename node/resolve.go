package node

import (
	"errors"
	"strings"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// resolvePeer finds a roster member by key, fingerprint or name.
func (n *Node) resolvePeer(q string) (roster.Member, error) {
	q = strings.TrimPrefix(strings.TrimSpace(q), "@")
	ms, err := n.Roster().Lookup(q)
	if err != nil {
		var amb *roster.AmbiguousError
		if errors.As(err, &amb) {
			return roster.Member{}, badRequest("%w", err)
		}
		return roster.Member{}, notFound(hintMembers, "%w", err) // the error names q
	}
	if len(ms) == 0 {
		return roster.Member{}, notFound(hintMembers, "no roster member matches %q", q)
	}
	if len(ms) > 1 {
		var names []string
		for _, m := range ms {
			names = append(names, m.Label())
		}
		return roster.Member{}, badRequest("%q is ambiguous: %s", q, strings.Join(names, ", "))
	}
	return ms[0], nil
}

// resolveChannel finds a channel by name (with or without '#') or id.
func (n *Node) resolveChannel(q string) (*channel.Policy, error) {
	p, err := n.chans.Set().Lookup(q)
	if err != nil {
		return nil, notFound(hintChannels, "%w", err) // the error names q
	}
	return p, nil
}

// memberLabel is "name (fingerprint)", or the fingerprint alone.
func (n *Node) memberLabel(k proto.PubKey) string {
	if m, ok := n.Roster().Known(k); ok && m.Name != "" {
		return m.Name + " (" + k.Fingerprint() + ")"
	}
	return k.Fingerprint()
}

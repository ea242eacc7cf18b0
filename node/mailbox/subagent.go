package mailbox

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/meshd/meshd/proto"
)

// KindSubagentResult is the Kind header of a subagent result: a Message
// a node signed to itself, whose body is a [Subagent] as JSON. It is
// local only: nodes never send one, and drop one that comes over a link.
const KindSubagentResult = "subagent_result"

// Subagent is the body of a subagent result.
type Subagent struct {
	ID      string          `json:"subagent_id"`
	Summary string          `json:"summary"`
	Result  json.RawMessage `json:"result,omitempty"`
}

// SubagentBody renders s as the body of a subagent result: indented
// JSON, so that the mailbox file reads well.
func SubagentBody(s Subagent) (string, error) {
	if len(bytes.TrimSpace(s.Result)) == 0 {
		s.Result = nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// ParseSubagent reads the body of a subagent result; ok is false when
// body is not one.
func ParseSubagent(body string) (s Subagent, ok bool) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil || dec.More() || s.ID == "" {
		return Subagent{}, false
	}
	return s, true
}

// IsLocal reports whether e is addressed to its own sender: a subagent
// result, which never leaves its node.
func IsLocal(e *proto.Envelope) bool {
	return e.Kind == proto.KindMessage && e.To.Kind == proto.DestPeer && e.To.Peer.Equal(e.From)
}

// subagentOf returns the subagent result e holds, if it is one.
func subagentOf(e *proto.Envelope) (Subagent, bool) {
	if !IsLocal(e) {
		return Subagent{}, false
	}
	return ParseSubagent(e.Message.Body)
}

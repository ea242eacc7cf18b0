package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/google/uuid"
	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/proto"
)

// ErrBadOutgoing is wrapped by every error about an outbox file that does
// not parse.
var ErrBadOutgoing = errors.New("bad outbox file")

// OutgoingMessage is an outbox file, parsed: what the agent asks the node
// to sign and send. Exactly one of Channel and Peer is set.
type OutgoingMessage struct {
	// File is the file's name as the agent dropped it in the outbox.
	File string
	// To is the To header as written.
	To string
	// Channel is the channel name (normalized, without '#') when To names
	// a channel ("#general").
	Channel string
	// Peer is what names the peer when To does not name a channel: a roster
	// name (without '@'), a key text "ed25519:..." or a fingerprint. Resolve
	// it with [roster.Roster.Lookup], which refuses ambiguous names.
	Peer string
	Kind proto.Kind

	// Body is a message's text.
	Body string
	// InReplyTo is a message's in_reply_to, if set.
	InReplyTo *uuid.UUID

	// Intent and Params (nil for none) make a request; ReplyTo is set for a
	// follow-up of the request it names.
	Intent  string
	Params  cbor.RawMessage
	ReplyTo *uuid.UUID

	// RequestID, Status and Result (nil for none) make a response.
	RequestID uuid.UUID
	Status    proto.Status
	Result    cbor.RawMessage

	// Read, for a file of "Kind: read", lists the inbox items (by
	// Message-ID) to mark read; such a file sends nothing, and Kind is 0.
	Read []uuid.UUID

	// Attach lists the files to attach, absolute paths, one per Attach
	// header (the one header that may repeat).
	Attach []string
}

// MaxReadIDs bounds the items one "Kind: read" file marks.
const MaxReadIDs = 1000

// outHeaders are the outbox headers, in the order error messages list
// them, with the kinds each applies to (0: all).
var outHeaders = []struct {
	name string
	kind proto.Kind
}{
	{"To", 0},
	{"Kind", 0},
	{"Intent", proto.KindRequest},
	{"Reply-To", proto.KindRequest},
	{"Request-ID", proto.KindResponse},
	{"Status", proto.KindResponse},
	{"In-Reply-To", proto.KindMessage},
	{"Attach", 0},
}

func outHeaderList() string {
	ns := make([]string, len(outHeaders))
	for i, h := range outHeaders {
		ns[i] = h.name
	}
	return strings.Join(ns, ", ")
}

// outHint is the hint of every header error.
var outHint = "an outbox file is headers (" + outHeaderList() + "), a line ---, and the body; see README.txt in the outbox"

// ParseOutgoing parses an outbox file (see the package documentation).
// Errors wrap [ErrBadOutgoing], name the line where they can, and carry a
// hint (see [Hint]).
func ParseOutgoing(b []byte) (*OutgoingMessage, error) {
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	type value struct {
		v    string
		line int
	}
	hv := map[string]value{}
	var attach []string
	rest := string(b)
	n := 0
	for {
		n++
		if rest == "" {
			return nil, WithHint(fmt.Errorf("%w: no %q line after the headers", ErrBadOutgoing, headerSep), outHint)
		}
		l, after, _ := strings.Cut(rest, "\n")
		rest = after
		l = strings.TrimSuffix(l, "\r")
		if l == headerSep {
			break
		}
		if strings.TrimSpace(l) == "" {
			return nil, WithHint(fmt.Errorf("%w: line %d: blank line among the headers", ErrBadOutgoing, n), outHint)
		}
		name, v, ok := strings.Cut(l, ":")
		if !ok {
			return nil, WithHint(fmt.Errorf("%w: line %d: %q is not a header (want Name: value)", ErrBadOutgoing, n, l), outHint)
		}
		canon := ""
		for _, h := range outHeaders {
			if strings.EqualFold(strings.TrimSpace(name), h.name) {
				canon = h.name
			}
		}
		if canon == "" {
			return nil, WithHint(fmt.Errorf("%w: line %d: unknown header %q (want %s)", ErrBadOutgoing, n, strings.TrimSpace(name), outHeaderList()), outHint)
		}
		if canon == "Attach" {
			p := strings.TrimSpace(v)
			if !filepath.IsAbs(p) {
				return nil, WithHint(fmt.Errorf("%w: line %d: Attach %q is not an absolute path", ErrBadOutgoing, n, p),
					"write the file's absolute path, such as 'Attach: /home/me/build.log'; one Attach line per file")
			}
			if len(attach) == proto.MaxAttachments {
				return nil, fmt.Errorf("%w: line %d: more than %d Attach lines", ErrBadOutgoing, n, proto.MaxAttachments)
			}
			attach = append(attach, p)
			continue
		}
		if prev, dup := hv[canon]; dup {
			return nil, fmt.Errorf("%w: line %d: header %s again (first on line %d)", ErrBadOutgoing, n, canon, prev.line)
		}
		hv[canon] = value{strings.TrimSpace(v), n}
	}
	body := strings.TrimSuffix(rest, "\n")

	m := &OutgoingMessage{Kind: proto.KindMessage, Attach: attach}
	if k, ok := hv["Kind"]; ok {
		switch strings.ToLower(k.v) {
		case "message":
		case "request":
			m.Kind = proto.KindRequest
		case "response":
			m.Kind = proto.KindResponse
		case "read":
			return parseRead(hv["To"].line, hv["Kind"].line, len(hv)+len(attach), body)
		default:
			return nil, fmt.Errorf("%w: line %d: Kind %q (want message, request, response or read)", ErrBadOutgoing, k.line, k.v)
		}
	}
	for _, h := range outHeaders {
		if v, ok := hv[h.name]; ok && h.kind != 0 && h.kind != m.Kind {
			return nil, fmt.Errorf("%w: line %d: header %s applies to a %s, not a %s", ErrBadOutgoing, v.line, h.name, h.kind, m.Kind)
		}
	}
	to, ok := hv["To"]
	if !ok || to.v == "" {
		return nil, WithHint(fmt.Errorf("%w: missing To", ErrBadOutgoing), "start the file with a line such as 'To: #general' or 'To: @bob'")
	}
	m.To = to.v
	if rest, isChan := strings.CutPrefix(to.v, "#"); isChan {
		name, err := channel.NormalizeName(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: To: %w", ErrBadOutgoing, to.line, err)
		}
		m.Channel = name
	} else {
		m.Peer = strings.TrimPrefix(to.v, "@")
		if m.Peer == "" || strings.ContainsFunc(m.Peer, badRune) {
			return nil, fmt.Errorf("%w: line %d: To %q names no peer", ErrBadOutgoing, to.line, to.v)
		}
		if strings.HasPrefix(m.Peer, proto.KeyPrefix) {
			if _, err := proto.ParsePubKey(m.Peer); err != nil {
				return nil, fmt.Errorf("%w: line %d: To: %w", ErrBadOutgoing, to.line, err)
			}
		}
	}
	if m.Kind != proto.KindMessage && m.Channel != "" {
		return nil, fmt.Errorf("%w: line %d: a %s goes to a peer, not to channel #%s", ErrBadOutgoing, to.line, m.Kind, m.Channel)
	}
	parseID := func(name string) (*uuid.UUID, error) {
		v, ok := hv[name]
		if !ok {
			return nil, nil
		}
		id, err := uuid.Parse(v.v)
		if err != nil || id == uuid.Nil {
			return nil, fmt.Errorf("%w: line %d: %s %q is not an id", ErrBadOutgoing, v.line, name, v.v)
		}
		return &id, nil
	}
	var err error
	switch m.Kind {
	case proto.KindMessage:
		if len(body) > proto.MaxBodySize {
			return nil, WithHint(fmt.Errorf("%w: body of %d bytes exceeds the message limit of 256 KiB (%d bytes)", ErrBadOutgoing, len(body), proto.MaxBodySize),
				"split it into several files, or send a path or URL to the data")
		}
		if !utf8.ValidString(body) {
			return nil, fmt.Errorf("%w: body is not valid UTF-8", ErrBadOutgoing)
		}
		m.Body = body
		if m.InReplyTo, err = parseID("In-Reply-To"); err != nil {
			return nil, err
		}
	case proto.KindRequest:
		in, ok := hv["Intent"]
		if !ok || in.v == "" {
			return nil, WithHint(fmt.Errorf("%w: a request needs an Intent header", ErrBadOutgoing), "add a line such as 'Intent: run-tests' before ---")
		}
		if len(in.v) > proto.MaxIntentLen || !utf8.ValidString(in.v) || strings.ContainsFunc(in.v, badRune) {
			return nil, fmt.Errorf("%w: line %d: Intent must be 1..%d bytes of text", ErrBadOutgoing, in.line, proto.MaxIntentLen)
		}
		m.Intent = in.v
		if m.ReplyTo, err = parseID("Reply-To"); err != nil {
			return nil, err
		}
		if m.Params, err = jsonPayload("params", body); err != nil {
			return nil, err
		}
	case proto.KindResponse:
		id, err := parseID("Request-ID")
		if err != nil {
			return nil, err
		}
		if id == nil {
			return nil, fmt.Errorf("%w: a response needs a Request-ID header", ErrBadOutgoing)
		}
		m.RequestID = *id
		st, ok := hv["Status"]
		if !ok {
			return nil, fmt.Errorf("%w: a response needs a Status header (accepted, rejected, completed or failed)", ErrBadOutgoing)
		}
		if m.Status, err = proto.ParseStatus(strings.ToLower(st.v)); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrBadOutgoing, st.line, err)
		}
		if m.Result, err = jsonPayload("result", body); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseRead parses the body of a "Kind: read" file: one Message-ID a
// line (blank lines and lines starting with '#' are skipped). Such a file
// has no header but Kind.
func parseRead(toLine, kindLine, headers int, body string) (*OutgoingMessage, error) {
	if headers != 1 {
		line := toLine
		if line == 0 {
			line = kindLine
		}
		return nil, WithHint(fmt.Errorf("%w: line %d: a read file has the one header Kind: read", ErrBadOutgoing, line),
			"write 'Kind: read', a line ---, then the Message-ID of each item to mark read, one a line")
	}
	m := &OutgoingMessage{Read: []uuid.UUID{}}
	for i, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		id, err := uuid.Parse(l)
		if err != nil || id == uuid.Nil {
			return nil, fmt.Errorf("%w: body line %d: %q is not a Message-ID", ErrBadOutgoing, i+1, l)
		}
		if len(m.Read) == MaxReadIDs {
			return nil, fmt.Errorf("%w: more than %d ids: split them into several files", ErrBadOutgoing, MaxReadIDs)
		}
		m.Read = append(m.Read, id)
	}
	if len(m.Read) == 0 {
		return nil, fmt.Errorf("%w: a read file lists no Message-ID", ErrBadOutgoing)
	}
	return m, nil
}

// jsonPayload converts a JSON body to CBOR; an empty body is no payload.
func jsonPayload(what, body string) (cbor.RawMessage, error) {
	if strings.TrimSpace(body) == "" {
		return nil, nil
	}
	if len(body) > proto.MaxBodySize {
		return nil, WithHint(fmt.Errorf("%w: %s of %d bytes exceeds the limit of 256 KiB (%d bytes)", ErrBadOutgoing, what, len(body), proto.MaxBodySize),
			"send a path or URL to the data instead")
	}
	raw, err := proto.JSONToCBOR([]byte(body))
	if err != nil {
		return nil, WithHint(fmt.Errorf("%w: body: %s: %w", ErrBadOutgoing, what, err), "the body of a request or response is one JSON value, or empty")
	}
	if len(raw) > proto.MaxBodySize {
		return nil, WithHint(fmt.Errorf("%w: %s of %d bytes (as CBOR) exceeds the limit of 256 KiB (%d bytes)", ErrBadOutgoing, what, len(raw), proto.MaxBodySize),
			"send a path or URL to the data instead")
	}
	return raw, nil
}

// HintError is an error with advice for the agent, written as the
// "hint:" line of a .error file. A send function may return one.
type HintError struct {
	Err  error
	Hint string
}

func (e *HintError) Error() string { return e.Err.Error() }
func (e *HintError) Unwrap() error { return e.Err }

// WithHint returns err with a hint.
func WithHint(err error, hint string) error { return &HintError{Err: err, Hint: hint} }

// Hint returns the hint err carries, or "".
func Hint(err error) string {
	if he, ok := errors.AsType[*HintError](err); ok {
		return he.Hint
	}
	return ""
}

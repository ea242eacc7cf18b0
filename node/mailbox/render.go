package mailbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/proto"
)

// Item is one delivered envelope to mirror, with the local facts that the
// envelope does not carry. The caller resolves names: the mailbox never
// looks anything up.
type Item struct {
	Env *proto.SignedEnvelope
	// Priority is the inbox priority: "high", "normal" or "low". Empty
	// omits the Priority header.
	Priority string
	// FromHistory marks an envelope that arrived through history sync.
	FromHistory bool
	// Delivered is when the envelope was delivered; it names the file and
	// its day directory. Zero means now.
	Delivered time.Time
	// FromName is the sender's roster name; empty renders as "-".
	FromName string
	// ToText is the To header: "#general" for a channel, "@bob" (or
	// "@<fingerprint>") for a peer. Empty renders the destination by id:
	// "#<channel id>" or "@<fingerprint>".
	ToText string
	// Failure, when set, marks an envelope of this node's own that was
	// not delivered: the file is a delivery_failed item (Kind header
	// delivery_failed, the envelope's kind in Failed-Kind).
	Failure *Failure
	// Folder is the day's folder the file goes to: "" or [FolderInbox]
	// for an unread inbox item, [FolderRead] for a read one, [FolderSent]
	// for an envelope this node sent.
	Folder string
}

// Failure says why an envelope of this node's was not delivered.
type Failure struct {
	// State is "expired" (never acknowledged within its life) or
	// "refused" (given up before it expired, for Reason).
	State  string
	Reason string
}

// KindDeliveryFailed is the Kind header of a delivery_failed item.
const KindDeliveryFailed = "delivery_failed"

func validFailure(state string) bool { return state == "expired" || state == "refused" }

// Armor lines.
const (
	ArmorBegin = "-----BEGIN MESHD ENVELOPE-----"
	ArmorEnd   = "-----END MESHD ENVELOPE-----"
	// armorWidth is the length of a full base64 line in the armor block.
	armorWidth = 76
)

// headerSep is the line between the headers and the body.
const headerSep = "---"

// timeLayout is RFC 3339 in UTC with milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

// ErrUnsupportedKind is returned for envelopes that never reach the
// inbox (presence, history requests and responses), so are never mirrored.
var ErrUnsupportedKind = errors.New("envelope kind is never mirrored")

// header is one header line.
type header struct{ name, value string }

// Render returns the mirror file of it, as [Mirror.Write] writes it. See
// the package documentation for the format.
func Render(it Item) ([]byte, error) {
	hs, body, err := render(it)
	if err != nil {
		return nil, err
	}
	return assemble(hs, body, it.Env.Raw), nil
}

// render returns the headers and the body of it.
func render(it Item) ([]header, string, error) {
	if it.Env == nil {
		return nil, "", errors.New("mailbox: item without an envelope")
	}
	if len(it.Env.Raw) == 0 {
		return nil, "", fmt.Errorf("mailbox: envelope %s without its wire form", it.Env.ID)
	}
	hs, err := headers(it)
	if err != nil {
		return nil, "", err
	}
	body, err := renderBody(&it.Env.Envelope)
	if err != nil {
		return nil, "", err
	}
	return hs, body, nil
}

// headers returns the header lines of it, in order.
func headers(it Item) ([]header, error) {
	e := &it.Env.Envelope
	switch e.Kind {
	case proto.KindMessage, proto.KindRequest, proto.KindResponse:
	default:
		return nil, fmt.Errorf("mailbox: envelope %s: %w: %s", e.ID, ErrUnsupportedKind, e.Kind)
	}
	to, err := toValue(it.ToText, e.To)
	if err != nil {
		return nil, fmt.Errorf("mailbox: envelope %s: %w", e.ID, err)
	}
	if it.Priority != "" && !validPriority(it.Priority) {
		return nil, fmt.Errorf("mailbox: envelope %s: priority %q (want high, normal or low)", e.ID, it.Priority)
	}
	hs := make([]header, 0, 16)
	add := func(name, value string) { hs = append(hs, header{name, value}) }
	add("From", fromValue(it.FromName, e.From))
	add("From-Key", e.From.String())
	add("To", to)
	if e.To.Kind == proto.DestChannel {
		add("Channel-ID", e.To.Channel.String())
	}
	if it.Failure != nil {
		if !validFailure(it.Failure.State) {
			return nil, fmt.Errorf("mailbox: envelope %s: delivery %q (want expired or refused)", e.ID, it.Failure.State)
		}
		add("Kind", KindDeliveryFailed)
	} else if _, ok := subagentOf(e); ok {
		add("Kind", KindSubagentResult)
	} else {
		add("Kind", e.Kind.String())
	}
	add("Date", formatTime(e.Time()))
	add("Expires", formatTime(e.Expires()))
	add("Message-ID", e.ID.String())
	add("Seq", strconv.FormatUint(e.Seq, 10))
	add("Epoch", e.Epoch.String())
	if it.Priority != "" {
		add("Priority", it.Priority)
	}
	if f := it.Failure; f != nil {
		add("Failed-Kind", e.Kind.String())
		add("Delivery", f.State)
		if f.Reason != "" {
			add("Delivery-Reason", clean(f.Reason))
		}
	}
	if sa, ok := subagentOf(e); ok {
		add("Subagent-ID", clean(sa.ID))
	}
	switch e.Kind {
	case proto.KindMessage:
		if e.Message.InReplyTo != nil {
			add("In-Reply-To", e.Message.InReplyTo.String())
		}
	case proto.KindRequest:
		r := e.Request
		add("Request-ID", r.RequestID.String())
		add("Intent", clean(r.Intent))
		add("Hop", strconv.Itoa(int(r.Hop)))
		if r.ReplyTo != nil {
			add("Reply-To", r.ReplyTo.String())
		}
	case proto.KindResponse:
		add("Request-ID", e.Response.RequestID.String())
		add("Status", e.Response.Status.String())
	}
	if as := e.Attachments(); len(as) > 0 {
		add("Attachments", attachmentsValue(as))
	}
	if it.FromHistory {
		add("Source", sourceHistory)
	}
	return hs, nil
}

// attachmentsValue is the Attachments header: each attachment as its
// quoted name, its size in bytes and its SHA-256, separated by ", ":
// "fix.patch" 262148 bytes sha256 c17e…
func attachmentsValue(as []proto.Attachment) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d bytes sha256 %s", strconv.Quote(a.Name), a.Size, a.SHA256)
	}
	return clean(b.String())
}

// sourceHistory is the only value of the Source header.
const sourceHistory = "history"

func validPriority(p string) bool { return p == "high" || p == "normal" || p == "low" }

// fromValue is the From header: "name (fingerprint)", "-" for no name.
func fromValue(name string, k proto.PubKey) string {
	if name == "" {
		name = "-"
	}
	return clean(name) + " (" + k.Fingerprint() + ")"
}

// toValue is the To header: the caller's text, checked against the kind
// of destination, or the destination by id.
func toValue(text string, d proto.Destination) (string, error) {
	switch d.Kind {
	case proto.DestChannel:
		if text == "" {
			return "#" + d.Channel.String(), nil
		}
		if !strings.HasPrefix(text, "#") || len(text) == 1 {
			return "", fmt.Errorf("to %q: a channel destination is written #name", text)
		}
	case proto.DestPeer:
		if text == "" {
			return "@" + d.Peer.Fingerprint(), nil
		}
		if !strings.HasPrefix(text, "@") || len(text) == 1 {
			return "", fmt.Errorf("to %q: a peer destination is written @name", text)
		}
	default:
		return "", fmt.Errorf("%w: destination %s", ErrUnsupportedKind, d)
	}
	return clean(text), nil
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// clean makes s safe as a header value: every control character, line or
// paragraph separator and byte that is not UTF-8 becomes "?".
func clean(s string) string {
	ok := true
	for i, r := range s {
		if badRune(r) || r == utf8.RuneError && isInvalidAt(s, i) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if badRune(r) || r == utf8.RuneError && isInvalidAt(s, i) {
			b.WriteByte('?')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func badRune(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }

// isInvalidAt reports whether the RuneError at s[i] stands for a byte that
// is not UTF-8, rather than an encoded U+FFFD.
func isInvalidAt(s string, i int) bool {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n == 1
}

// renderBody returns the body of e: a message's text, or a request's
// params or a response's result as indented JSON, with control and bidi
// characters escaped (see bodyText).
func renderBody(e *proto.Envelope) (string, error) {
	b, err := renderRawBody(e)
	return bodyText(b), err
}

// renderRawBody is renderBody without the escapes: the body as versions
// before them wrote it, which [Verify] still accepts.
func renderRawBody(e *proto.Envelope) (string, error) {
	switch e.Kind {
	case proto.KindMessage:
		return e.Message.Body, nil
	case proto.KindRequest:
		return jsonBody(e.ID.String(), "params", e.Request.Params)
	case proto.KindResponse:
		return jsonBody(e.ID.String(), "result", e.Response.Result)
	}
	return "", fmt.Errorf("mailbox: envelope %s: %w: %s", e.ID, ErrUnsupportedKind, e.Kind)
}

func jsonBody(id, what string, raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	js, err := proto.CBORToJSON(raw)
	if err != nil {
		return "", fmt.Errorf("mailbox: envelope %s: %s: %w", id, what, err)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, js, "", "  "); err != nil {
		return "", fmt.Errorf("mailbox: envelope %s: %s: %w", id, what, err)
	}
	return b.String(), nil
}

// bodyRegion is what the file holds between the "---" line and the armor
// block: the body, plus "\n" unless it is empty or ends in one.
func bodyRegion(body string) string { return string(appendBodyRegion(nil, body)) }

// appendBodyRegion appends bodyRegion(body) to dst.
func appendBodyRegion(dst []byte, body string) []byte {
	dst = append(dst, body...)
	if body != "" && !strings.HasSuffix(body, "\n") {
		dst = append(dst, '\n')
	}
	return dst
}

// armor returns the armor block of raw, its last line included.
func armor(raw []byte) string { return string(appendArmor(nil, raw)) }

// armorLineBytes is how many envelope bytes one full armor line encodes.
const armorLineBytes = armorWidth / 4 * 3

// appendArmor appends the armor block of raw to dst: the base64 of raw in
// lines of armorWidth characters, between the begin and end lines. Each
// full line encodes armorLineBytes bytes, so encoding line by line gives
// the same text as encoding the whole and cutting it.
func appendArmor(dst, raw []byte) []byte {
	dst = append(dst, ArmorBegin...)
	dst = append(dst, '\n')
	for len(raw) > 0 {
		n := min(len(raw), armorLineBytes)
		dst = base64.StdEncoding.AppendEncode(dst, raw[:n])
		dst = append(dst, '\n')
		raw = raw[n:]
	}
	dst = append(dst, ArmorEnd...)
	return append(dst, '\n')
}

// armorSize bounds the length of raw's armor block.
func armorSize(raw []byte) int {
	enc := base64.StdEncoding.EncodedLen(len(raw))
	return len(ArmorBegin) + len(ArmorEnd) + enc + enc/armorWidth + 3
}

// assemble joins the parts of a mirror file.
func assemble(hs []header, body string, raw []byte) []byte {
	n := len(headerSep) + 2 + len(body) + armorSize(raw)
	for _, h := range hs {
		n += len(h.name) + len(h.value) + 3
	}
	b := make([]byte, 0, n)
	for _, h := range hs {
		b = append(b, h.name...)
		b = append(b, ": "...)
		b = append(b, h.value...)
		b = append(b, '\n')
	}
	b = append(b, headerSep...)
	b = append(b, '\n')
	b = appendBodyRegion(b, body)
	return appendArmor(b, raw)
}

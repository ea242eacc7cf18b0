package proto

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/google/uuid"
)

// Kind is the type of an envelope's payload. ONLY APPEND TO THIS LIST:
// the numbers travel on the wire.
type Kind uint8

const (
	KindMessage         Kind = 1
	KindRequest         Kind = 2
	KindResponse        Kind = 3
	KindPresence        Kind = 4
	KindHistoryRequest  Kind = 5
	KindHistoryResponse Kind = 6
)

var kindNames = map[Kind]string{
	KindMessage: "message", KindRequest: "request", KindResponse: "response",
	KindPresence: "presence", KindHistoryRequest: "history-request", KindHistoryResponse: "history-response",
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Protocol limits and defaults.
const (
	// MaxEnvelopeSize bounds one encoded envelope, outer wrapper included.
	// The largest legitimate envelope is a HistoryResponse holding
	// MaxHistoryBytes of other envelopes.
	MaxEnvelopeSize = MaxHistoryBytes + 64<<10
	// MaxBodySize bounds Message.Body and the CBOR of Request params and
	// Response results.
	MaxBodySize = 256 << 10
	// MaxIntentLen bounds Request.Intent.
	MaxIntentLen = 256
	// MaxProgressNote bounds the result (the note) of a progress Response.
	MaxProgressNote = 1024
	// MaxHop is the highest Request hop accepted (hop > 3 is rejected).
	MaxHop = 3
	// DefaultTTL is the default envelope lifetime in seconds.
	DefaultTTL = 300
	// MaxClockSkew is how far in the future an envelope's ts may be.
	MaxClockSkew = 30 * time.Second
	// DefaultHistoryMessages and MaxHistoryBytes are the per-response
	// history limits; MaxHistoryMessages caps what a peer may ask.
	DefaultHistoryMessages = 100
	MaxHistoryMessages     = 1000
	MaxHistoryBytes        = 1 << 20
)

// Envelope is the signed body of every message. Its canonical CBOR is what
// the signature covers. Exactly one payload field is set and it matches Kind.
//
// Wire form (integer keys): 0 id, 1 from, 2 to, 3 kind, 4 ts (Unix ms),
// 5 ttl_secs, 6 sender_seq, 7 sender_epoch, then one of 8 message,
// 9 request, 10 response, 11 presence, 12 history_request, 13 history_response.
type Envelope struct {
	ID    uuid.UUID   `cbor:"0,keyasint"`
	From  PubKey      `cbor:"1,keyasint"`
	To    Destination `cbor:"2,keyasint"`
	Kind  Kind        `cbor:"3,keyasint"`
	TS    int64       `cbor:"4,keyasint"`
	TTL   uint32      `cbor:"5,keyasint"`
	Seq   uint64      `cbor:"6,keyasint"`
	Epoch uuid.UUID   `cbor:"7,keyasint"`

	Message         *Message         `cbor:"8,keyasint,omitempty"`
	Request         *Request         `cbor:"9,keyasint,omitempty"`
	Response        *Response        `cbor:"10,keyasint,omitempty"`
	Presence        *Presence        `cbor:"11,keyasint,omitempty"`
	HistoryRequest  *HistoryRequest  `cbor:"12,keyasint,omitempty"`
	HistoryResponse *HistoryResponse `cbor:"13,keyasint,omitempty"`
}

// Time returns ts as a time.Time.
func (e *Envelope) Time() time.Time { return time.UnixMilli(e.TS) }

// Expires returns the instant after which the envelope is expired.
func (e *Envelope) Expires() time.Time {
	return e.Time().Add(time.Duration(e.TTL) * time.Second)
}

// SignedEnvelope is an [Envelope] together with the exact bytes that were
// signed and the signature. Raw is the complete wire form; forward Raw,
// never a re-encoding.
type SignedEnvelope struct {
	Envelope
	Signed []byte    // canonical CBOR of Envelope
	Sig    Signature // over DomainEnvelope || Signed, by Envelope.From
	Raw    []byte    // wire form: {0: Signed, 1: Sig}
}

type wireEnvelope struct {
	Signed []byte    `cbor:"0,keyasint"`
	Sig    Signature `cbor:"1,keyasint"`
}

// Envelope validation errors; each wraps [ErrInvalid].
var ErrInvalid = errors.New("invalid envelope")

// SignEnvelope validates e, encodes it canonically and signs it. e.From
// must be key's public key.
func SignEnvelope(key ed25519.PrivateKey, e *Envelope) (*SignedEnvelope, error) {
	if !e.From.Equal(PubKeyOf(key)) {
		return nil, fmt.Errorf("%w: from is not the signing key", ErrInvalid)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	signed, err := Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	se := &SignedEnvelope{Envelope: *e, Signed: signed, Sig: Sign(key, DomainEnvelope, signed)}
	se.Raw, err = Marshal(wireEnvelope{Signed: signed, Sig: se.Sig})
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	if len(se.Raw) > MaxEnvelopeSize {
		return nil, fmt.Errorf("%w: envelope of %d bytes exceeds %d", ErrTooLarge, len(se.Raw), MaxEnvelopeSize)
	}
	return se, nil
}

// ParseEnvelope decodes a wire envelope strictly and checks that both the
// wrapper and the signed body are canonical and that the body is valid. It
// does not verify the signature, so a caller can drop duplicates by id
// first; call [SignedEnvelope.Verify] before trusting anything in it.
//
// The returned Raw and Signed alias raw: do not modify raw afterwards.
func ParseEnvelope(raw []byte) (*SignedEnvelope, error) {
	if len(raw) > MaxEnvelopeSize {
		return nil, fmt.Errorf("envelope of %d bytes: %w (limit %d)", len(raw), ErrTooLarge, MaxEnvelopeSize)
	}
	se := &SignedEnvelope{Raw: raw}
	if signed, ok := splitWire(raw, &se.Sig); ok {
		se.Signed = signed
	} else {
		// Not the canonical wrapper: let the general decoder say why.
		var w wireEnvelope
		if err := UnmarshalCanonical(raw, &w); err != nil {
			return nil, fmt.Errorf("envelope: %w", err)
		}
		se.Signed, se.Sig = w.Signed, w.Sig
	}
	if err := UnmarshalCanonical(se.Signed, &se.Envelope); err != nil {
		return nil, fmt.Errorf("envelope body: %w", err)
	}
	if err := se.Envelope.Validate(); err != nil {
		return nil, err
	}
	return se, nil
}

// splitWire is the fast path of [ParseEnvelope]: it recognises the one
// canonical wrapper, a2 00 <bstr signed> 01 58 40 <64-byte sig>, without
// decoding or copying the signed bytes, and returns them (aliasing raw).
// It reports false for every other input, including every non-canonical
// variant; the general decoder then rejects those with a precise error.
func splitWire(raw []byte, sig *Signature) ([]byte, bool) {
	const sigPart = 3 + SignatureSize // 01 58 40 <sig>
	if len(raw) < 3+sigPart || raw[0] != 0xa2 || raw[1] != 0x00 {
		return nil, false
	}
	n, hl, ok := bstrHead(raw[2:])
	if rest := len(raw) - 2 - hl - sigPart; !ok || rest < 0 || n != uint64(rest) {
		return nil, false
	}
	signed := raw[2+hl : len(raw)-sigPart]
	tail := raw[len(raw)-sigPart:]
	if tail[0] != 0x01 || tail[1] != 0x58 || tail[2] != SignatureSize {
		return nil, false
	}
	copy(sig[:], tail[3:])
	return signed, true
}

// bstrHead decodes the head of a definite-length byte string in its
// shortest form, returning the length and the size of the head.
func bstrHead(b []byte) (n uint64, headLen int, ok bool) {
	if len(b) == 0 || b[0]>>5 != 2 {
		return 0, 0, false
	}
	ai := b[0] & 0x1f
	var least uint64 // the smallest length that needs this head size
	switch {
	case ai < 24:
		return uint64(ai), 1, true
	case ai == 24:
		headLen, least = 2, 24
	case ai == 25:
		headLen, least = 3, 1<<8
	case ai == 26:
		headLen, least = 5, 1<<16
	case ai == 27:
		headLen, least = 9, 1<<32
	default:
		return 0, 0, false
	}
	if len(b) < headLen {
		return 0, 0, false
	}
	for _, c := range b[1:headLen] {
		n = n<<8 | uint64(c)
	}
	if n < least {
		return 0, 0, false
	}
	return n, headLen, true
}

// Verify checks the signature over the received signed bytes with the
// key in From. It never re-encodes.
func (se *SignedEnvelope) Verify() error {
	return Verify(se.From, DomainEnvelope, se.Signed, se.Sig)
}

// Validate checks the structural rules that do not depend on local state:
// a set id and epoch, a valid destination, exactly one payload matching
// Kind, and the size and range limits of each payload.
func (e *Envelope) Validate() error {
	if e.ID == uuid.Nil {
		return fmt.Errorf("%w: nil id", ErrInvalid)
	}
	if e.Epoch == uuid.Nil {
		return fmt.Errorf("%w: nil sender_epoch", ErrInvalid)
	}
	if e.From.IsZero() {
		return fmt.Errorf("%w: zero from key", ErrInvalid)
	}
	if e.TTL == 0 {
		return fmt.Errorf("%w: ttl_secs is 0", ErrInvalid)
	}
	if err := e.To.validate(); err != nil {
		return err
	}
	n := 0
	for _, set := range []bool{e.Message != nil, e.Request != nil, e.Response != nil,
		e.Presence != nil, e.HistoryRequest != nil, e.HistoryResponse != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: %d payloads, want exactly 1", ErrInvalid, n)
	}
	switch e.Kind {
	case KindMessage:
		if e.Message == nil {
			break
		}
		if e.To.Kind == DestOrg {
			return fmt.Errorf("%w: a message must be addressed to a channel or a peer", ErrInvalid)
		}
		return e.Message.validate()
	case KindRequest:
		if e.Request == nil {
			break
		}
		if e.To.Kind != DestPeer {
			return fmt.Errorf("%w: a request must be addressed to a peer", ErrInvalid)
		}
		return e.Request.validate()
	case KindResponse:
		if e.Response == nil {
			break
		}
		if e.To.Kind != DestPeer {
			return fmt.Errorf("%w: a response must be addressed to a peer", ErrInvalid)
		}
		return e.Response.validate()
	case KindPresence:
		if e.Presence == nil {
			break
		}
		if e.To.Kind != DestOrg {
			return fmt.Errorf("%w: presence must be addressed to the org", ErrInvalid)
		}
		return e.Presence.validate()
	case KindHistoryRequest:
		if e.HistoryRequest == nil {
			break
		}
		if e.To.Kind != DestPeer {
			return fmt.Errorf("%w: a history request must be addressed to a peer", ErrInvalid)
		}
		return e.HistoryRequest.validate()
	case KindHistoryResponse:
		if e.HistoryResponse == nil {
			break
		}
		if e.To.Kind != DestPeer {
			return fmt.Errorf("%w: a history response must be addressed to a peer", ErrInvalid)
		}
		return e.HistoryResponse.validate()
	default:
		return fmt.Errorf("%w: unknown kind %d", ErrInvalid, e.Kind)
	}
	return fmt.Errorf("%w: kind %s without its payload", ErrInvalid, e.Kind)
}

// Message is a plain text message to a channel or a peer.
// Wire: {0: text body, ?1: bstr(16) in_reply_to envelope id,
// ?2: [+ attachment]}.
type Message struct {
	Body      string     `cbor:"0,keyasint"`
	InReplyTo *uuid.UUID `cbor:"1,keyasint,omitempty"`
	// Attachments lists the files beside the message (§6.8). A node that
	// predates them drops a Message with key 2 as malformed.
	Attachments []Attachment `cbor:"2,keyasint,omitempty"`
}

func (m *Message) validate() error {
	if len(m.Body) > MaxBodySize {
		return fmt.Errorf("%w: body of %d bytes exceeds %d", ErrInvalid, len(m.Body), MaxBodySize)
	}
	if !utf8.ValidString(m.Body) {
		return fmt.Errorf("%w: body is not valid UTF-8", ErrInvalid)
	}
	if m.InReplyTo != nil && *m.InReplyTo == uuid.Nil {
		// No envelope has the nil id: "no parent" is the absent key.
		return fmt.Errorf("%w: nil in_reply_to", ErrInvalid)
	}
	return checkAttachments(m.Attachments)
}

// Request asks a peer to do something. It is passive data: the receiver
// decides. Wire: {0: request_id, 1: intent, ?2: params (JSON-model CBOR),
// ?3: reply_to (parent request_id), 4: hop, ?5: [+ attachment] inputs}.
type Request struct {
	RequestID   uuid.UUID       `cbor:"0,keyasint"`
	Intent      string          `cbor:"1,keyasint"`
	Params      cbor.RawMessage `cbor:"2,keyasint,omitempty"`
	ReplyTo     *uuid.UUID      `cbor:"3,keyasint,omitempty"`
	Hop         uint8           `cbor:"4,keyasint"`
	Attachments []Attachment    `cbor:"5,keyasint,omitempty"`
}

// ErrHopLimit is wrapped when a Request's hop exceeds [MaxHop].
var ErrHopLimit = errors.New("hop limit exceeded")

func (r *Request) validate() error {
	if r.RequestID == uuid.Nil {
		return fmt.Errorf("%w: nil request_id", ErrInvalid)
	}
	if r.Intent == "" || len(r.Intent) > MaxIntentLen || !utf8.ValidString(r.Intent) {
		return fmt.Errorf("%w: intent must be 1..%d bytes", ErrInvalid, MaxIntentLen)
	}
	if r.Hop > MaxHop {
		return fmt.Errorf("%w: %w: hop %d > %d", ErrInvalid, ErrHopLimit, r.Hop, MaxHop)
	}
	if (r.ReplyTo == nil) != (r.Hop == 0) {
		return fmt.Errorf("%w: reply_to must be set exactly when hop > 0", ErrInvalid)
	}
	if r.ReplyTo != nil && *r.ReplyTo == uuid.Nil {
		return fmt.Errorf("%w: nil reply_to", ErrInvalid)
	}
	if err := checkAttachments(r.Attachments); err != nil {
		return err
	}
	return checkPayload("params", r.Params)
}

func checkPayload(name string, raw cbor.RawMessage) error {
	if raw == nil {
		return nil
	}
	if len(raw) > MaxBodySize {
		return fmt.Errorf("%w: %s of %d bytes exceeds %d", ErrInvalid, name, len(raw), MaxBodySize)
	}
	if err := CheckJSONValue(raw); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
	}
	return nil
}

// Status is the outcome a Response reports. ONLY APPEND.
type Status uint8

const (
	StatusAccepted  Status = 1
	StatusRejected  Status = 2
	StatusCompleted Status = 3
	StatusFailed    Status = 4
	// StatusProgress reports work under way; several may come before the
	// final answer, and each may carry a short note as its result.
	StatusProgress Status = 5
)

var statusNames = []string{"", "accepted", "rejected", "completed", "failed", "progress"}

// Final reports whether s ends a request (rejected, completed, failed);
// accepted and progress may be followed by more answers.
func (s Status) Final() bool { return s != StatusAccepted && s != StatusProgress }

func (s Status) String() string {
	if int(s) > 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ParseStatus parses the lowercase name of a Status.
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		if i > 0 && n == s {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("unknown status %q (want accepted, progress, rejected, completed or failed)", s)
}

// Response answers a Request. Wire: {0: request_id, 1: status, ?2: result,
// ?3: [+ attachment] results}.
type Response struct {
	RequestID   uuid.UUID       `cbor:"0,keyasint"`
	Status      Status          `cbor:"1,keyasint"`
	Result      cbor.RawMessage `cbor:"2,keyasint,omitempty"`
	Attachments []Attachment    `cbor:"3,keyasint,omitempty"`
}

func (r *Response) validate() error {
	if r.RequestID == uuid.Nil {
		return fmt.Errorf("%w: nil request_id", ErrInvalid)
	}
	if r.Status < StatusAccepted || r.Status > StatusProgress {
		return fmt.Errorf("%w: unknown status %d", ErrInvalid, r.Status)
	}
	if r.Status == StatusProgress && len(r.Result) > MaxProgressNote {
		return fmt.Errorf("%w: progress note of %d bytes exceeds %d", ErrInvalid, len(r.Result), MaxProgressNote)
	}
	if err := checkAttachments(r.Attachments); err != nil {
		return err
	}
	return checkPayload("result", r.Result)
}

// PresenceState is a node's availability. ONLY APPEND.
type PresenceState uint8

const (
	Online  PresenceState = 1
	Away    PresenceState = 2
	Offline PresenceState = 3
)

var presenceNames = []string{"", "online", "away", "offline"}

func (p PresenceState) String() string {
	if int(p) > 0 && int(p) < len(presenceNames) {
		return presenceNames[p]
	}
	return fmt.Sprintf("presence(%d)", uint8(p))
}

// ParsePresenceState parses "online", "away" or "offline".
func ParsePresenceState(s string) (PresenceState, error) {
	for i, n := range presenceNames {
		if i > 0 && n == s {
			return PresenceState(i), nil
		}
	}
	return 0, fmt.Errorf("unknown presence state %q (want online, away or offline)", s)
}

// MarshalText implements encoding.TextMarshaler for JSON output.
func (p PresenceState) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Presence announces a node's state. The highest seq per sender wins.
// Wire: {0: state, 1: seq, ? 2: note}. A Presence with a note travels
// only in a presence-note frame ([FramePresenceNote]).
type Presence struct {
	State PresenceState `cbor:"0,keyasint"`
	Seq   uint64        `cbor:"1,keyasint"`
	// Note is a short status, such as "running tests on main": at most
	// MaxPresenceNote bytes on one line, without control characters.
	Note string `cbor:"2,keyasint,omitempty"`
}

// MaxPresenceNote bounds a presence note, in bytes.
const MaxPresenceNote = 256

// ErrPresenceNote is wrapped when a presence note breaks its rules.
var ErrPresenceNote = errors.New("bad presence note")

func (p *Presence) validate() error {
	if p.State < Online || p.State > Offline {
		return fmt.Errorf("%w: unknown presence state %d", ErrInvalid, p.State)
	}
	return CheckPresenceNote(p.Note)
}

// CheckPresenceNote checks a presence note: at most MaxPresenceNote bytes
// of UTF-8 without control characters (line breaks included), U+2028,
// U+2029 or bidi controls. The empty note is valid (no note).
func CheckPresenceNote(note string) error {
	if len(note) > MaxPresenceNote {
		return fmt.Errorf("%w: %w: %d bytes, at most %d", ErrInvalid, ErrPresenceNote, len(note), MaxPresenceNote)
	}
	if !utf8.ValidString(note) {
		return fmt.Errorf("%w: %w: not UTF-8", ErrInvalid, ErrPresenceNote)
	}
	for _, r := range note {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) {
			return fmt.Errorf("%w: %w: control character %U", ErrInvalid, ErrPresenceNote, r)
		}
	}
	return nil
}

// SeqMark is how far a reader has seen one sender's stream in a channel.
// Wire: {0: sender, 1: epoch, 2: last_seq}.
type SeqMark struct {
	Sender  PubKey    `cbor:"0,keyasint"`
	Epoch   uuid.UUID `cbor:"1,keyasint"`
	LastSeq uint64    `cbor:"2,keyasint"`
}

// HistoryRequest asks a peer for a channel's history.
// Wire: {0: channel_id, 1: since_ts (ms), ?2: [* SeqMark] sorted by
// (sender, epoch), 3: max_messages, 4: max_bytes}.
type HistoryRequest struct {
	ChannelID        uuid.UUID `cbor:"0,keyasint"`
	SinceTS          int64     `cbor:"1,keyasint"`
	SinceSeqBySender []SeqMark `cbor:"2,keyasint,omitempty"`
	MaxMessages      uint32    `cbor:"3,keyasint"`
	MaxBytes         uint32    `cbor:"4,keyasint"`
}

func (h *HistoryRequest) validate() error {
	if h.ChannelID == uuid.Nil {
		return fmt.Errorf("%w: nil channel_id", ErrInvalid)
	}
	if h.MaxMessages == 0 || h.MaxMessages > MaxHistoryMessages {
		return fmt.Errorf("%w: max_messages must be 1..%d", ErrInvalid, MaxHistoryMessages)
	}
	if h.MaxBytes == 0 || h.MaxBytes > MaxHistoryBytes {
		return fmt.Errorf("%w: max_bytes must be 1..%d", ErrInvalid, MaxHistoryBytes)
	}
	if len(h.SinceSeqBySender) > MaxArrayElements {
		return fmt.Errorf("%w: %d since_seq_by_sender entries exceed %d", ErrInvalid, len(h.SinceSeqBySender), MaxArrayElements)
	}
	for i := 1; i < len(h.SinceSeqBySender); i++ {
		a, b := h.SinceSeqBySender[i-1], h.SinceSeqBySender[i]
		if c := compareMark(a, b); c >= 0 {
			return fmt.Errorf("%w: since_seq_by_sender not sorted or duplicated", ErrInvalid)
		}
	}
	return nil
}

func compareMark(a, b SeqMark) int {
	for i := range a.Sender {
		if a.Sender[i] != b.Sender[i] {
			return int(a.Sender[i]) - int(b.Sender[i])
		}
	}
	for i := range a.Epoch {
		if a.Epoch[i] != b.Epoch[i] {
			return int(a.Epoch[i]) - int(b.Epoch[i])
		}
	}
	return 0
}

// HistoryStatus says whether a history request was served. ONLY APPEND.
type HistoryStatus uint8

const (
	HistoryOK HistoryStatus = 1
	// HistoryDisabled: the channel policy has allow_history_fetch false.
	HistoryDisabled HistoryStatus = 2
	// HistoryDenied: the requester may not read the channel.
	HistoryDenied HistoryStatus = 3
	// HistoryUnknownChannel: the responder has no policy for the channel.
	HistoryUnknownChannel HistoryStatus = 4
)

func (s HistoryStatus) String() string {
	switch s {
	case HistoryOK:
		return "ok"
	case HistoryDisabled:
		return "history disabled by channel policy"
	case HistoryDenied:
		return "requester may not read the channel"
	case HistoryUnknownChannel:
		return "unknown channel"
	}
	return fmt.Sprintf("history-status(%d)", uint8(s))
}

// HistoryResponse carries a page of a channel's history: complete wire
// envelopes, each still signed by its own sender.
// Wire: {0: channel_id, 1: in_reply_to (HistoryRequest envelope id),
// 2: status, ?3: [* bstr envelope], ?4: more}.
type HistoryResponse struct {
	ChannelID uuid.UUID     `cbor:"0,keyasint"`
	InReplyTo uuid.UUID     `cbor:"1,keyasint"`
	Status    HistoryStatus `cbor:"2,keyasint"`
	Messages  [][]byte      `cbor:"3,keyasint,omitempty"`
	More      bool          `cbor:"4,keyasint,omitempty"`
}

func (h *HistoryResponse) validate() error {
	if h.ChannelID == uuid.Nil {
		return fmt.Errorf("%w: nil channel_id", ErrInvalid)
	}
	if h.InReplyTo == uuid.Nil {
		return fmt.Errorf("%w: nil in_reply_to", ErrInvalid)
	}
	if h.Status < HistoryOK || h.Status > HistoryUnknownChannel {
		return fmt.Errorf("%w: unknown history status %d", ErrInvalid, h.Status)
	}
	if len(h.Messages) > MaxHistoryMessages {
		return fmt.Errorf("%w: %d history messages exceed %d", ErrInvalid, len(h.Messages), MaxHistoryMessages)
	}
	if h.Status != HistoryOK && len(h.Messages) > 0 {
		return fmt.Errorf("%w: refused history response carries messages", ErrInvalid)
	}
	return nil
}

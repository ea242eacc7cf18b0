package proto

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// DomainCard is the signing domain of agent cards (see [DomainEnvelope]).
const DomainCard = "meshd/card/v1\x00"

// Limits of an agent card (docs/PROTOCOL.md §19).
const (
	// MaxCardSize bounds the wire form of a card (the [SignedDoc]).
	MaxCardSize = 16 << 10
	// MaxCardDescription bounds Card.Description, in bytes.
	MaxCardDescription = 1024
	// MaxCardIntents bounds the intents one card lists.
	MaxCardIntents = 64
	// MaxCardSummary bounds an intent's one-line summary, in bytes.
	MaxCardSummary = 256
	// MaxCardTags bounds the tags of a card.
	MaxCardTags = 32
	// MaxCardTagLen bounds one tag, in bytes.
	MaxCardTagLen = 64
)

// Errors of [ParseCard] beyond the CBOR classes.
var (
	// ErrCardInvalid: the card decodes but breaks a rule of §19.
	ErrCardInvalid = errors.New("invalid card")
	// ErrCardNotSelf: the card is not signed by the key it describes.
	ErrCardNotSelf = errors.New("card not signed by its subject")
)

// CardIntent is one intent a card says its node serves. Wire:
// {0: text name, 1: text summary, ? 2: JSON-model map params schema}.
type CardIntent struct {
	Name    string `cbor:"0,keyasint"`
	Summary string `cbor:"1,keyasint"`
	// Params is a JSON Schema for the request's params, as a JSON-model
	// CBOR map (like Request.Params); absent when the card gives none.
	Params cbor.RawMessage `cbor:"2,keyasint,omitempty"`
}

// Card is an agent card: what one member says about itself. Wire (the
// body of a [SignedDoc] with exactly one signature, by Key, under
// [DomainCard]): {0: bstr(32) key, 1: uint version, 2: text description,
// 3: [* CardIntent], 4: [* text tag]}. A card with no description, no
// intents and no tags is a cleared card: it keeps the version, and says
// the node publishes nothing.
type Card struct {
	Key         PubKey       `cbor:"0,keyasint"`
	Version     uint64       `cbor:"1,keyasint"`
	Description string       `cbor:"2,keyasint"`
	Intents     []CardIntent `cbor:"3,keyasint"`
	Tags        []string     `cbor:"4,keyasint"`

	// Raw is the wire form the card was parsed from or signed into.
	Raw []byte `cbor:"-"`
	// Sig is the signature over DomainCard || body.
	Sig Signature `cbor:"-"`
	// body is the signed CBOR body.
	body []byte
}

// Empty reports whether c is a cleared card.
func (c *Card) Empty() bool {
	return c.Description == "" && len(c.Intents) == 0 && len(c.Tags) == 0
}

// Serves reports whether c lists intent.
func (c *Card) Serves(intent string) bool {
	for _, in := range c.Intents {
		if in.Name == intent {
			return true
		}
	}
	return false
}

// Validate checks the rules of §19 that need no signature.
func (c *Card) Validate() error {
	if c.Key == (PubKey{}) {
		return fmt.Errorf("%w: zero key", ErrCardInvalid)
	}
	if c.Version == 0 {
		return fmt.Errorf("%w: version 0", ErrCardInvalid)
	}
	if len(c.Description) > MaxCardDescription {
		return fmt.Errorf("%w: description of %d bytes (limit %d)", ErrCardInvalid, len(c.Description), MaxCardDescription)
	}
	if len(c.Intents) > MaxCardIntents {
		return fmt.Errorf("%w: %d intents (limit %d)", ErrCardInvalid, len(c.Intents), MaxCardIntents)
	}
	seen := map[string]bool{}
	for _, in := range c.Intents {
		if in.Name == "" || len(in.Name) > MaxIntentLen || !utf8.ValidString(in.Name) {
			return fmt.Errorf("%w: intent name must be 1..%d bytes", ErrCardInvalid, MaxIntentLen)
		}
		if seen[in.Name] {
			return fmt.Errorf("%w: intent %q listed twice", ErrCardInvalid, in.Name)
		}
		seen[in.Name] = true
		if len(in.Summary) > MaxCardSummary || strings.ContainsAny(in.Summary, "\r\n") {
			return fmt.Errorf("%w: summary of intent %q must be one line of at most %d bytes", ErrCardInvalid, in.Name, MaxCardSummary)
		}
		if len(in.Params) > 0 {
			if err := CheckJSONValue(in.Params); err != nil {
				return fmt.Errorf("params schema of intent %q: %w", in.Name, err)
			}
			if in.Params[0]>>5 != 5 {
				return fmt.Errorf("%w: params schema of intent %q is not an object", ErrCardInvalid, in.Name)
			}
		}
	}
	if len(c.Tags) > MaxCardTags {
		return fmt.Errorf("%w: %d tags (limit %d)", ErrCardInvalid, len(c.Tags), MaxCardTags)
	}
	tags := map[string]bool{}
	for _, t := range c.Tags {
		if t == "" || len(t) > MaxCardTagLen || strings.ContainsAny(t, "\r\n") {
			return fmt.Errorf("%w: a tag must be one line of 1..%d bytes", ErrCardInvalid, MaxCardTagLen)
		}
		if tags[t] {
			return fmt.Errorf("%w: tag %q listed twice", ErrCardInvalid, t)
		}
		tags[t] = true
	}
	return nil
}

// SignCard validates c, sets its Key to key's and signs it, filling Raw.
func SignCard(c *Card, key ed25519.PrivateKey) error {
	c.Key = PubKeyOf(key)
	if err := c.Validate(); err != nil {
		return err
	}
	body, err := Marshal(c)
	if err != nil {
		return fmt.Errorf("encode card: %w", err)
	}
	d := &SignedDoc{Body: body}
	d.AddSignature(key, DomainCard)
	raw, err := d.Encode()
	if err != nil {
		return fmt.Errorf("encode card: %w", err)
	}
	if len(raw) > MaxCardSize {
		return fmt.Errorf("card of %d bytes: %w (limit %d)", len(raw), ErrTooLarge, MaxCardSize)
	}
	c.Raw, c.Sig, c.body = raw, d.Sigs[0].Sig, body
	return nil
}

// ParseCard decodes a card's wire form strictly and canonically and
// checks its rules and that its one signer is its subject. It does not
// check the signature: call [Card.Verify].
func ParseCard(b []byte) (*Card, error) {
	if len(b) > MaxCardSize {
		return nil, fmt.Errorf("card of %d bytes: %w (limit %d)", len(b), ErrTooLarge, MaxCardSize)
	}
	d, err := ParseSignedDoc(b)
	if err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	if len(d.Sigs) != 1 {
		return nil, fmt.Errorf("%w: %d signatures, want 1", ErrCardInvalid, len(d.Sigs))
	}
	var c Card
	if err := UnmarshalCanonical(d.Body, &c); err != nil {
		return nil, fmt.Errorf("card body: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if d.Sigs[0].Signer != c.Key {
		return nil, fmt.Errorf("%w: signed by %s, about %s", ErrCardNotSelf, d.Sigs[0].Signer.Fingerprint(), c.Key.Fingerprint())
	}
	c.Raw, c.Sig, c.body = b, d.Sigs[0].Sig, d.Body
	return &c, nil
}

// Verify checks the card's signature by its subject.
func (c *Card) Verify() error {
	return Verify(c.Key, DomainCard, c.body, c.Sig)
}

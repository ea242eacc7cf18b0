package proto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// testCard returns a valid card of alice, signed.
func testCard(t testing.TB) *Card {
	t.Helper()
	c := &Card{Version: 7, Description: "CI runner", Tags: []string{"ci", "linux"},
		Intents: []CardIntent{
			{Name: "run-tests", Summary: "run go test on a branch", Params: mustJSON(t, `{"type":"object","properties":{"branch":{"type":"string"}}}`)},
			{Name: "fetch-logs", Summary: "tail a service's logs"},
		}}
	if err := SignCard(c, keyAlice); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCardRoundTrip(t *testing.T) {
	c := testCard(t)
	got, err := ParseCard(c.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	if got.Key != alice || got.Version != 7 || got.Description != "CI runner" || len(got.Intents) != 2 ||
		!bytes.Equal(got.Intents[0].Params, c.Intents[0].Params) || !got.Serves("fetch-logs") || got.Serves("deploy") || got.Empty() {
		t.Fatalf("parsed %+v", got)
	}
	// A cleared card is valid and empty.
	e := &Card{Version: 8}
	if err := SignCard(e, keyAlice); err != nil {
		t.Fatal(err)
	}
	if got, err := ParseCard(e.Raw); err != nil || !got.Empty() || got.Verify() != nil {
		t.Fatalf("cleared card: %+v %v", got, err)
	}
}

// signBody wraps body in a SignedDoc signed under DomainCard by each key.
func signBody(t testing.TB, body []byte, keys ...[]byte) []byte {
	t.Helper()
	d := &SignedDoc{Body: body}
	for _, k := range keys {
		switch {
		case bytes.Equal(k, keyAlice):
			d.AddSignature(keyAlice, DomainCard)
		case bytes.Equal(k, keyBob):
			d.AddSignature(keyBob, DomainCard)
		}
	}
	raw, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCardRejects: every rule of §19 refuses what breaks it, with the
// error class the receiver counts.
func TestCardRejects(t *testing.T) {
	good := testCard(t)
	body := func(mut func(c *Card)) []byte {
		c := *good
		c.Intents = append([]CardIntent(nil), good.Intents...)
		mut(&c)
		b, err := Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bodyOK := body(func(*Card) {})
	flipped := bytes.Clone(good.Raw)
	flipped[len(flipped)-1] ^= 1
	many := make([]CardIntent, MaxCardIntents+1)
	for i := range many {
		many[i] = CardIntent{Name: strings.Repeat("x", i+1)}
	}
	cases := []struct {
		name string
		raw  []byte
		want error
	}{
		{"too large", append(bytes.Clone(good.Raw), make([]byte, MaxCardSize)...), ErrTooLarge},
		{"not cbor", []byte{0xff, 0x00}, ErrMalformed},
		{"trailing byte", append(bytes.Clone(good.Raw), 0x00), ErrMalformed},
		{"body not a card", signBody(t, cMap(cUint(9), cUint(1)), keyAlice), ErrMalformed},
		{"non-canonical body", signBody(t, cCat(bodyOK[:1], cHeadWidth(mtUint, 0, 1), bodyOK[2:]), keyAlice), ErrNonCanonical},
		{"no signature", signBody(t, bodyOK), ErrCardInvalid},
		{"two signatures", signBody(t, bodyOK, keyAlice, keyBob), ErrCardInvalid},
		{"signed by another", signBody(t, bodyOK, keyBob), ErrCardNotSelf},
		{"version 0", signBody(t, body(func(c *Card) { c.Version = 0 }), keyAlice), ErrCardInvalid},
		{"long description", signBody(t, body(func(c *Card) { c.Description = strings.Repeat("d", MaxCardDescription+1) }), keyAlice), ErrCardInvalid},
		{"too many intents", signBody(t, body(func(c *Card) { c.Intents = many }), keyAlice), ErrCardInvalid},
		{"empty intent name", signBody(t, body(func(c *Card) { c.Intents[0].Name = "" }), keyAlice), ErrCardInvalid},
		{"duplicate intent", signBody(t, body(func(c *Card) { c.Intents[1].Name = c.Intents[0].Name }), keyAlice), ErrCardInvalid},
		{"two-line summary", signBody(t, body(func(c *Card) { c.Intents[0].Summary = "a\nb" }), keyAlice), ErrCardInvalid},
		{"schema not an object", signBody(t, body(func(c *Card) { c.Intents[0].Params = mustJSON(t, `[1]`) }), keyAlice), ErrCardInvalid},
		{"schema not JSON", signBody(t, body(func(c *Card) { c.Intents[0].Params = cBytes([]byte{1}) }), keyAlice), ErrMalformed},
		{"too many tags", signBody(t, body(func(c *Card) { c.Tags = strings.Split(strings.Repeat("t,", MaxCardTags)+"t", ",") }), keyAlice), ErrCardInvalid},
		{"duplicate tag", signBody(t, body(func(c *Card) { c.Tags = []string{"ci", "ci"} }), keyAlice), ErrCardInvalid},
		{"long tag", signBody(t, body(func(c *Card) { c.Tags = []string{strings.Repeat("t", MaxCardTagLen+1)} }), keyAlice), ErrCardInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCard(tc.raw)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseCard: %v, want %v", err, tc.want)
			}
		})
	}
	// A flipped signature bit parses and fails Verify.
	c, err := ParseCard(flipped)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered card: %v", err)
	}
	// Signing refuses what parsing would.
	if err := SignCard(&Card{Version: 1, Tags: []string{""}}, keyAlice); !errors.Is(err, ErrCardInvalid) {
		t.Fatalf("SignCard of an empty tag: %v", err)
	}
	big := &Card{Version: 1}
	for i := range MaxCardIntents {
		big.Intents = append(big.Intents, CardIntent{Name: strings.Repeat("n", 200) + string(rune('A'+i%26)) + strings.Repeat("z", i/26),
			Summary: strings.Repeat("s", MaxCardSummary)})
	}
	if err := SignCard(big, keyAlice); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SignCard of a %d-intent card: %v", len(big.Intents), err)
	}
}

// FuzzParseCard: the card decoder never panics, and what it accepts
// re-encodes to the same body and keeps to the limits.
func FuzzParseCard(f *testing.F) {
	c := testCard(f)
	f.Add(c.Raw)
	e := &Card{Version: 1}
	if err := SignCard(e, keyBob); err != nil {
		f.Fatal(err)
	}
	f.Add(e.Raw)
	f.Add([]byte{0xa2, 0x00, 0x41, 0xa0, 0x01, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCard(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid card: %v", err)
		}
		body, err := Marshal(c)
		if err != nil || !bytes.Equal(body, c.body) {
			t.Fatalf("accepted card does not re-encode: %x vs %x (%v)", c.body, body, err)
		}
		_ = c.Verify()
	})
}

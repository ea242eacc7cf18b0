package proto

import (
	"bytes"
	"reflect"
	"testing"
)

// cardVector is the known-answer vector of an agent card (§19).
func cardVector(t testing.TB) vector {
	t.Helper()
	c := &Card{Version: 1700000000000, Description: "CI runner", Tags: []string{"ci"},
		Intents: []CardIntent{{Name: "run-tests", Summary: "run go test", Params: mustJSON(t, `{"type":"object"}`)}}}
	if err := SignCard(c, keyAlice); err != nil {
		t.Fatal(err)
	}
	return vector{
		file: "14-card.txt", title: "Agent card (DomainCard)", card: c,
		notes: []string{
			"signed is the card body: key alice, version 1700000000000, description \"CI runner\",",
			"  intents [{name \"run-tests\", summary \"run go test\", params {\"type\": \"object\"}}], tags [\"ci\"]",
			"raw is the SignedDoc carrying it, with alice's one signature; it is the payload of a card frame (type 9)",
		},
		fields: []vecField{
			{"seed", seedOf(keyAlice)},
			{"pubkey", alice[:]},
			{"domain", []byte(DomainCard)},
			{"signed", c.body},
			{"signing_input", SigningInput(DomainCard, c.body)},
			{"sig", bytes.Clone(c.Sig[:])},
			{"raw", c.Raw},
		},
	}
}

func checkCardVector(t *testing.T, v *vector, f map[string][]byte) {
	t.Helper()
	c, err := ParseCard(f["raw"])
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.body, f["signed"]) || !bytes.Equal(c.Sig[:], f["sig"]) || !bytes.Equal(c.Key[:], f["pubkey"]) {
		t.Fatal("raw does not carry signed, sig and pubkey")
	}
	if !reflect.DeepEqual(c, v.card) {
		t.Fatalf("raw decodes to %+v, want %+v", c, v.card)
	}
}

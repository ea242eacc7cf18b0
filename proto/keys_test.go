package proto

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParsePubKey(t *testing.T) {
	raw := alice[:]
	good := "ed25519:" + base64.RawURLEncoding.EncodeToString(raw)

	// A key whose base64url form uses both '-' and '_', the characters in
	// which the URL alphabet differs from the standard one.
	var urlish PubKey
	for i := range urlish {
		urlish[i] = 0xfb // 111110 111111 ... → '-' and '_'
	}
	urlText := urlish.String()
	if !strings.ContainsAny(urlText, "-_") {
		t.Fatalf("fixture %s lacks URL-alphabet characters", urlText)
	}

	tests := []struct {
		name string
		in   string
		want PubKey
		ok   bool
	}{
		{"canonical", good, alice, true},
		{"url alphabet", urlText, urlish, true},
		{"all zero", "ed25519:" + strings.Repeat("A", 43), PubKey{}, true},
		{"missing prefix", strings.TrimPrefix(good, "ed25519:"), PubKey{}, false},
		{"wrong prefix", "ed448:" + strings.TrimPrefix(good, "ed25519:"), PubKey{}, false},
		{"uppercase prefix", "ED25519:" + strings.TrimPrefix(good, "ed25519:"), PubKey{}, false},
		{"empty", "", PubKey{}, false},
		{"prefix only", "ed25519:", PubKey{}, false},
		{"padding", good + "=", PubKey{}, false},
		{"standard base64", "ed25519:" + base64.RawStdEncoding.EncodeToString(urlish[:]), PubKey{}, false},
		{"standard base64 padded", "ed25519:" + base64.StdEncoding.EncodeToString(raw), PubKey{}, false},
		{"31 bytes", "ed25519:" + base64.RawURLEncoding.EncodeToString(raw[:31]), PubKey{}, false},
		{"33 bytes", "ed25519:" + base64.RawURLEncoding.EncodeToString(append(raw[:32:32], 0)), PubKey{}, false},
		{"not base64", "ed25519:" + strings.Repeat("!", 43), PubKey{}, false},
		{"trailing space", good + " ", PubKey{}, false},
		{"leading space", " " + good, PubKey{}, false},
		{"embedded newline", good[:20] + "\n" + good[20:], PubKey{}, false},
		{"newline in place of a character", good[:20] + "\n" + good[21:], PubKey{}, false},
		{"embedded carriage return", good[:20] + "\r" + good[20:], PubKey{}, false},
		{"hex", "ed25519:" + hex.EncodeToString(raw), PubKey{}, false},
		// 43 characters carry 258 bits; the 2 spare bits must be zero.
		{"non-zero trailing bits", good[:len(good)-1] + flipLastBits(good[len(good)-1]), PubKey{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePubKey(tt.in)
			if !tt.ok {
				if !errors.Is(err, ErrBadKey) {
					t.Fatalf("ParsePubKey(%q) = %v, %v; want ErrBadKey", tt.in, got, err)
				}
				var k PubKey
				if err := k.UnmarshalText([]byte(tt.in)); !errors.Is(err, ErrBadKey) {
					t.Fatalf("UnmarshalText(%q) = %v, want ErrBadKey", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePubKey(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParsePubKey(%q) = %x, want %x", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Fatalf("String() = %q, want %q", s, tt.in)
			}
		})
	}
}

// flipLastBits returns the base64url character that differs from c only
// in its lowest bit, which for a 32-byte key is a spare (must-be-zero) bit.
func flipLastBits(c byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return string(alphabet[i^1])
}

func TestPubKeyStringRoundTrip(t *testing.T) {
	for _, k := range []PubKey{alice, bob, carol, {}, {0xff, 0xfe}} {
		s := k.String()
		if !strings.HasPrefix(s, KeyPrefix) || len(s) != len(KeyPrefix)+43 || strings.ContainsAny(s, "=+/") {
			t.Errorf("String() = %q: not ed25519:<43 base64url chars>", s)
		}
		back, err := ParsePubKey(s)
		if err != nil || back != k {
			t.Errorf("ParsePubKey(%q) = %x, %v; want %x", s, back, err, k)
		}
	}
	// A known answer pins the text form.
	if got, want := alice.String(), "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"; got != want {
		t.Errorf("alice = %s, want %s", got, want)
	}
}

func TestFingerprintAndNodeID(t *testing.T) {
	for _, k := range []PubKey{alice, bob, {}} {
		sum := sha256.Sum256(k[:])
		if k.NodeID() != NodeID(sum) {
			t.Errorf("NodeID(%s) is not SHA-256 of the key", k)
		}
		full := hex.EncodeToString(sum[:])
		if got := k.NodeID().String(); got != full {
			t.Errorf("NodeID.String() = %s, want %s", got, full)
		}
		if got := k.Fingerprint(); got != full[:16] || len(got) != 16 {
			t.Errorf("Fingerprint() = %s, want %s", got, full[:16])
		}
		if got := k.NodeID().Short(); got != full[:16] {
			t.Errorf("Short() = %s, want %s", got, full[:16])
		}
	}
}

func TestPubKeyEqualIsZero(t *testing.T) {
	a2 := alice
	if !alice.Equal(a2) || alice.Equal(bob) {
		t.Fatal("Equal disagrees with byte equality")
	}
	for i := range len(alice) {
		k := alice
		k[i] ^= 1
		if alice.Equal(k) {
			t.Fatalf("keys differing in byte %d compare equal", i)
		}
	}
	if !(PubKey{}).IsZero() || alice.IsZero() {
		t.Fatal("IsZero wrong")
	}
	if !alice.Ed25519().Equal(keyAlice.Public()) {
		t.Fatal("PubKeyOf and Ed25519 do not round trip the stdlib key")
	}
}

func TestNodeIDLess(t *testing.T) {
	var a, b NodeID
	b[31] = 1
	if !a.Less(b) || b.Less(a) {
		t.Fatal("last byte ordering wrong")
	}
	if a.Less(a) {
		t.Fatal("Less must be irreflexive")
	}
	var c, d NodeID
	c[0], d[0], d[31] = 1, 0, 0xff
	if !d.Less(c) || c.Less(d) {
		t.Fatal("first byte must dominate")
	}
	// Exactly one direction holds for distinct ids, and it agrees with the
	// fingerprint's hex order (a bytewise order).
	x, y := alice.NodeID(), bob.NodeID()
	if x.Less(y) == y.Less(x) {
		t.Fatal("Less is not a strict order")
	}
	if x.Less(y) != (x.String() < y.String()) {
		t.Fatal("Less disagrees with hex order")
	}
}

func TestKeyJSON(t *testing.T) {
	type doc struct {
		Key  PubKey            `json:"key"`
		Node NodeID            `json:"node"`
		Map  map[PubKey]string `json:"map"`
	}
	in := doc{Key: alice, Node: bob.NodeID(), Map: map[PubKey]string{carol: "carol"}}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"key":"` + alice.String() + `","node":"` + bob.NodeID().String() + `","map":{"` + carol.String() + `":"carol"}}`
	if string(js) != want {
		t.Fatalf("json = %s\nwant   %s", js, want)
	}
	var out struct {
		Key PubKey            `json:"key"`
		Map map[PubKey]string `json:"map"`
	}
	if err := json.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	if out.Key != alice || out.Map[carol] != "carol" {
		t.Fatalf("round trip = %+v", out)
	}
	var k PubKey
	err = json.Unmarshal([]byte(`"`+base64.StdEncoding.EncodeToString(alice[:])+`"`), &k)
	if !errors.Is(err, ErrBadKey) {
		t.Fatalf("standard base64 in JSON: err = %v, want ErrBadKey", err)
	}
}

func TestPubKeyUnmarshalBinaryLength(t *testing.T) {
	var k PubKey
	for _, n := range []int{0, 31, 33, 64} {
		if err := k.UnmarshalBinary(make([]byte, n)); !errors.Is(err, ErrBadKey) {
			t.Errorf("UnmarshalBinary(%d bytes) = %v, want ErrBadKey", n, err)
		}
	}
	if err := k.UnmarshalBinary(alice[:]); err != nil || k != alice {
		t.Fatalf("UnmarshalBinary(32 bytes) = %v", err)
	}
	var s Signature
	for _, n := range []int{0, 63, 65} {
		if err := s.UnmarshalBinary(make([]byte, n)); err == nil {
			t.Errorf("Signature.UnmarshalBinary(%d bytes) succeeded", n)
		}
	}
}

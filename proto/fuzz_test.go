package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// vectorRaws returns the raw field of every stored vector, keyed by file,
// to seed the fuzz corpora. Stored files are used (not regenerated ones)
// so the seeds are exactly what is on disk.
func vectorRaws(f *testing.F) map[string][]byte {
	f.Helper()
	out := map[string][]byte{}
	for _, dir := range []string{vectorDir, rejectDir} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			name, _ := filepath.Rel(vectorDir, filepath.Join(dir, e.Name()))
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			fields, err := parseVectorFile(data)
			if err != nil {
				f.Fatalf("%s: %v", name, err)
			}
			if raw, ok := fields["raw"]; ok { // 19-blob-frames.txt has frames, no raw
				out[name] = raw
			}
		}
	}
	return out
}

func envelopeRaws(f *testing.F) [][]byte {
	var out [][]byte
	for name, raw := range vectorRaws(f) {
		if name != "08-signed-doc.txt" && name != "14-card.txt" && !strings.Contains(name, "handshake") && !strings.HasPrefix(name, "reject/") {
			out = append(out, raw)
		}
	}
	return out
}

// FuzzParseEnvelope: ParseEnvelope never panics, and whatever it accepts
// has exactly one encoding: re-encoding the decoded envelope reproduces
// Signed, and re-wrapping reproduces Raw.
func FuzzParseEnvelope(f *testing.F) {
	for _, raw := range envelopeRaws(f) {
		f.Add(raw)
	}
	for _, tc := range negativeCases() {
		if len(tc.raw) < 4096 {
			f.Add(tc.raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkSplitWire(t, raw)
		se, err := ParseEnvelope(raw)
		if err != nil {
			if se != nil {
				t.Fatal("envelope returned with an error")
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNonCanonical) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error outside the documented classes: %v", err)
			}
			return
		}
		signed, err := Marshal(&se.Envelope)
		if err != nil {
			t.Fatalf("accepted envelope does not re-encode: %v", err)
		}
		if !bytes.Equal(signed, se.Signed) {
			t.Fatalf("re-encoding differs from Signed:\n %x\n %x", signed, se.Signed)
		}
		wrapped, err := Marshal(wireEnvelope{Signed: se.Signed, Sig: se.Sig})
		if err != nil || !bytes.Equal(wrapped, raw) || !bytes.Equal(se.Raw, raw) {
			t.Fatalf("Raw does not round trip: %v", err)
		}
		if err := se.Envelope.Validate(); err != nil {
			t.Fatalf("accepted envelope does not validate: %v", err)
		}
		if p := se.Request; p != nil && p.Params != nil {
			if _, err := CBORToJSON(p.Params); err != nil {
				t.Fatalf("accepted params do not render: %v", err)
			}
		}
		_ = se.Verify() // must not panic
	})
}

// FuzzVerify: a mutated valid envelope never verifies unless it is the
// original: a signature accepts exactly one byte string.
func FuzzVerify(f *testing.F) {
	originals := map[string]*SignedEnvelope{}
	for _, raw := range envelopeRaws(f) {
		se, err := ParseEnvelope(raw)
		if err != nil {
			f.Fatal(err)
		}
		if err := se.Verify(); err != nil {
			f.Fatal(err)
		}
		originals[string(se.Signed)] = se
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		se, err := ParseEnvelope(raw)
		if err != nil {
			return
		}
		if err := se.Verify(); err != nil {
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify: %v", err)
			}
			return
		}
		orig, ok := originals[string(se.Signed)]
		if !ok {
			t.Fatalf("a signed body no key signed verifies:\n%x", raw)
		}
		if se.Sig != orig.Sig || !bytes.Equal(se.Raw, orig.Raw) || se.From != orig.From {
			t.Fatalf("a second encoding of a signed envelope verifies:\n%x\noriginal\n%x", raw, orig.Raw)
		}
	})
}

// FuzzParseSignedDoc: never panics; accepted documents re-encode to the
// input; ValidSigners never panics and accepts only genuine signatures.
func FuzzParseSignedDoc(f *testing.F) {
	raws := vectorRaws(f)
	doc := raws["08-signed-doc.txt"]
	f.Add(doc)
	orig, err := ParseSignedDoc(doc)
	if err != nil {
		f.Fatal(err)
	}
	for _, raw := range raws {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := ParseSignedDoc(raw)
		if err != nil {
			if d != nil {
				t.Fatal("document returned with an error")
			}
			return
		}
		enc, err := d.Encode()
		if err != nil || !bytes.Equal(enc, raw) {
			t.Fatalf("accepted document does not re-encode to its input: %v", err)
		}
		if len(d.Body) == 0 {
			t.Fatal("empty body accepted")
		}
		for _, domain := range []string{DomainRoster, DomainPolicy} {
			signers, err := d.ValidSigners(domain)
			if err != nil {
				continue
			}
			if len(signers) > 0 && (domain != DomainRoster || !bytes.Equal(d.Body, orig.Body)) {
				t.Fatalf("a signature verified over a body nobody signed under %q", domain)
			}
		}
	})
}

// FuzzHandshakePayload: never panics; accepted payloads re-encode to the
// input and satisfy the documented limits.
func FuzzHandshakePayload(f *testing.F) {
	raws := vectorRaws(f)
	f.Add(raws["09-handshake.txt"])
	f.Add(raws["12-handshake-unusable-listen.txt"])
	f.Add(raws["13-handshake-invite.txt"])
	p := &HandshakePayload{Version: ProtocolVersion, Org: "o", Identity: bob}
	b, _ := p.Encode()
	f.Add(b)
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseHandshakePayload(raw)
		if err != nil {
			return
		}
		// The payload as sent, before unusable addresses were skipped.
		var sent HandshakePayload
		if err := Unmarshal(raw, &sent); err != nil {
			t.Fatalf("accepted payload does not decode: %v", err)
		}
		enc, err := sent.Encode()
		if err != nil || !bytes.Equal(enc, raw) {
			t.Fatalf("accepted payload does not re-encode to its input: %v", err)
		}
		var kept []string
		for _, a := range sent.Listen {
			if CheckListenAddr(a) == nil {
				kept = append(kept, a)
			}
		}
		if !slices.Equal(kept, p.Listen) || p.IgnoredListen != len(sent.Listen)-len(kept) {
			t.Fatalf("listen %q (ignored %d) from %q", p.Listen, p.IgnoredListen, sent.Listen)
		}
		if p.Version != ProtocolVersion || p.Identity.IsZero() || p.Org == "" || len(p.Org) > MaxOrgLen ||
			len(p.Listen) > MaxListenAddrs || len(p.PolicyDigest) > 64 || len(p.Name) > 128 {
			t.Fatalf("payload beyond the limits accepted: %+v", p)
		}
		// Vectors 09 and 12 bind fixedStatic with alice's key, 13 with bob's.
		if err := p.VerifyStatic(fixedStatic); err == nil && p.Identity != alice && p.Identity != bob {
			t.Fatal("a static binding by a key that never signed verifies")
		}
	})
}

// FuzzJSONValue: CheckJSONValue, CBORToJSON and JSONToCBOR never panic;
// accepted float-free values round trip through JSON to the same bytes;
// whatever JSONToCBOR produces passes CheckJSONValue.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{
		`{"pkg":"./proto","race":true,"count":3,"timeout_s":1.5}`,
		`[1,-1,18446744073709551615,-9223372036854775808,0.1,1e300,null,"x",{"":[]}]`,
		`"\u2028\ud83e\udd6b"`, `{"b":1,"aa":2,"a":3}`, `-0.0`, `1.0`,
	} {
		f.Add([]byte(s))
		f.Add(mustJSON(f, s))
	}
	for _, raw := range vectorRaws(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// data as CBOR.
		checkErr := CheckJSONValue(data)
		js, jsErr := CBORToJSON(data)
		if checkErr == nil {
			if jsErr != nil {
				t.Fatalf("accepted value does not render: %v", jsErr)
			}
			if !json.Valid(js) {
				t.Fatalf("CBORToJSON produced invalid JSON %q", js)
			}
			if !hasFloat(t, data) {
				back, err := JSONToCBOR(js)
				if err != nil {
					t.Fatalf("JSONToCBOR(%s): %v", js, err)
				}
				if !bytes.Equal(back, data) {
					t.Fatalf("round trip through %s:\n %x\n %x", js, data, back)
				}
			}
		}
		// data as JSON text.
		b, err := JSONToCBOR(data)
		if err != nil {
			return
		}
		if err := CheckJSONValue(b); err != nil {
			t.Fatalf("JSONToCBOR(%q) = %x fails CheckJSONValue: %v", data, b, err)
		}
		if len(b) > MaxBodySize {
			return
		}
		e := baseEnvelope(ToPeer(bob), KindRequest)
		e.Request = &Request{RequestID: reqID, Intent: "fuzz", Params: b}
		se, err := SignEnvelope(keyAlice, &e)
		if err != nil {
			t.Fatalf("JSONToCBOR output refused as params: %v", err)
		}
		if _, err := ParseEnvelope(se.Raw); err != nil {
			t.Fatalf("JSONToCBOR output does not parse as params: %v", err)
		}
	})
}

// hasFloat reports whether a JSON-model CBOR value holds a float.
func hasFloat(t *testing.T, data []byte) bool {
	var v any
	if err := anyDecMode.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case float64:
			return true
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// checkSplitWire checks the wrapper fast path against the general
// decoder: both accept exactly the same inputs, with the same result.
func checkSplitWire(t *testing.T, raw []byte) {
	var sig Signature
	signed, fast := splitWire(raw, &sig)
	var w wireEnvelope
	err := UnmarshalCanonical(raw, &w)
	if fast != (err == nil) {
		t.Fatalf("splitWire ok=%v, general decoder err=%v for %x", fast, err, raw)
	}
	if fast && (!bytes.Equal(signed, w.Signed) || sig != w.Sig) {
		t.Fatalf("splitWire and the general decoder disagree on %x", raw)
	}
}

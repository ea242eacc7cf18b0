package mdns

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/proto"
)

// TXT attribute names. Append only: peers of older versions parse these.
const (
	txtKey           = "key"
	txtOrg           = "org"
	txtRosterVersion = "rv"
	txtProtoVersion  = "pv"
)

const (
	// maxTXTStrings bounds how many TXT strings are looked at. We send
	// four; the rest is room for future attributes.
	maxTXTStrings = 32
	// maxTXTString is the DNS limit on one character-string.
	maxTXTString = 255
	// maxKeyText bounds a key before it is decoded: "ed25519:" plus 43
	// characters of base64url.
	maxKeyText = 64
)

// errTXT reports a TXT record that lacks something required. Such answers
// are skipped, never surfaced as errors.
var errTXT = errors.New("unusable TXT record")

// txtRecord is what a node says about itself in TXT.
type txtRecord struct {
	Key           proto.PubKey
	Org           string
	RosterVersion uint64
	ProtoVersion  int
}

// encodeTXT returns the TXT strings advertising r.
func encodeTXT(r txtRecord) []string {
	return []string{
		txtKey + "=" + r.Key.String(),
		txtOrg + "=" + r.Org,
		txtRosterVersion + "=" + strconv.FormatUint(r.RosterVersion, 10),
		txtProtoVersion + "=" + strconv.Itoa(r.ProtoVersion),
	}
}

// parseTXT reads a TXT record defensively. Malformed, oversized, repeated
// and unknown attributes are ignored; only a missing or malformed key, org
// or pv makes the record unusable.
func parseTXT(fields []string) (txtRecord, error) {
	var r txtRecord
	var seen = map[string]bool{}
	var haveKey, haveOrg, havePV bool
	for i, f := range fields {
		if i == maxTXTStrings {
			break
		}
		if len(f) > maxTXTString {
			continue
		}
		name, val, ok := strings.Cut(f, "=")
		if !ok || name == "" || len(name) > 9 {
			// No value (a boolean attribute) or an overlong name: not ours.
			continue
		}
		name = strings.ToLower(name) // RFC 6763 §6.4: names are case-insensitive
		if seen[name] {
			continue // RFC 6763 §6.4: only the first occurrence counts
		}
		seen[name] = true
		switch name {
		case txtKey:
			if len(val) > maxKeyText {
				continue
			}
			k, err := proto.ParsePubKey(val)
			if err != nil || k.IsZero() {
				continue
			}
			r.Key, haveKey = k, true
		case txtOrg:
			if !validOrg(val) {
				continue
			}
			r.Org, haveOrg = val, true
		case txtRosterVersion:
			if len(val) > 20 {
				continue
			}
			if v, err := strconv.ParseUint(val, 10, 64); err == nil {
				r.RosterVersion = v
			}
		case txtProtoVersion:
			if len(val) > 5 {
				continue
			}
			if v, err := strconv.ParseUint(val, 10, 16); err == nil {
				r.ProtoVersion, havePV = int(v), true
			}
		}
	}
	switch {
	case !haveKey:
		return r, fmt.Errorf("%w: no valid %q attribute", errTXT, txtKey)
	case !haveOrg:
		return r, fmt.Errorf("%w: no valid %q attribute", errTXT, txtOrg)
	case !havePV:
		return r, fmt.Errorf("%w: no valid %q attribute", errTXT, txtProtoVersion)
	}
	return r, nil
}

// validOrg accepts what may appear in TXT and in logs: 1..MaxOrgLen bytes
// of UTF-8 without control characters.
func validOrg(s string) bool {
	if s == "" || len(s) > proto.MaxOrgLen || !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, unicode.IsControl) < 0
}

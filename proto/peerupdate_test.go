package proto

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The peer-update vector of PROTOCOL.md §14.4: keys 0x11…, 0x22… and
// 0x33…; 0x11… and 0x22… are in the list, 0x33… was removed.
var (
	pxKey1 = PubKey(bytes.Repeat([]byte{0x11}, 32))
	pxKey2 = PubKey(bytes.Repeat([]byte{0x22}, 32))
	pxKey3 = PubKey(bytes.Repeat([]byte{0x33}, 32))
)

const (
	// PeerEntryHash of {0: 0x11…, 1: ["tcp://192.0.2.1:7946"]}.
	pxEntry1Hex = "a2005820111111111111111111111111111111111111111111111111111111111111111101817474" +
		"63703a2f2f3139322e302e322e313a37393436"
	pxEntry2Hex = "a2005820222222222222222222222222222222222222222222222222222222222222222201817474" +
		"63703a2f2f3139322e302e322e323a37393436"
)

func TestPeerUpdateVector(t *testing.T) {
	e1 := PeerInfo{Key: pxKey1, Addrs: []string{"tcp://192.0.2.1:7946"}}
	e2 := PeerInfo{Key: pxKey2, Addrs: []string{"tcp://192.0.2.2:7946"}}
	for _, c := range []struct {
		e   PeerInfo
		hex string
	}{{e1, pxEntry1Hex}, {e2, pxEntry2Hex}} {
		b, err := Marshal(&c.e)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex {
			t.Fatalf("entry = %s\nwant    %s", got, c.hex)
		}
		raw, _ := hex.DecodeString(c.hex)
		if PeerEntryHash(c.e) != sha256.Sum256(raw) {
			t.Fatal("PeerEntryHash is not SHA-256 of the entry's canonical CBOR")
		}
	}
	// The digest is the XOR of the entry hashes, in any order.
	d := PeerDigest([]PeerInfo{e1, e2})
	if d != PeerDigest([]PeerInfo{e2, e1}) || d == PeerDigest([]PeerInfo{e1}) {
		t.Fatal("digest depends on order, or misses an entry")
	}
	h1, h2 := PeerEntryHash(e1), PeerEntryHash(e2)
	for i := range d {
		if d[i] != h1[i]^h2[i] {
			t.Fatal("digest is not the XOR of the entry hashes")
		}
	}
	if PeerDigest(nil) != [PeerDigestSize]byte{} {
		t.Fatal("the digest of the empty list is not zero")
	}
	if got := hex.EncodeToString(d[:]); got != pxDigestHex {
		t.Fatalf("digest %s, want %s", got, pxDigestHex)
	}

	// An update that sets e2, removes 0x33… and gives the digest of
	// {e1, e2}.
	u := PeerUpdate{Set: []PeerInfo{e2}, Removed: []PubKey{pxKey3}, Digest: d[:]}
	b, err := Marshal(&u)
	if err != nil {
		t.Fatal(err)
	}
	want := cMap(
		cUint(0), cArr(mustHex(t, pxEntry2Hex)),
		cUint(1), cArr(cBytes(pxKey3[:])),
		cUint(2), cBytes(d[:]),
	)
	if !bytes.Equal(b, want) {
		t.Fatalf("PeerUpdate = %x\nwant         %x", b, want)
	}
	if got := hex.EncodeToString(b); got != pxUpdateHex {
		t.Fatalf("PeerUpdate = %s\nwant         %s", got, pxUpdateHex)
	}
	got, err := ParsePeerUpdate(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Set) != 1 || !got.Set[0].Key.Equal(pxKey2) || len(got.Removed) != 1 || !got.Removed[0].Equal(pxKey3) ||
		!bytes.Equal(got.Digest, d[:]) || got.Resync {
		t.Fatalf("parsed %+v", got)
	}
	// A resync request: key 3 true.
	u = PeerUpdate{Set: []PeerInfo{}, Removed: []PubKey{}, Digest: d[:], Resync: true}
	b, _ = Marshal(&u)
	if want := cMap(cUint(0), cArr(), cUint(1), cArr(), cUint(2), cBytes(d[:]), cUint(3), []byte{0xf5}); !bytes.Equal(b, want) {
		t.Fatalf("resync = %x\nwant     %x", b, want)
	}
	if got, err := ParsePeerUpdate(b); err != nil || !got.Resync {
		t.Fatalf("resync parsed %+v, %v", got, err)
	}
}

func TestPeerUpdateRejects(t *testing.T) {
	d := make([]byte, 32)
	for name, b := range map[string][]byte{
		"short digest": cMap(cUint(0), cArr(), cUint(1), cArr(), cUint(2), cBytes(d[:31])),
		"no digest":    cMap(cUint(0), cArr(), cUint(1), cArr()),
		"unknown key":  cMap(cUint(0), cArr(), cUint(1), cArr(), cUint(2), cBytes(d), cUint(9), cUint(1)),
		"bad removed":  cMap(cUint(0), cArr(), cUint(1), cArr(cBytes(d[:5])), cUint(2), cBytes(d)),
	} {
		if _, err := ParsePeerUpdate(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, ErrMalformed) && name == "short digest" {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	// Addresses outside the grammar are left out and counted.
	b := cMap(cUint(0), cArr(cMap(cUint(0), cBytes(pxKey1[:]), cUint(1), cArr(cText("tcp://192.0.2.1:7946"), cText("nonsense")))),
		cUint(1), cArr(), cUint(2), cBytes(d))
	u, err := ParsePeerUpdate(b)
	if err != nil || len(u.Set[0].Addrs) != 1 || u.IgnoredAddrs != 1 {
		t.Fatalf("got %+v, %v; want one address kept, one ignored", u, err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	pxDigestHex = "dbfb7093fb3defa2e840a728d48628aac9b73fff33dc26b7f1c901bd847ee077"
	pxUpdateHex = "a30081a2005820222222222222222222222222222222222222222222222222222222222222222201817474" +
		"63703a2f2f3139322e302e322e323a3739343601815820333333333333333333333333333333333333333333333333" +
		"3333333333333333025820dbfb7093fb3defa2e840a728d48628aac9b73fff33dc26b7f1c901bd847ee077"
)

// TestPeerUpdateLenient: peer-list, peer-update and policy-digest frames
// are decoded strictly (§1.2 steps 1-5) but not checked for canonical
// form (step 6): keys in any order parse, and resync written as false
// reads as absent. A value of another type is malformed.
func TestPeerUpdateLenient(t *testing.T) {
	digest := "5820" + strings.Repeat("00", 32)
	for name, c := range map[string]struct {
		hex    string
		ok     bool
		resync bool
	}{
		"canonical":          {"a3" + "0080" + "0180" + "02" + digest, true, false},
		"unsorted keys":      {"a3" + "02" + digest + "0180" + "0080", true, false},
		"resync true":        {"a4" + "0080" + "0180" + "02" + digest + "03f5", true, true},
		"resync false":       {"a4" + "03f4" + "0080" + "0180" + "02" + digest, true, false},
		"resync as a uint":   {"a4" + "0080" + "0180" + "02" + digest + "0301", false, false},
		"unknown key":        {"a4" + "0080" + "0180" + "02" + digest + "0400", false, false},
		"digest of 31 bytes": {"a3" + "0080" + "0180" + "02" + "581f" + strings.Repeat("00", 31), false, false},
	} {
		b, err := hex.DecodeString(c.hex)
		if err != nil {
			t.Fatal(err)
		}
		u, err := ParsePeerUpdate(b)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", name, err, c.ok)
			continue
		}
		if err == nil && u.Resync != c.resync {
			t.Errorf("%s: resync %v", name, u.Resync)
		}
	}
}

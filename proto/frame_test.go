package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestFrameTypeString(t *testing.T) {
	for ft, want := range map[FrameType]string{
		FrameEnvelope: "envelope", FrameRoster: "roster", FramePolicy: "policy", FramePeers: "peers",
		FrameGoodbye: "goodbye", FramePolicyDigest: "policy-digest", FrameLinkMove: "link-move", 0: "frame(0)", 200: "frame(200)",
	} {
		if got := ft.String(); got != want {
			t.Errorf("FrameType(%d) = %q, want %q", ft, got, want)
		}
	}
	if MaxFrameSize != MaxEnvelopeSize+1 {
		t.Error("MaxFrameSize must hold one envelope and the type byte")
	}
}

func TestPeerList(t *testing.T) {
	l := &PeerList{Peers: []PeerInfo{
		{Key: alice, Addrs: []string{"tcp://192.0.2.10:7946"}},
		{Key: bob, Addrs: []string{}},
	}}
	b, err := Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	want := cMap(cUint(0), cArr(
		cMap(cUint(0), cBytes(alice[:]), cUint(1), cArr(cText("tcp://192.0.2.10:7946"))),
		cMap(cUint(0), cBytes(bob[:]), cUint(1), cArr()),
	))
	if !bytes.Equal(b, want) {
		t.Fatalf("PeerList = %x\nwant       %x", b, want)
	}
	got, err := ParsePeerList(b)
	if err != nil || !reflect.DeepEqual(got, l) {
		t.Fatalf("ParsePeerList = %+v, %v", got, err)
	}
	// A nil address list encodes as an empty array, never as null.
	nilAddrs, _ := Marshal(&PeerList{Peers: []PeerInfo{{Key: bob}}})
	if !bytes.Equal(nilAddrs, cMap(cUint(0), cArr(cMap(cUint(0), cBytes(bob[:]), cUint(1), cArr())))) {
		t.Fatalf("nil addrs encode as %x", nilAddrs)
	}

	many := make([][]byte, MaxListenAddrs+1)
	for i := range many {
		many[i] = cText("x")
	}
	for name, in := range map[string][]byte{
		"too many addresses": cMap(cUint(0), cArr(cMap(cUint(0), cBytes(alice[:]), cUint(1), cArr(many...)))),
		"key 31 bytes":       cMap(cUint(0), cArr(cMap(cUint(0), cBytes(alice[:31]), cUint(1), cArr()))),
		"unknown key":        cMap(cUint(0), cArr(), cUint(1), cUint(0)),
		"not a map":          cArr(),
	} {
		if _, err := ParsePeerList(in); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestPolicyDigestEncoding(t *testing.T) {
	d := PolicyDigest{Policies: []PolicyVersion{{Channel: chanID, Version: 3}}}
	b, err := Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	want := cMap(cUint(0), cArr(cMap(cUint(0), cBytes(u(chanID)), cUint(1), cUint(3))))
	if !bytes.Equal(b, want) {
		t.Fatalf("PolicyDigest = %x, want %x", b, want)
	}
	var back PolicyDigest
	if err := UnmarshalCanonical(b, &back); err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// TestLinkMoveWire pins the link-move payloads of PROTOCOL.md §14.12 and
// the ones refused.
func TestLinkMoveWire(t *testing.T) {
	for step, want := range map[uint8]string{MoveAsk: "a10001", MoveAgree: "a10002"} {
		b, err := Marshal(&LinkMove{Step: step})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", b); got != want {
			t.Fatalf("step %d encodes as %s, want %s", step, got, want)
		}
		m, err := ParseLinkMove(b)
		if err != nil || m.Step != step {
			t.Fatalf("step %d: %+v, %v", step, m, err)
		}
	}
	for _, bad := range []string{"a10000", "a10003", "a0", "a10101", "a2000101010", "01", ""} {
		b, _ := hex.DecodeString(bad)
		if _, err := ParseLinkMove(b); err == nil {
			t.Fatalf("%s parsed", bad)
		}
	}
}

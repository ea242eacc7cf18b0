package proto

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestFrameTypeString(t *testing.T) {
	for ft, want := range map[FrameType]string{
		FrameEnvelope: "envelope", FrameRoster: "roster", FramePolicy: "policy", FramePeers: "peers",
		FrameGoodbye: "goodbye", FramePolicyDigest: "policy-digest", 0: "frame(0)", 200: "frame(200)",
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

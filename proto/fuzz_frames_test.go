package proto

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
)

// FuzzFramePayloads feeds arbitrary bytes to the decoders of the small
// link frames (ack, peer list, peer update, policy digest, link move). They must
// never panic, and whatever they accept must re-encode to the same bytes
// (ack) or decode within the limits (peer list, peer update).
func FuzzFramePayloads(f *testing.F) {
	ack, _ := Marshal(&Ack{IDs: []uuid.UUID{idN(1), idN(2)}})
	peers, _ := Marshal(&PeerList{Peers: []PeerInfo{{Key: alice, Addrs: []string{"tcp://10.0.0.1:7437"}}}})
	digest, _ := Marshal(&PolicyDigest{Policies: []PolicyVersion{{Channel: idN(3), Version: 2}}})
	set := []PeerInfo{{Key: alice, Addrs: []string{"tcp://10.0.0.1:7437"}}}
	d := PeerDigest(set)
	update, _ := Marshal(&PeerUpdate{Set: set, Removed: []PubKey{bob}, Digest: d[:]})
	for _, s := range [][]byte{ack, peers, digest, update, {}, {0xa0}, {0xa1, 0x00, 0x80}, {0xa1, 0x00, 0x01}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if a, err := ParseAck(b); err == nil {
			again, err := Marshal(a)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("accepted ack does not re-encode: %x vs %x (%v)", b, again, err)
			}
		}
		if l, err := ParsePeerList(b); err == nil {
			for _, p := range l.Peers {
				if len(p.Addrs) > MaxListenAddrs {
					t.Fatalf("peer list accepted %d addresses", len(p.Addrs))
				}
				for _, a := range p.Addrs {
					if err := CheckListenAddr(a); err != nil {
						t.Fatalf("peer list kept an unusable address: %v", err)
					}
				}
			}
		}
		if u, err := ParsePeerUpdate(b); err == nil {
			if len(u.Digest) != PeerDigestSize {
				t.Fatalf("peer update accepted a %d-byte digest", len(u.Digest))
			}
			for _, p := range u.Set {
				if len(p.Addrs) > MaxListenAddrs {
					t.Fatalf("peer update accepted %d addresses", len(p.Addrs))
				}
				for _, a := range p.Addrs {
					if err := CheckListenAddr(a); err != nil {
						t.Fatalf("peer update kept an unusable address: %v", err)
					}
				}
				PeerEntryHash(p) // what a receiver hashes must encode
			}
		}
		var d PolicyDigest
		_ = Unmarshal(b, &d)
		if m, err := ParseLinkMove(b); err == nil && m.Step != MoveAsk && m.Step != MoveAgree {
			t.Fatalf("link move accepted step %d", m.Step)
		}
	})
}

func TestAckRoundTripAndStrictness(t *testing.T) {
	b, err := Marshal(&Ack{IDs: []uuid.UUID{idN(1)}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAck(b)
	if err != nil || len(a.IDs) != 1 || a.IDs[0] != idN(1) {
		t.Fatalf("round trip: %v %+v", err, a)
	}
	// A 15-byte id, an unknown key, and a non-canonical length are refused.
	for name, bad := range map[string][]byte{
		"short id":    {0xa1, 0x00, 0x81, 0x4f, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		"unknown key": {0xa1, 0x01, 0x80},
		"non-minimal": {0xa1, 0x00, 0x98, 0x00},
	} {
		if _, err := ParseAck(bad); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

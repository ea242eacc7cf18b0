package proto

import (
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
)

// DestKind says what a [Destination] addresses.
type DestKind uint8

const (
	// DestChannel addresses a channel by id.
	DestChannel DestKind = 1
	// DestPeer addresses one node by key: a DM.
	DestPeer DestKind = 2
	// DestOrg addresses every member of an org: presence.
	DestOrg DestKind = 3
)

// MaxOrgLen bounds an org id.
const MaxOrgLen = 128

// Destination is where an envelope goes. It is comparable, so it can key
// maps (sequence counters are per destination).
//
// Wire: a map with exactly one entry: {0: bstr(16) channel id} for a
// channel, {1: bstr(32) pubkey} for a peer, or {2: text org_id} for the
// whole org.
type Destination struct {
	Kind    DestKind
	Channel uuid.UUID
	Peer    PubKey
	Org     string
}

// ToChannel returns the destination of channel id.
func ToChannel(id uuid.UUID) Destination { return Destination{Kind: DestChannel, Channel: id} }

// ToPeer returns the destination of a DM to k.
func ToPeer(k PubKey) Destination { return Destination{Kind: DestPeer, Peer: k} }

// ToOrg returns the destination of everyone in org.
func ToOrg(org string) Destination { return Destination{Kind: DestOrg, Org: org} }

func (d Destination) String() string {
	switch d.Kind {
	case DestChannel:
		return "channel:" + d.Channel.String()
	case DestPeer:
		return "peer:" + d.Peer.String()
	case DestOrg:
		return "org:" + d.Org
	}
	return "invalid-destination"
}

type wireDest struct {
	Channel *uuid.UUID `cbor:"0,keyasint,omitempty"`
	Peer    *PubKey    `cbor:"1,keyasint,omitempty"`
	Org     *string    `cbor:"2,keyasint,omitempty"`
}

func (d Destination) validate() error {
	switch d.Kind {
	case DestChannel:
		if d.Channel == uuid.Nil {
			return fmt.Errorf("%w: nil channel id", ErrInvalid)
		}
	case DestPeer:
		if d.Peer.IsZero() {
			return fmt.Errorf("%w: zero peer key", ErrInvalid)
		}
	case DestOrg:
		if d.Org == "" || len(d.Org) > MaxOrgLen || !utf8.ValidString(d.Org) {
			return fmt.Errorf("%w: org id must be 1..%d bytes of UTF-8", ErrInvalid, MaxOrgLen)
		}
	default:
		return fmt.Errorf("%w: destination kind %d", ErrInvalid, d.Kind)
	}
	return nil
}

// MarshalCBOR implements cbor.Marshaler. The three forms are fixed, so
// they are written directly: a1 00 50 <16-byte id>, a1 01 58 20 <32-byte
// key>, or a1 02 <text org>.
func (d Destination) MarshalCBOR() ([]byte, error) {
	switch d.Kind {
	case DestChannel:
		return append([]byte{0xa1, 0x00, 0x50}, d.Channel[:]...), nil
	case DestPeer:
		return append([]byte{0xa1, 0x01, 0x58, 0x20}, d.Peer[:]...), nil
	case DestOrg:
		return encMode.Marshal(wireDest{Org: &d.Org})
	default:
		return nil, fmt.Errorf("%w: destination kind %d", ErrInvalid, d.Kind)
	}
}

// UnmarshalCBOR implements cbor.Unmarshaler.
func (d *Destination) UnmarshalCBOR(b []byte) error {
	// Fast path for the canonical channel and peer forms; everything
	// else, including every non-canonical variant, takes the general
	// decoder.
	switch {
	case len(b) == 3+16 && b[0] == 0xa1 && b[1] == 0x00 && b[2] == 0x50:
		*d = Destination{Kind: DestChannel}
		copy(d.Channel[:], b[3:])
		return nil
	case len(b) == 4+32 && b[0] == 0xa1 && b[1] == 0x01 && b[2] == 0x58 && b[3] == 0x20:
		*d = Destination{Kind: DestPeer}
		copy(d.Peer[:], b[4:])
		return nil
	}
	var w wireDest
	if err := decMode.Unmarshal(b, &w); err != nil {
		return err
	}
	n := 0
	*d = Destination{}
	if w.Channel != nil {
		n++
		d.Kind, d.Channel = DestChannel, *w.Channel
	}
	if w.Peer != nil {
		n++
		d.Kind, d.Peer = DestPeer, *w.Peer
	}
	if w.Org != nil {
		n++
		d.Kind, d.Org = DestOrg, *w.Org
	}
	if n != 1 {
		return fmt.Errorf("%w: destination has %d entries, want exactly 1", ErrMalformed, n)
	}
	return nil
}

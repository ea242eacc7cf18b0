package proto

import (
	"fmt"

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
		if d.Org == "" || len(d.Org) > MaxOrgLen {
			return fmt.Errorf("%w: org id must be 1..%d bytes", ErrInvalid, MaxOrgLen)
		}
	default:
		return fmt.Errorf("%w: destination kind %d", ErrInvalid, d.Kind)
	}
	return nil
}

// MarshalCBOR implements cbor.Marshaler.
func (d Destination) MarshalCBOR() ([]byte, error) {
	var w wireDest
	switch d.Kind {
	case DestChannel:
		w.Channel = &d.Channel
	case DestPeer:
		w.Peer = &d.Peer
	case DestOrg:
		w.Org = &d.Org
	default:
		return nil, fmt.Errorf("%w: destination kind %d", ErrInvalid, d.Kind)
	}
	return encMode.Marshal(w)
}

// UnmarshalCBOR implements cbor.Unmarshaler.
func (d *Destination) UnmarshalCBOR(b []byte) error {
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
		return fmt.Errorf("destination has %d entries, want exactly 1", n)
	}
	return nil
}

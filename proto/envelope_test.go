package proto

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// baseEnvelope returns a valid envelope header from alice with the given
// destination and payload kind; the caller sets the payload.
func baseEnvelope(to Destination, kind Kind) Envelope {
	return Envelope{
		ID: idN(1), From: alice, To: to, Kind: kind, TS: fixedTS,
		TTL: DefaultTTL, Seq: 1, Epoch: epochA,
	}
}

func ptr[T any](v T) *T { return &v }

// roundTripCases covers every kind, every payload option, every status
// and state, and every destination kind.
func roundTripCases(t testing.TB) map[string]Envelope {
	cases := map[string]Envelope{}
	add := func(name string, to Destination, kind Kind, set func(*Envelope)) {
		e := baseEnvelope(to, kind)
		set(&e)
		cases[name] = e
	}
	for _, to := range []Destination{ToChannel(chanID), ToPeer(bob)} {
		add("message to "+to.String(), to, KindMessage, func(e *Envelope) {
			e.Message = &Message{Body: "hello, mesh"}
		})
	}
	add("message in reply", ToChannel(chanID), KindMessage, func(e *Envelope) {
		e.Message = &Message{Body: "re: hello", InReplyTo: ptr(idN(9))}
	})
	add("message empty body", ToPeer(bob), KindMessage, func(e *Envelope) {
		e.Message = &Message{}
	})
	add("message unicode", ToChannel(chanID), KindMessage, func(e *Envelope) {
		e.Message = &Message{Body: "héllo, мир, 世界 🦫\n\ttabs and \x00 nul"}
	})
	add("message max header values", ToChannel(chanID), KindMessage, func(e *Envelope) {
		e.TS, e.TTL, e.Seq = -1, 1<<32-1, 1<<64-1
		e.Message = &Message{Body: "x"}
	})
	add("request plain", ToPeer(bob), KindRequest, func(e *Envelope) {
		e.Request = &Request{RequestID: reqID, Intent: "run-tests"}
	})
	add("request with params", ToPeer(bob), KindRequest, func(e *Envelope) {
		e.Request = &Request{RequestID: reqID, Intent: "run-tests",
			Params: mustJSON(t, `{"pkg":"./proto","race":true,"count":3,"tags":["a","b"],"ratio":0.25,"neg":-7,"nil":null}`)}
	})
	for hop := uint8(1); hop <= MaxHop; hop++ {
		add("request follow-up hop "+string('0'+hop), ToPeer(bob), KindRequest, func(e *Envelope) {
			e.Request = &Request{RequestID: reqID, Intent: "fix-bug", Params: mustJSON(t, `[1,2,3]`),
				ReplyTo: ptr(parentReq), Hop: hop}
		})
	}
	for s := StatusAccepted; s <= StatusFailed; s++ {
		add("response "+s.String(), ToPeer(bob), KindResponse, func(e *Envelope) {
			e.Response = &Response{RequestID: reqID, Status: s, Result: mustJSON(t, `{"status":"`+s.String()+`","n":18446744073709551615}`)}
		})
	}
	add("response without result", ToPeer(bob), KindResponse, func(e *Envelope) {
		e.Response = &Response{RequestID: reqID, Status: StatusAccepted}
	})
	for s := Online; s <= Offline; s++ {
		add("presence "+s.String(), ToOrg("acme"), KindPresence, func(e *Envelope) {
			e.Presence = &Presence{State: s, Seq: uint64(s) * 1000}
		})
	}
	add("history request", ToPeer(bob), KindHistoryRequest, func(e *Envelope) {
		e.HistoryRequest = &HistoryRequest{ChannelID: chanID, SinceTS: fixedTS - 3600_000,
			SinceSeqBySender: []SeqMark{
				{Sender: bob, Epoch: epochA, LastSeq: 3}, // bob < alice bytewise
				{Sender: alice, Epoch: epochA, LastSeq: 7},
				{Sender: alice, Epoch: epochB, LastSeq: 1},
			}, MaxMessages: DefaultHistoryMessages, MaxBytes: MaxHistoryBytes}
	})
	add("history request without marks", ToPeer(bob), KindHistoryRequest, func(e *Envelope) {
		e.HistoryRequest = &HistoryRequest{ChannelID: chanID, MaxMessages: 1, MaxBytes: 1}
	})
	inner := mustSign(t, keyCarol, &Envelope{ID: idN(2), From: carol, To: ToChannel(chanID), Kind: KindMessage,
		TS: fixedTS, TTL: DefaultTTL, Seq: 4, Epoch: epochB, Message: &Message{Body: "from carol"}})
	inner2 := mustSign(t, keyAlice, &Envelope{ID: idN(3), From: alice, To: ToChannel(chanID), Kind: KindMessage,
		TS: fixedTS + 1, TTL: DefaultTTL, Seq: 5, Epoch: epochA, Message: &Message{Body: "from alice"}})
	add("history response ok", ToPeer(bob), KindHistoryResponse, func(e *Envelope) {
		e.HistoryResponse = &HistoryResponse{ChannelID: chanID, InReplyTo: idN(8), Status: HistoryOK,
			Messages: [][]byte{inner.Raw, inner2.Raw}, More: true}
	})
	add("history response ok empty", ToPeer(bob), KindHistoryResponse, func(e *Envelope) {
		e.HistoryResponse = &HistoryResponse{ChannelID: chanID, InReplyTo: idN(8), Status: HistoryOK}
	})
	for s := HistoryDisabled; s <= HistoryUnknownChannel; s++ {
		add("history response "+s.String(), ToPeer(bob), KindHistoryResponse, func(e *Envelope) {
			e.HistoryResponse = &HistoryResponse{ChannelID: chanID, InReplyTo: idN(8), Status: s}
		})
	}
	return cases
}

func TestEnvelopeRoundTrip(t *testing.T) {
	for name, e := range roundTripCases(t) {
		t.Run(name, func(t *testing.T) {
			se := mustSign(t, keyAlice, &e)
			if err := se.Verify(); err != nil {
				t.Fatalf("Verify after sign: %v", err)
			}
			got, err := ParseEnvelope(se.Raw)
			if err != nil {
				t.Fatalf("ParseEnvelope: %v", err)
			}
			if err := got.Verify(); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !reflect.DeepEqual(got.Envelope, e) {
				t.Fatalf("decoded envelope differs:\n got %+v\nwant %+v", got.Envelope, e)
			}
			if !bytes.Equal(got.Signed, se.Signed) || got.Sig != se.Sig || !bytes.Equal(got.Raw, se.Raw) {
				t.Fatal("Signed, Sig or Raw differ after parsing")
			}
			again, err := Marshal(&got.Envelope)
			if err != nil || !bytes.Equal(again, se.Signed) {
				t.Fatalf("re-encoding the parsed envelope differs: %v", err)
			}
			// The wire wrapper is exactly {0: signed, 1: sig}.
			wantRaw := cMap(cUint(0), cBytes(se.Signed), cUint(1), cBytes(se.Sig[:]))
			if !bytes.Equal(se.Raw, wantRaw) {
				t.Fatalf("Raw = %x\nwant  %x", se.Raw, wantRaw)
			}
			if e.Kind == KindHistoryResponse {
				for i, m := range got.HistoryResponse.Messages {
					in, err := ParseEnvelope(m)
					if err != nil {
						t.Fatalf("nested envelope %d: %v", i, err)
					}
					if err := in.Verify(); err != nil {
						t.Fatalf("nested envelope %d: %v", i, err)
					}
				}
			}
		})
	}
}

// TestEnvelopeBodyHandBuilt checks the hand assembler against the encoder
// for one envelope, so the negative tests built from the same entries
// start from the canonical form and differ from it only as intended.
func TestEnvelopeBodyHandBuilt(t *testing.T) {
	e := baseEnvelope(ToChannel(chanID), KindMessage)
	e.Message = &Message{Body: "hi"}
	want, err := Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if got := baseBody().encode(); !bytes.Equal(got, want) {
		t.Fatalf("hand-built body\n %x\nencoder\n %x", got, want)
	}
	se, err := ParseEnvelope(wrapSigned(keyAlice, want))
	if err != nil {
		t.Fatal(err)
	}
	if err := se.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestDestinationString(t *testing.T) {
	for d, want := range map[Destination]string{
		ToChannel(chanID): "channel:" + chanID.String(),
		ToPeer(alice):     "peer:" + alice.String(),
		ToOrg("acme"):     "org:acme",
		{}:                "invalid-destination",
	} {
		if got := d.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
	if _, err := (Destination{Kind: 9}).MarshalCBOR(); !errors.Is(err, ErrInvalid) {
		t.Errorf("MarshalCBOR of kind 9: %v, want ErrInvalid", err)
	}
}

func TestEnumStrings(t *testing.T) {
	for k, want := range map[Kind]string{KindMessage: "message", KindRequest: "request", KindResponse: "response",
		KindPresence: "presence", KindHistoryRequest: "history-request", KindHistoryResponse: "history-response", 0: "kind(0)", 7: "kind(7)"} {
		if k.String() != want {
			t.Errorf("Kind(%d) = %q, want %q", k, k.String(), want)
		}
	}
	for _, name := range []string{"accepted", "rejected", "completed", "failed"} {
		s, err := ParseStatus(name)
		if err != nil || s.String() != name {
			t.Errorf("ParseStatus(%q) = %v, %v", name, s, err)
		}
	}
	if _, err := ParseStatus(""); err == nil {
		t.Error("ParseStatus(\"\") succeeded")
	}
	if Status(9).String() != "status(9)" {
		t.Error("unknown status string")
	}
	for _, name := range []string{"online", "away", "offline"} {
		s, err := ParsePresenceState(name)
		if err != nil || s.String() != name {
			t.Errorf("ParsePresenceState(%q) = %v, %v", name, s, err)
		}
		if b, _ := s.MarshalText(); string(b) != name {
			t.Errorf("MarshalText = %s", b)
		}
	}
	if _, err := ParsePresenceState("busy"); err == nil {
		t.Error("ParsePresenceState(busy) succeeded")
	}
	if HistoryStatus(0).String() != "history-status(0)" || HistoryOK.String() != "ok" {
		t.Error("history status strings")
	}
	// The wire numbers are append-only: pin them.
	nums := []struct {
		got, want int
	}{
		{int(KindMessage), 1}, {int(KindRequest), 2}, {int(KindResponse), 3}, {int(KindPresence), 4},
		{int(KindHistoryRequest), 5}, {int(KindHistoryResponse), 6},
		{int(StatusAccepted), 1}, {int(StatusRejected), 2}, {int(StatusCompleted), 3}, {int(StatusFailed), 4},
		{int(Online), 1}, {int(Away), 2}, {int(Offline), 3},
		{int(HistoryOK), 1}, {int(HistoryDisabled), 2}, {int(HistoryDenied), 3}, {int(HistoryUnknownChannel), 4},
		{int(DestChannel), 1}, {int(DestPeer), 2}, {int(DestOrg), 3},
		{int(FrameEnvelope), 1}, {int(FrameRoster), 2}, {int(FramePolicy), 3}, {int(FramePeers), 4},
		{int(FrameGoodbye), 5}, {int(FramePolicyDigest), 6},
	}
	for i, n := range nums {
		if n.got != n.want {
			t.Errorf("constant %d = %d, want %d", i, n.got, n.want)
		}
	}
}

func TestEnvelopeTimes(t *testing.T) {
	e := baseEnvelope(ToChannel(chanID), KindMessage)
	if !e.Time().Equal(time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)) {
		t.Errorf("Time() = %v", e.Time())
	}
	if got := e.Expires().Sub(e.Time()); got != 300*time.Second {
		t.Errorf("Expires - Time = %v", got)
	}
}

func TestSignEnvelopeRefuses(t *testing.T) {
	valid := func() *Envelope {
		e := baseEnvelope(ToChannel(chanID), KindMessage)
		e.Message = &Message{Body: "hi"}
		return &e
	}
	tests := []struct {
		name  string
		edit  func(*Envelope)
		wants []error
	}{
		{"from is not the signer", func(e *Envelope) { e.From = bob }, []error{ErrInvalid}},
		{"nil id", func(e *Envelope) { e.ID = uuid.Nil }, []error{ErrInvalid}},
		{"nil epoch", func(e *Envelope) { e.Epoch = uuid.Nil }, []error{ErrInvalid}},
		{"zero ttl", func(e *Envelope) { e.TTL = 0 }, []error{ErrInvalid}},
		{"no destination", func(e *Envelope) { e.To = Destination{} }, []error{ErrInvalid}},
		{"nil channel", func(e *Envelope) { e.To = ToChannel(uuid.Nil) }, []error{ErrInvalid}},
		{"zero peer", func(e *Envelope) { e.To = ToPeer(PubKey{}) }, []error{ErrInvalid}},
		{"empty org", func(e *Envelope) { e.To = ToOrg("") }, []error{ErrInvalid}},
		{"long org", func(e *Envelope) { e.To = ToOrg(strings.Repeat("o", MaxOrgLen+1)) }, []error{ErrInvalid}},
		{"org not utf-8", func(e *Envelope) { e.To = ToOrg("ac\xffme") }, []error{ErrInvalid}},
		{"message to the org", func(e *Envelope) { e.To = ToOrg("acme") }, []error{ErrInvalid}},
		{"nil in_reply_to", func(e *Envelope) { e.Message.InReplyTo = &uuid.Nil }, []error{ErrInvalid}},
		{"body not utf-8", func(e *Envelope) { e.Message.Body = "a\xffb" }, []error{ErrInvalid}},
		{"body too long", func(e *Envelope) { e.Message.Body = strings.Repeat("x", MaxBodySize+1) }, []error{ErrInvalid}},
		{"no payload", func(e *Envelope) { e.Message = nil }, []error{ErrInvalid}},
		{"two payloads", func(e *Envelope) { e.Presence = &Presence{State: Online} }, []error{ErrInvalid}},
		{"kind mismatch", func(e *Envelope) { e.Kind = KindPresence }, []error{ErrInvalid}},
		{"unknown kind", func(e *Envelope) { e.Kind = 7 }, []error{ErrInvalid}},
		{"request to channel", func(e *Envelope) {
			e.Kind, e.Message, e.Request = KindRequest, nil, &Request{RequestID: reqID, Intent: "x"}
		}, []error{ErrInvalid}},
		{"presence to peer", func(e *Envelope) {
			e.To, e.Kind, e.Message, e.Presence = ToPeer(bob), KindPresence, nil, &Presence{State: Online}
		}, []error{ErrInvalid}},
		{"hop 4", func(e *Envelope) {
			e.To, e.Kind, e.Message = ToPeer(bob), KindRequest, nil
			e.Request = &Request{RequestID: reqID, Intent: "x", ReplyTo: ptr(parentReq), Hop: 4}
		}, []error{ErrInvalid, ErrHopLimit}},
		{"params nested too deep", func(e *Envelope) {
			e.To, e.Kind, e.Message = ToPeer(bob), KindRequest, nil
			deep := cCat(bytes.Repeat([]byte{0x81}, MaxJSONNestedLevels), []byte{0x80})
			e.Request = &Request{RequestID: reqID, Intent: "x", Params: deep}
		}, []error{ErrInvalid, ErrMalformed}},
		{"too many marks", func(e *Envelope) {
			e.To, e.Kind, e.Message = ToPeer(bob), KindHistoryRequest, nil
			marks := make([]SeqMark, MaxArrayElements+1)
			e.HistoryRequest = &HistoryRequest{ChannelID: chanID, MaxMessages: 1, MaxBytes: 1, SinceSeqBySender: marks}
		}, []error{ErrInvalid}},
		{"too large", func(e *Envelope) {
			e.To, e.Kind, e.Message = ToPeer(bob), KindHistoryResponse, nil
			big := bytes.Repeat([]byte{0}, MaxBodySize)
			e.HistoryResponse = &HistoryResponse{ChannelID: chanID, InReplyTo: idN(8), Status: HistoryOK,
				Messages: [][]byte{big, big, big, big, big}}
		}, []error{ErrTooLarge}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := valid()
			tt.edit(e)
			se, err := SignEnvelope(keyAlice, e)
			if se != nil {
				t.Fatal("SignEnvelope returned an envelope with an error case")
			}
			if err := checkSentinels(err, tt.wants...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

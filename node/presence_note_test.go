package node

import (
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestPresenceNoteFrames: a node with a status note sends each
// announcement twice on a link: a Presence without the note in an
// envelope frame, the form every node takes (older ones drop a Presence
// with key 2 as malformed), then one with the note and the next seq in a
// presence-note frame (type 11), which older nodes ignore as an unknown
// frame type. A presence-note frame that holds anything but a Presence is
// ignored, and one whose note breaks the rules is dropped as invalid.
func TestPresenceNoteFrames(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	var mu sync.Mutex
	var plain, noted []*proto.SignedEnvelope
	rig.relink(func(frame []byte) {
		if len(frame) == 0 {
			return
		}
		switch proto.FrameType(frame[0]) {
		case proto.FrameEnvelope, proto.FramePresenceNote:
		default:
			return
		}
		se, err := proto.ParseEnvelope(frame[1:])
		if err != nil || se.Kind != proto.KindPresence {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if proto.FrameType(frame[0]) == proto.FrameEnvelope {
			plain = append(plain, se)
		} else {
			noted = append(noted, se)
		}
	})
	note := "running tests on main"
	if _, err := rig.a.own.SetPresence(api.SetPresence{Note: &note}); err != nil {
		t.Fatal(err)
	}
	// SetPresence with a note sends a presence-note frame carrying it.
	waitFor(t, 5*time.Second, "a presence-note frame", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(noted) > 0 && noted[len(noted)-1].Presence.Note == note
	})
	// The pair an announcement with a note is made of: the envelope frame
	// every node takes, then the noted one with the next number. (Signed
	// here, not picked from the frames: announcements of the agent's
	// activity and of a link coming up may interleave with the pair.)
	ses, err := rig.a.own.Envelopes(proto.Online, note)
	if err != nil || len(ses) != 2 {
		t.Fatalf("presence envelopes: %v (%d)", err, len(ses))
	}
	p, n := ses[0], ses[1]
	if p.Presence.Note != "" || n.Presence.Note != note || n.Presence.Seq <= p.Presence.Seq || n.Presence.State != p.Presence.State {
		t.Fatalf("envelope frame %+v, presence-note frame %+v", p.Presence, n.Presence)
	}
	// What an older node parses: the two keys of §6.4, nothing else.
	if body := p.Signed; len(body) == 0 || !containsPresenceMap(body) {
		t.Fatalf("the envelope frame's presence is not the two-key map older nodes take")
	}

	// A DM in a presence-note frame is ignored, not delivered.
	before := rig.a.metrics.Get("frame.presence_note_not_presence")
	items := rig.inboxLen()
	dm := rig.signed(rig.key(1), rig.env(rig.key(1), proto.ToPeer(rig.m.ids[0].Pub), proto.KindMessage, nil))
	if err := rig.link.Send(append([]byte{byte(proto.FramePresenceNote)}, dm...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the DM in a presence-note frame ignored", func() bool {
		return rig.a.metrics.Get("frame.presence_note_not_presence") == before+1
	})
	if rig.inboxLen() != items {
		t.Fatal("a DM in a presence-note frame reached the inbox")
	}
	// A note with a line break is invalid.
	bad := rig.env(rig.key(1), proto.ToOrg("acme"), proto.KindPresence, func(e *proto.Envelope) {
		e.Presence = &proto.Presence{State: proto.Online, Seq: 99, Note: "two\nlines"}
	})
	raw := rig.rawSigned(rig.key(1), bad)
	before = rig.a.metrics.Get("drop.invalid")
	if err := rig.link.Send(append([]byte{byte(proto.FramePresenceNote)}, raw...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "drop.invalid", func() bool { return rig.a.metrics.Get("drop.invalid") == before+1 })
	// A good one from b is taken, and shown.
	good := rig.env(rig.key(1), proto.ToOrg("acme"), proto.KindPresence, func(e *proto.Envelope) {
		e.Presence = &proto.Presence{State: proto.Away, Seq: uint64(time.Now().UnixMilli()), Note: "at lunch"}
	})
	if err := rig.link.Send(append([]byte{byte(proto.FramePresenceNote)}, rig.signed(rig.key(1), good)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "b's note in the presence table", func() bool {
		for _, e := range rig.a.own.PresenceTable().Entries {
			if e.Key.Equal(rig.m.ids[1].Pub) && e.Note == "at lunch" && e.State == "away" {
				return true
			}
		}
		return false
	})
}

// containsPresenceMap reports whether body (an envelope body) holds the
// presence payload {0: state, 1: seq} under key 11 with nothing else.
func containsPresenceMap(body []byte) bool {
	var m map[int]any
	if err := proto.Unmarshal(body, &m); err != nil {
		return false
	}
	p, ok := m[11].(map[any]any)
	return ok && len(p) == 2
}

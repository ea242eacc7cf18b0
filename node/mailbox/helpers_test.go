package mailbox

import (
	"bytes"
	"crypto/ed25519"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Fixed test identities: ed25519.NewKeyFromSeed of 32 copies of one byte.
var (
	alice = seedKey(1)
	bob   = seedKey(2)
	carol = seedKey(3)
)

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) proto.PubKey { return proto.PubKeyOf(k) }

// t0 is the fixed envelope time of the golden file: 2026-11-21T12:00:01.123Z.
var t0 = time.Date(2026, 11, 21, 12, 0, 1, 123e6, time.UTC)

// fixed ids.
var (
	chanGeneral = uuid.MustParse("0192a7c4-1111-7000-8000-00000000c4a1")
	epochA      = uuid.MustParse("0192a7c0-2222-7000-8000-0000000e90c1")
	reqID       = uuid.MustParse("0192a7c4-3333-7000-8000-0000000000a1")
	parentReqID = uuid.MustParse("0192a7c4-4444-7000-8000-0000000000b2")
	replyTo     = uuid.MustParse("0192a7c4-5555-7000-8000-0000000000c3")
)

// idSeq makes distinct, deterministic envelope ids.
func envID(n int) uuid.UUID {
	id := uuid.MustParse("0192a7c4-6666-7000-8000-000000000000")
	id[14], id[15] = byte(n>>8), byte(n)
	return id
}

// sign builds and signs an envelope from key, filling the common fields.
func sign(t testing.TB, key ed25519.PrivateKey, n int, to proto.Destination, set func(*proto.Envelope)) *proto.SignedEnvelope {
	t.Helper()
	e := &proto.Envelope{ID: envID(n), From: pub(key), To: to, TS: t0.UnixMilli(), TTL: proto.DefaultTTL,
		Seq: uint64(40 + n), Epoch: epochA}
	set(e)
	se, err := proto.SignEnvelope(key, e)
	if err != nil {
		t.Fatal(err)
	}
	return se
}

func msg(body string, inReplyTo *uuid.UUID) func(*proto.Envelope) {
	return func(e *proto.Envelope) {
		e.Kind = proto.KindMessage
		e.Message = &proto.Message{Body: body, InReplyTo: inReplyTo}
	}
}

func request(t testing.TB, intent, params string, hop uint8, parent *uuid.UUID) func(*proto.Envelope) {
	return func(e *proto.Envelope) {
		e.Kind = proto.KindRequest
		e.Request = &proto.Request{RequestID: reqID, Intent: intent, Hop: hop, ReplyTo: parent}
		if params != "" {
			raw, err := proto.JSONToCBOR([]byte(params))
			if err != nil {
				t.Fatal(err)
			}
			e.Request.Params = raw
		}
	}
}

func response(t testing.TB, status proto.Status, result string) func(*proto.Envelope) {
	return func(e *proto.Envelope) {
		e.Kind = proto.KindResponse
		e.Response = &proto.Response{RequestID: reqID, Status: status}
		if result != "" {
			raw, err := proto.JSONToCBOR([]byte(result))
			if err != nil {
				t.Fatal(err)
			}
			e.Response.Result = raw
		}
	}
}

// testRoster lists alice (admin), bob (operator) and carol (member, no
// name).
func testRoster(t testing.TB) *roster.Roster {
	t.Helper()
	r, err := roster.New("acme", alice, "alice")
	if err != nil {
		t.Fatal(err)
	}
	r = r.Next()
	for _, m := range []roster.Member{{Key: pub(bob), Role: roster.RoleOperator, Name: "bob"}, {Key: pub(carol), Role: roster.RoleMember}} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Sign(alice); err != nil {
		t.Fatal(err)
	}
	return r
}

// testChannels holds #general, created by alice, and returns its id.
func testChannels(t testing.TB, r *roster.Roster) (*channel.Set, uuid.UUID) {
	t.Helper()
	p, err := channel.New("acme", "general", nil, nil, true, alice)
	if err != nil {
		t.Fatal(err)
	}
	s := channel.NewSet()
	if _, err := s.Merge(r, p); err != nil {
		t.Fatal(err)
	}
	return s, p.ID
}

// testConfig is DefaultConfig without fsync, for speed where durability
// is not what is tested.
func testConfig() Config { return Config{SyncFiles: false} }

func openMirror(t *testing.T, cfg Config) (*Mirror, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mailbox")
	m, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// linkItem is a message item delivered i seconds after t0.
func linkItem(t *testing.T, i int) Item {
	return Item{Env: sign(t, alice, i, proto.ToChannel(chanGeneral), msg("item "+strconv.Itoa(i), nil)),
		Priority: "normal", FromName: "alice", ToText: "#general", Delivered: t0.Add(time.Duration(i) * time.Second)}
}

// linkName is the file name of linkItem(i), before any "-2".
func linkName(i int) string {
	return t0.Add(time.Duration(i)*time.Second).Format("150405") + "-" + envID(i).String()[24:]
}

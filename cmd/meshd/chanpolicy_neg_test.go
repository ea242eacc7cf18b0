package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
)

// TestPolicyReceiveChecks sends channel policies that must be refused to
// a real meshd over a real link, one per check of PROTOCOL.md §11, and
// checks each is counted under its reason and changes nothing: a
// rollback to a version the node replaced, bytes that do not parse, a bad
// signature, a member's signature, another org, and a second channel
// claiming a name that is taken.
func TestPolicyReceiveChecks(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, "", "mallory", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "channel", "create", "ops")
	var ch struct {
		ID string `json:"id"`
	}
	meshctlJSON(t, rt.meshctl, &ch, "--home", rt.home, "channel", "show", "ops")
	v1, err := os.ReadFile(filepath.Join(rt.home, "channels", ch.ID+".cbor"))
	if err != nil {
		t.Fatal(err)
	}
	meshctlOK(t, rt.meshctl, "--home", rt.home, "channel", "set", "ops", "--history", "off")

	admin, err := home.Home{Dir: rt.home}.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	signed := func(org, name string, key []byte) []byte {
		p, err := channel.New(org, name, nil, nil, true, key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	badSig := append([]byte(nil), v1...)
	badSig[len(badSig)-1] ^= 1

	l := rt.dial(t, 10*time.Second)
	defer l.Close()
	l.Start(func([]byte) {})
	cases := []struct {
		name, counter string
		doc           []byte
	}{
		{"rollback to v1", "policy.rejected.rollback", v1},
		{"not a policy", "policy.rejected.malformed", []byte{0xa2, 0x00}},
		{"bad signature", "policy.rejected.malformed", badSig},
		{"signed by a member", "policy.rejected.not_admin", signed("acme", "rogue", rt.key)},
		{"another org", "policy.rejected.wrong_org", signed("other", "rogue", admin.Key)},
		{"name taken", "policy.rejected.name_taken", signed("acme", "ops", admin.Key)},
	}
	for _, c := range cases {
		before := counters(t, rt.meshctl, rt.home)[c.counter]
		if err := l.Send(append([]byte{byte(proto.FramePolicy)}, c.doc...)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c.name+" counted as "+c.counter, 10*time.Second, func() bool {
			return counters(t, rt.meshctl, rt.home)[c.counter] > before
		})
	}
	var after struct {
		Version           uint64 `json:"version"`
		AllowHistoryFetch bool   `json:"allow_history_fetch"`
	}
	meshctlJSON(t, rt.meshctl, &after, "--home", rt.home, "channel", "show", "ops")
	if after.Version != 2 || after.AllowHistoryFetch {
		t.Fatalf("#ops after the refused policies: %+v, want v2 with history off", after)
	}
	var list struct {
		Channels []struct {
			Name string `json:"name"`
		} `json:"channels"`
	}
	meshctlJSON(t, rt.meshctl, &list, "--home", rt.home, "channel", "list")
	if len(list.Channels) != 1 {
		t.Fatalf("channels after the refused policies: %+v", list.Channels)
	}
}

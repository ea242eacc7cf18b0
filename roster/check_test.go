package roster

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

// fixture returns the golden chain parsed: v1 (alice admin), v2 (four
// members, quorum 1), v3 (alice and carol admins, quorum 2), v4.
func fixture(t *testing.T) (v1, v2, v3, v4 *Roster) {
	t.Helper()
	var rs []*Roster
	for _, f := range []string{"v1-bootstrap.hex", "v2-members.hex", "v3-quorum2.hex", "v4-two-admins.hex"} {
		r, err := Parse(readHex(t, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rs = append(rs, r)
	}
	return rs[0], rs[1], rs[2], rs[3]
}

// reparse round-trips r through its wire form, as a receiver sees it.
func reparse(t *testing.T, r *Roster) *Roster {
	t.Helper()
	p, err := Parse(mustEncode(t, r))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckUpdate(t *testing.T) {
	v1, v2, v3, v4 := fixture(t)

	// next builds an update of base, edited by edit, signed by keys.
	next := func(base *Roster, edit func(*Roster), keys ...ed25519.PrivateKey) *Roster {
		n := base.Next()
		if edit != nil {
			edit(n)
		}
		if len(keys) == 0 {
			if err := n.Sign(alice); err != nil {
				t.Fatal(err)
			}
			n.Doc.Sigs = nil
			return n
		}
		return reparse(t, mustSign(t, n, keys...))
	}
	otherOrg := func(n *Roster) { n.Org = "evil" }
	skip := func(n *Roster) { n.Version += 10 }
	addEve := func(n *Roster) {
		if err := n.Add(Member{Key: pub(eve), Role: RoleAdmin, Name: "eve"}); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name     string
		cur, nxt *Roster
		want     error // nil: accepted
		msg      string
	}{
		{"v1 to v2", v1, v2, nil, ""},
		{"v2 to v3", v2, v3, nil, ""},
		{"v3 to v4 with quorum 2", v3, v4, nil, ""},
		{"skipping versions", v1, next(v1, skip, alice), nil, ""},
		{"extra non-admin signature", v1, next(v1, nil, alice, bob), nil, ""},
		{"both admins under quorum 1", v2, next(v2, nil, alice, carol), nil, ""},
		{"rollback", v2, v1, ErrRollback, `"acme" v1 is not newer than the current v2`},
		{"equal version", v2, v2, ErrRollback, "v2 is not newer than the current v2"},
		{"wrong org", v1, next(v1, otherOrg, alice), ErrWrongOrg, `org "evil", the current roster is for org "acme"`},
		{"unknown signer", v1, next(v1, nil, eve), ErrUnknownSigner, pub(eve).Fingerprint()},
		{"signed by a non-admin member", v2, next(v2, nil, bob), ErrUnknownSigner, pub(bob).Fingerprint()},
		{"new admin signs its own admission", v1, next(v1, addEve, eve), ErrUnknownSigner, "none of them an admin of the current v1"},
		{"operator is not admin", v2, next(v2, nil, carol), ErrUnknownSigner, ""},
		{"too few for quorum 2", v3, next(v3, nil, alice), ErrTooFewSignatures, "1 of 2 required admin signatures (quorum of the current v3)"},
		{"too few, other signer does not count", v3, next(v3, nil, carol, eve), ErrTooFewSignatures, "1 of 2"},
		{"quorum 2 met", v3, next(v3, nil, carol, alice), nil, ""},
		{"unsigned", v1, next(v1, nil), ErrTooFewSignatures, "unsigned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckUpdate(tc.cur, tc.nxt)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckUpdate: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckUpdate error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not contain %q", err, tc.msg)
			}
		})
	}
}

func TestCheckUpdateBadSignature(t *testing.T) {
	v1, v2, _, _ := fixture(t)
	// In memory, nothing stops a caller from corrupting a signature; the
	// check verifies again and never trusts what Parse saw.
	bad := reparse(t, v2)
	bad.Doc.Sigs[0].Sig[0] ^= 1
	if err := CheckUpdate(v1, bad); !errors.Is(err, proto.ErrBadSignature) {
		t.Fatalf("CheckUpdate: %v, want ErrBadSignature", err)
	}
	if err := CheckBootstrap(bad); !errors.Is(err, proto.ErrBadSignature) {
		t.Fatalf("CheckBootstrap: %v, want ErrBadSignature", err)
	}
	// Fields edited after signing are not what was signed.
	edited := reparse(t, v2)
	edited.Members[0].Role = RoleAdmin
	if err := CheckUpdate(v1, edited); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("CheckUpdate of edited roster: %v, want ErrUnsigned", err)
	}
	if _, err := edited.Encode(); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("Encode of edited roster: %v, want ErrUnsigned", err)
	}
}

func TestCheckBootstrap(t *testing.T) {
	v1, _, v3, v4 := fixture(t)
	selfSigned := func(r *Roster, keys ...ed25519.PrivateKey) *Roster {
		c := r.Next()
		return reparse(t, mustSign(t, c, keys...))
	}
	for _, tc := range []struct {
		name string
		r    *Roster
		want error
		msg  string
	}{
		{"v1", v1, nil, ""},
		{"v4 signed by both admins", v4, nil, ""},
		{"signed by a non-admin only", selfSigned(v1, eve), ErrUnknownSigner, pub(eve).Fingerprint()},
		{"signed by a listed non-admin", selfSigned(v4, bob), ErrUnknownSigner, "none of them an admin it lists itself"},
		{"quorum 2 with one admin signature", v3, ErrTooFewSignatures, "1 of 2 required admin signatures (its own quorum)"},
		{"quorum 2 with one admin and a stranger", selfSigned(v3, alice, eve), ErrTooFewSignatures, "1 of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBootstrap(tc.r)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckBootstrap: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("CheckBootstrap error %q, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestCountSignatures(t *testing.T) {
	_, v2, v3, _ := fixture(t)
	n := v3.Next()
	mustSign(t, n, alice, bob)
	tally, err := CountSignatures(v3, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(tally.Admins) != 1 || !tally.Admins[0].Equal(pub(alice)) || len(tally.Others) != 1 || tally.Need != 2 || tally.Missing() != 1 {
		t.Fatalf("tally %+v", tally)
	}
	tally, err = CountSignatures(v2, n)
	if err != nil || tally.Need != 1 || tally.Missing() != 0 {
		t.Fatalf("tally %+v, %v", tally, err)
	}
}

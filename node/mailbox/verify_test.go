package mailbox

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

func TestRoundTrip(t *testing.T) {
	r := testRoster(t)
	chans, general := testChannels(t, r)
	full := VerifyOptions{Roster: r, Channels: chans}
	for _, tc := range []struct {
		name     string
		it       Item
		headers  []string // lines that must appear among the headers
		body     string   // the body region
		name2    string   // Verified.Name
		role     roster.Role
		unsigned []string
	}{
		{name: "channel message",
			it: Item{Env: sign(t, alice, 1, proto.ToChannel(general), msg("hello\nworld", nil)),
				Priority: "normal", FromName: "alice", ToText: "#general"},
			headers: []string{"To: #general", "Channel-ID: " + general.String(), "Kind: message", "Priority: normal"},
			body:    "hello\nworld\n",
			name2:   "alice", role: roster.RoleAdmin, unsigned: []string{"Priority"}},
		{name: "dm reply",
			it: Item{Env: sign(t, alice, 2, proto.ToPeer(pub(bob)), msg("hi bob\n", &replyTo)),
				Priority: "high", FromName: "alice", ToText: "@bob"},
			headers: []string{"To: @bob", "In-Reply-To: " + replyTo.String()},
			body:    "hi bob\n",
			name2:   "alice", role: roster.RoleAdmin, unsigned: []string{"Priority"}},
		{name: "dm to a peer without a name",
			it: Item{Env: sign(t, bob, 3, proto.ToPeer(pub(carol)), msg("", nil)),
				Priority: "high", FromName: "bob", ToText: "@" + pub(carol).Fingerprint()},
			headers: []string{"To: @" + pub(carol).Fingerprint()},
			body:    "",
			name2:   "bob", role: roster.RoleOperator, unsigned: []string{"Priority"}},
		{name: "request follow-up",
			it: Item{Env: sign(t, bob, 4, proto.ToPeer(pub(alice)), request(t, "run-tests", `{"suite":"unit","n":3}`, 2, &parentReqID)),
				Priority: "high", FromName: "bob", ToText: "@alice"},
			headers: []string{"Kind: request", "Request-ID: " + reqID.String(), "Intent: run-tests", "Hop: 2", "Reply-To: " + parentReqID.String()},
			body:    "{\n  \"n\": 3,\n  \"suite\": \"unit\"\n}\n",
			name2:   "bob", role: roster.RoleOperator, unsigned: []string{"Priority"}},
		{name: "request without params",
			it: Item{Env: sign(t, bob, 5, proto.ToPeer(pub(alice)), request(t, "ping", "", 0, nil)),
				Priority: "high", FromName: "bob", ToText: "@alice"},
			headers: []string{"Intent: ping", "Hop: 0"},
			body:    "",
			name2:   "bob", role: roster.RoleOperator, unsigned: []string{"Priority"}},
		{name: "response",
			it: Item{Env: sign(t, alice, 6, proto.ToPeer(pub(bob)), response(t, proto.StatusCompleted, `{"passed":true,"log":"ok"}`)),
				Priority: "normal", FromName: "alice", ToText: "@bob"},
			headers: []string{"Kind: response", "Request-ID: " + reqID.String(), "Status: completed"},
			body:    "{\n  \"log\": \"ok\",\n  \"passed\": true\n}\n",
			name2:   "alice", role: roster.RoleAdmin, unsigned: []string{"Priority"}},
		{name: "history-sourced",
			it: Item{Env: sign(t, carol, 7, proto.ToChannel(general), msg("old news", nil)),
				Priority: "low", FromHistory: true, ToText: "#general"},
			headers: []string{"From: - (" + pub(carol).Fingerprint() + ")", "Priority: low", "Source: history"},
			body:    "old news\n",
			name2:   "", role: roster.RoleMember, unsigned: []string{"Priority", "Source"}},
		{name: "delivery_failed dm",
			it: Item{Env: sign(t, alice, 9, proto.ToPeer(pub(bob)), msg("lost", nil)),
				Priority: "high", FromName: "alice", ToText: "@bob", Failure: &Failure{State: "expired"}},
			headers: []string{"Kind: delivery_failed", "Failed-Kind: message", "Delivery: expired"},
			body:    "lost\n",
			name2:   "alice", role: roster.RoleAdmin, unsigned: []string{"Priority", "Delivery"}},
		{name: "delivery_failed request with a reason",
			it: Item{Env: sign(t, bob, 10, proto.ToPeer(pub(alice)), request(t, "ping", "", 0, nil)),
				Priority: "high", FromName: "bob", ToText: "@alice", Failure: &Failure{State: "refused", Reason: "the recipient was removed\x1b[31m"}},
			headers: []string{"Kind: delivery_failed", "Failed-Kind: request", "Delivery: refused", "Delivery-Reason: the recipient was removed?[31m", "Intent: ping"},
			body:    "",
			name2:   "bob", role: roster.RoleOperator, unsigned: []string{"Priority", "Delivery"}},
		{name: "body that mimics the format",
			it: Item{Env: sign(t, alice, 8, proto.ToChannel(general), msg("From: mallory\n---\n"+ArmorBegin+"\nQUJD\n"+ArmorEnd+"\n---", nil)),
				FromName: "alice", ToText: "#general"},
			body:  "From: mallory\n---\n" + ArmorBegin + "\nQUJD\n" + ArmorEnd + "\n---\n",
			name2: "alice", role: roster.RoleAdmin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(tc.it)
			if err != nil {
				t.Fatal(err)
			}
			head, rest, ok := strings.Cut(string(b), "\n---\n")
			if !ok {
				t.Fatalf("no --- line in\n%s", b)
			}
			lines := strings.Split(head, "\n")
			for _, h := range tc.headers {
				if !slices.Contains(lines, h) {
					t.Errorf("headers lack %q:\n%s", h, head)
				}
			}
			if body := rest[:strings.LastIndex(rest, ArmorBegin)]; body != tc.body {
				t.Errorf("body region %q, want %q", body, tc.body)
			}
			v, err := Verify(b, full)
			if err != nil {
				t.Fatalf("verify: %v\n%s", err, b)
			}
			if v.Env.ID != tc.it.Env.ID || !v.Signer.Equal(tc.it.Env.From) || v.Name != tc.name2 || v.Role != tc.role {
				t.Errorf("verified id %s signer %s name %q role %s", v.Env.ID, v.Signer.Fingerprint(), v.Name, v.Role)
			}
			if v.Priority != tc.it.Priority || v.FromHistory != tc.it.FromHistory {
				t.Errorf("verified priority %q history %v", v.Priority, v.FromHistory)
			}
			if !slices.Equal(v.Unsigned, tc.unsigned) {
				t.Errorf("unsigned %q, want %q", v.Unsigned, tc.unsigned)
			}
			if len(v.Unchecked) != 0 {
				t.Errorf("unchecked %q with a roster and channel policies", v.Unchecked)
			}
			// Without a roster or channel policies the names are unchecked
			// but the file still verifies.
			v, err = Verify(b, VerifyOptions{})
			if err != nil {
				t.Fatalf("verify without options: %v", err)
			}
			if len(v.Unchecked) == 0 || !strings.HasPrefix(v.Unchecked[0], "From name") {
				t.Errorf("unchecked %q without options", v.Unchecked)
			}
		})
	}
}

// files used by the failure tests.
type fixture struct {
	opts              VerifyOptions
	message, dm, req  []byte
	resp, otherSender []byte
}

func newFixture(t testing.TB) fixture {
	r := testRoster(t)
	chans, general := testChannels(t, r)
	render := func(it Item) []byte {
		b, err := Render(it)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return fixture{
		opts: VerifyOptions{Roster: r, Channels: chans},
		message: render(Item{Env: sign(t, alice, 1, proto.ToChannel(general), msg("first line\nhello world\nlast line", nil)),
			Priority: "normal", FromName: "alice", ToText: "#general"}),
		dm: render(Item{Env: sign(t, alice, 2, proto.ToPeer(pub(bob)), msg("hi", nil)),
			Priority: "high", FromName: "alice", ToText: "@bob"}),
		req: render(Item{Env: sign(t, alice, 3, proto.ToPeer(pub(bob)), request(t, "run-tests", `{"suite":"unit"}`, 0, nil)),
			Priority: "high", FromName: "alice", ToText: "@bob"}),
		resp: render(Item{Env: sign(t, bob, 4, proto.ToPeer(pub(alice)), response(t, proto.StatusCompleted, `{"ok":true}`)),
			Priority: "normal", FromName: "bob", ToText: "@alice"}),
		otherSender: render(Item{Env: sign(t, bob, 5, proto.ToChannel(general), msg("from bob", nil)),
			Priority: "normal", FromName: "bob", ToText: "#general"}),
	}
}

func replace(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q not in\n%s", old, b)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

// header returns the value of a header in a rendered file.
func headerOf(t *testing.T, b []byte, name string) string {
	t.Helper()
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	t.Fatalf("no header %s", name)
	return ""
}

// armorOf returns the armor block of a rendered file.
func armorOf(b []byte) string {
	s := string(b)
	return s[strings.LastIndex(s, ArmorBegin):]
}

func TestVerifyFailures(t *testing.T) {
	f := newFixture(t)
	fpA, fpB := pub(alice).Fingerprint(), pub(bob).Fingerprint()
	for _, tc := range []struct {
		name  string
		file  func() []byte
		opts  *VerifyOptions // nil: the roster and channel policies
		field string         // the MismatchError field; "" for another error
		is    error          // for other errors
		msg   string         // the exact error text, when given
	}{
		{name: "flipped body byte",
			file:  func() []byte { return replace(t, f.message, "hello world", "hellp world") },
			field: "body",
			msg:   `body line 2 differs from the envelope: the file has "hellp world\n", the envelope has "hello world\n"`},
		{name: "body line added",
			file: func() []byte {
				return replace(t, f.message, "last line\n"+ArmorBegin, "last line\nP.S. send money\n"+ArmorBegin)
			},
			field: "body",
			msg:   `body line 4 differs from the envelope: the file has "P.S. send money\n", the envelope has the end of the body`},
		{name: "edited Date",
			file: func() []byte {
				return replace(t, f.message, "Date: 2026-11-21T12:00:01.123Z", "Date: 2026-11-21T12:00:09.123Z")
			},
			field: "Date",
			msg:   `header Date: the file says "2026-11-21T12:00:09.123Z", the envelope says "2026-11-21T12:00:01.123Z"`},
		{name: "edited To (channel name)",
			file:  func() []byte { return replace(t, f.message, "To: #general", "To: #ops") },
			field: "To",
			msg:   `header To: the file says "#ops", the channel policy says "#general"`},
		{name: "edited To (channel to peer), without options",
			file:  func() []byte { return replace(t, f.message, "To: #general", "To: @bob") },
			opts:  &VerifyOptions{},
			field: "To"},
		{name: "edited To (peer)",
			file:  func() []byte { return replace(t, f.dm, "To: @bob", "To: @carol") },
			field: "To",
			msg:   `header To: the file says "@carol", the roster says "@bob"`},
		{name: "edited To (peer fingerprint), without options",
			file:  func() []byte { return replace(t, f.dm, "To: @bob", "To: @"+pub(carol).Fingerprint()) },
			opts:  &VerifyOptions{},
			field: "To"},
		{name: "edited Intent",
			file:  func() []byte { return replace(t, f.req, "Intent: run-tests", "Intent: rm-rf") },
			field: "Intent",
			msg:   `header Intent: the file says "rm-rf", the envelope says "run-tests"`},
		{name: "edited Status",
			file:  func() []byte { return replace(t, f.resp, "Status: completed", "Status: failed") },
			field: "Status"},
		{name: "edited Hop",
			file:  func() []byte { return replace(t, f.req, "Hop: 0", "Hop: 1") },
			field: "Hop"},
		{name: "edited params",
			file:  func() []byte { return replace(t, f.req, `"suite": "unit"`, `"suite": "all"`) },
			field: "body"},
		{name: "From and From-Key of another member",
			file: func() []byte {
				b := replace(t, f.message, "From: alice ("+fpA+")", "From: bob ("+fpB+")")
				return replace(t, b, "From-Key: "+pub(alice).String(), "From-Key: "+pub(bob).String())
			},
			field: "From-Key",
			msg:   `header From-Key: the file says "` + pub(bob).String() + `", the envelope says "` + pub(alice).String() + `"`},
		{name: "From and From-Key lines swapped",
			file: func() []byte {
				from, key := "From: alice ("+fpA+")\n", "From-Key: "+pub(alice).String()+"\n"
				return replace(t, f.message, from+key, key+from)
			},
			field: "header order"},
		{name: "From fingerprint of another member",
			file:  func() []byte { return replace(t, f.message, "From: alice ("+fpA+")", "From: alice ("+fpB+")") },
			opts:  &VerifyOptions{},
			field: "From",
			msg:   `header From: the file says "alice (` + fpB + `)", the envelope says "alice (` + fpA + `)"`},
		{name: "From name",
			file:  func() []byte { return replace(t, f.message, "From: alice (", "From: bob (") },
			field: "From name",
			msg:   `sender name in header From: the file says "bob", the roster says "alice"`},
		{name: "armor block of another message",
			file: func() []byte {
				return replace(t, f.message, armorOf(f.message), armorOf(f.otherSender))
			},
			field: "Message-ID",
			msg: `header Message-ID: the file says "` + headerOf(t, f.message, "Message-ID") +
				`", the envelope says "` + headerOf(t, f.otherSender, "Message-ID") + `": the armor block is another message's`},
		{name: "armor block of another message from the same sender",
			file: func() []byte {
				return replace(t, f.dm, armorOf(f.dm), armorOf(f.req))
			},
			field: "Message-ID"},
		{name: "truncated armor",
			file: func() []byte {
				a := strings.Index(string(f.message), ArmorBegin)
				return f.message[:a+len(ArmorBegin)+40]
			},
			is:  ErrMalformed,
			msg: "malformed mailbox file: armor block has no " + ArmorEnd + " line (truncated?)"},
		{name: "armor missing a line",
			file: func() []byte {
				a := armorOf(f.message)
				lines := strings.Split(a, "\n")
				return replace(t, f.message, a, strings.Join(append(lines[:2], lines[3:]...), "\n"))
			},
			is: ErrMalformed},
		{name: "bad base64",
			file: func() []byte {
				a := armorOf(f.message)
				return replace(t, f.message, a, a[:len(ArmorBegin)+10]+"!"+a[len(ArmorBegin)+11:])
			},
			is:  ErrMalformed,
			msg: "malformed mailbox file: armor block: bad base64: illegal base64 data at input byte 9"},
		{name: "no armor",
			file: func() []byte { return f.message[:strings.Index(string(f.message), ArmorBegin)] },
			is:   ErrMalformed},
		{name: "tampered signature",
			file: func() []byte {
				se, err := proto.ParseEnvelope(mustDecodeArmor(t, f.message))
				if err != nil {
					t.Fatal(err)
				}
				raw := bytes.Clone(se.Raw)
				raw[len(raw)-1] ^= 1
				return replace(t, f.message, armorOf(f.message), armor(raw))
			},
			is: proto.ErrBadSignature},
		{name: "data after the armor",
			file: func() []byte { return append(bytes.Clone(f.message), "PS\n"...) },
			is:   ErrMalformed},
		{name: "armor wrapped at 64",
			file: func() []byte {
				a := armorOf(f.message)
				enc := base64.StdEncoding.EncodeToString(mustDecodeArmor(t, f.message))
				var b strings.Builder
				b.WriteString(ArmorBegin + "\n")
				for len(enc) > 64 {
					b.WriteString(enc[:64] + "\n")
					enc = enc[64:]
				}
				b.WriteString(enc + "\n" + ArmorEnd + "\n")
				return replace(t, f.message, a, b.String())
			},
			field: "armor"},
		{name: "extra header",
			file:  func() []byte { return replace(t, f.message, "Kind: message\n", "Kind: message\nX-Approved: yes\n") },
			field: "X-Approved",
			msg:   `header X-Approved: "yes" is not in the envelope`},
		{name: "missing header",
			file:  func() []byte { return replace(t, f.message, "Seq: 41\n", "") },
			field: "Seq",
			msg:   `header Seq is missing: the envelope says "41"`},
		{name: "duplicate header",
			file: func() []byte { return replace(t, f.message, "Seq: 41\n", "Seq: 41\nSeq: 41\n") },
			is:   ErrMalformed},
		{name: "bad Priority",
			file: func() []byte { return replace(t, f.message, "Priority: normal", "Priority: urgent") },
			is:   ErrMalformed},
		{name: "bad Delivery",
			file: func() []byte {
				return replace(t, f.message, "Priority: normal\n", "Priority: normal\nDelivery: lost\n")
			},
			is: ErrMalformed},
		{name: "Delivery added to a delivered message",
			file: func() []byte {
				return replace(t, f.message, "Priority: normal\n", "Priority: normal\nDelivery: expired\n")
			},
			field: "Kind"},
		{name: "bad Source",
			file: func() []byte { return replace(t, f.message, "Priority: normal\n", "Priority: normal\nSource: relay\n") },
			is:   ErrMalformed},
		{name: "not a header",
			file: func() []byte { return replace(t, f.message, "Kind: message\n", "Kind: message\nhello\n") },
			is:   ErrMalformed},
		{name: "no separator",
			file: func() []byte { return replace(t, f.message, "\n---\n", "\n") },
			is:   ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := f.opts
			if tc.opts != nil {
				opts = *tc.opts
			}
			_, err := Verify(tc.file(), opts)
			if err == nil {
				t.Fatal("verified")
			}
			if tc.field != "" {
				var me *MismatchError
				if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) {
					t.Fatalf("error %v, want a MismatchError", err)
				}
				if me.Field != tc.field {
					t.Errorf("field %q, want %q (%v)", me.Field, tc.field, err)
				}
			} else if !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("error\n%s\nwant\n%s", err, tc.msg)
			}
			t.Log(err)
		})
	}
}

func mustDecodeArmor(t *testing.T, file []byte) []byte {
	t.Helper()
	p, err := splitFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return p.raw
}

func TestVerifyUnchecked(t *testing.T) {
	f := newFixture(t)
	r := testRoster(t)
	v, err := Verify(f.message, VerifyOptions{Roster: r})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Unchecked, []string{"To name (no channel policies)"}) {
		t.Errorf("unchecked %q", v.Unchecked)
	}
	v, err = Verify(f.dm, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Unchecked, []string{"From name (no roster)", "To name (no roster)"}) || v.Name != "alice" || v.Role != 0 {
		t.Errorf("unchecked %q name %q role %s", v.Unchecked, v.Name, v.Role)
	}
	// A roster that does not list the sender.
	other, err := roster.New("acme", carol, "carol")
	if err != nil {
		t.Fatal(err)
	}
	v, err = Verify(f.dm, VerifyOptions{Roster: other})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Unchecked, []string{"From name (the sender is not in the roster)", "To name (the peer is not in the roster)"}) {
		t.Errorf("unchecked %q", v.Unchecked)
	}
}

// FuzzVerify: Verify never panics, and whatever it accepts renders back to
// the same bytes.
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	for _, b := range [][]byte{fx.message, fx.dm, fx.req, fx.resp} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Verify(b, VerifyOptions{})
		if err != nil {
			return
		}
		name := v.Name
		got, err := Render(Item{Env: v.Env, Priority: v.Priority, FromHistory: v.FromHistory, FromName: name, ToText: v.To})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("verified file renders differently:\n%q\n%q", b, got)
		}
	})
}

// TestVerifyUnescapedBody: a file an older version wrote, with the body's
// control characters as they are, still verifies; the escaped form is
// what is written now, and a body that is neither does not verify.
func TestVerifyUnescapedBody(t *testing.T) {
	se := sign(t, alice, 1, proto.ToPeer(pub(bob)), msg("bell\x07 and \u202eevil", nil))
	b, err := Render(Item{Env: se})
	if err != nil {
		t.Fatal(err)
	}
	escaped := `bell\u0007 and \u202eevil`
	if _, err := Verify(b, VerifyOptions{}); err != nil || !bytes.Contains(b, []byte(escaped)) {
		t.Fatalf("escaped file: %v\n%s", err, b)
	}
	old := replace(t, b, escaped, "bell\x07 and \u202eevil")
	if _, err := Verify(old, VerifyOptions{}); err != nil {
		t.Errorf("a file written before the escapes: %v", err)
	}
	for _, bad := range []string{"bell and evil", `bell\u0007 and evil`} {
		if _, err := Verify(replace(t, b, escaped, bad), VerifyOptions{}); err == nil {
			t.Errorf("body %q verified", bad)
		}
	}
}

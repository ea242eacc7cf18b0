package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type result struct {
	code           int
	stdout, stderr string
}

// mc runs meshctl in process.
func mc(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, nil, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// ok runs meshctl and fails the test unless it exits 0.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	r := mc(t, args...)
	if r.code != 0 {
		t.Fatalf("meshctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs meshctl, expects exit status code and stderr containing each of want.
func fails(t *testing.T, code int, args []string, want ...string) result {
	t.Helper()
	r := mc(t, args...)
	if r.code != code {
		t.Fatalf("meshctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "meshctl: ") {
		t.Errorf("stderr %q lacks the meshctl: prefix", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("meshctl %s: stderr %q lacks %q", strings.Join(args, " "), r.stderr, w)
		}
	}
	return r
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad json %q: %v", s, err)
	}
	return v
}

// node makes a home with an identity and returns its dir and key text.
func node(t *testing.T, name string) (dir, key string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), name)
	id := decode[identityJSON](t, ok(t, "--home", dir, "init", "--name", name, "--json"))
	return dir, id.Key
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout when code is 0, else in stderr
	}{
		{[]string{"help"}, 0, "roster verify FILE"},
		{[]string{"--help"}, 0, "commands:"},
		{[]string{"help", "roster", "add"}, 0, "usage: meshctl roster add KEY"},
		{[]string{"help", "roster"}, 0, "roster sign FILE"},
		{[]string{"roster", "add", "-h"}, 0, "usage: meshctl roster add KEY"},
		{[]string{"roster", "-h"}, 0, "usage: meshctl roster COMMAND"},
		{[]string{"init", "--help"}, 0, "usage: meshctl init"},
		{[]string{}, 2, "missing command"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, 2, `unknown command "bogus"`},
		{[]string{"roster"}, 2, "missing command"},
		{[]string{"roster", "bogus"}, 2, `unknown command "roster bogus"`},
		{[]string{"init", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"--bogus", "init"}, 2, "flag provided but not defined"},
		{[]string{"id", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"roster", "sign"}, 2, "missing argument"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := mc(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tc.code, r.stderr)
			}
			where := r.stdout
			if tc.code != 0 {
				where = r.stderr
				if !strings.HasPrefix(r.stderr, "meshctl: ") || !strings.Contains(r.stderr, "usage:") {
					t.Errorf("usage error output %q", r.stderr)
				}
			}
			if !strings.Contains(where, tc.out) {
				t.Fatalf("output lacks %q:\n%s", tc.out, where)
			}
		})
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	ok(t, "--home", dir, "init", "--name", "alice")
	for _, args := range [][]string{
		{"--home", dir, "--json", "id"},
		{"--home=" + dir, "id", "--json"},
		{"id", "--home", dir, "--json"},
		{"-json", "id", "-home", dir},
	} {
		id := decode[identityJSON](t, ok(t, args...))
		if id.Home != dir || id.Name != "alice" {
			t.Errorf("%v: %+v", args, id)
		}
	}
	ok(t, "--home", dir, "roster", "init", "--org", "acme")
	for _, args := range [][]string{
		{"--home", dir, "roster", "show", "--json"},
		{"roster", "--home", dir, "--json", "show"},
		{"roster", "show", "--home", dir, "--json"},
	} {
		r := decode[rosterJSON](t, ok(t, args...))
		if r.Org != "acme" {
			t.Errorf("%v: %+v", args, r)
		}
	}
	// MESH_HOME is the default home.
	t.Setenv("MESH_HOME", dir)
	if id := decode[identityJSON](t, ok(t, "id", "--json")); id.Home != dir {
		t.Errorf("MESH_HOME ignored: %+v", id)
	}
}

func TestInitAndID(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "h")
	fails(t, 1, []string{"--home", dir, "id"}, "no identity", "meshctl init")

	out := ok(t, "--home", dir, "init", "--name", "alice")
	if !strings.Contains(out, "created a new identity") || !strings.Contains(out, "ed25519:") {
		t.Fatalf("init output:\n%s", out)
	}
	first := decode[identityJSON](t, ok(t, "--home", dir, "id", "--json"))
	again := decode[identityJSON](t, ok(t, "--home", dir, "init", "--json"))
	if again.Created == nil || *again.Created || again.Key != first.Key || again.Name != "alice" {
		t.Fatalf("second init: %+v", again)
	}
	if out := ok(t, "--home", dir, "init"); !strings.Contains(out, "already exists") {
		t.Fatalf("second init output:\n%s", out)
	}
	renamed := decode[identityJSON](t, ok(t, "--home", dir, "init", "--name", "alicia", "--json"))
	if renamed.Key != first.Key || renamed.Name != "alicia" {
		t.Fatalf("rename: %+v", renamed)
	}
	if len(first.Fingerprint) != 16 || !strings.HasPrefix(first.NodeID, first.Fingerprint) {
		t.Fatalf("id: %+v", first)
	}
	text := ok(t, "--home", dir, "id")
	for _, s := range []string{first.Key, first.Fingerprint, first.NodeID, "alicia", dir} {
		if !strings.Contains(text, s) {
			t.Errorf("id output lacks %q:\n%s", s, text)
		}
	}

	if err := os.Chmod(filepath.Join(dir, "identity.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, []string{"--home", dir, "id"}, "mode 0644", "chmod 600")
	fails(t, 1, []string{"--home", dir, "init"}, "chmod 600")
}

func TestRosterInit(t *testing.T) {
	t.Parallel()
	dir, key := node(t, "alice")
	fails(t, 2, []string{"--home", dir, "roster", "init"}, "--org is required")
	fails(t, 2, []string{"--home", dir, "roster", "init", "--org", strings.Repeat("x", 129)}, "org id")
	fails(t, 1, []string{"--home", filepath.Join(t.TempDir(), "none"), "roster", "init", "--org", "acme"}, "no identity")
	res := decode[editResult](t, ok(t, "--home", dir, "roster", "init", "--org", "acme", "--json"))
	if res.Version != 1 || res.File != filepath.Join(dir, "roster.cbor") || !res.Complete {
		t.Fatalf("roster init: %+v", res)
	}
	r := fails(t, 1, []string{"--home", dir, "roster", "init", "--org", "other"}, "already exists")
	if !strings.Contains(r.stderr, "hint: ") {
		t.Errorf("no hint: %q", r.stderr)
	}
	ok(t, "--home", dir, "roster", "init", "--org", "other", "--force")
	show := decode[rosterJSON](t, ok(t, "--home", dir, "roster", "show", "--json"))
	if show.Org != "other" || show.Version != 1 || len(show.Members) != 1 || show.Members[0].Key.String() != key ||
		show.Members[0].Role.String() != "admin" || show.Members[0].Name != "alice" || len(show.Signers) != 1 || !show.Signers[0].Admin {
		t.Fatalf("show: %+v", show)
	}
	ok(t, "--home", dir, "roster", "verify", filepath.Join(dir, "roster.cbor"))

	fails(t, 1, []string{"--home", filepath.Join(t.TempDir(), "x"), "roster", "show"}, "no roster at", "roster init")
}

func TestRosterEditing(t *testing.T) {
	t.Parallel()
	a, _ := node(t, "alice")
	b, bkey := node(t, "bob")
	_, ckey := node(t, "carol")
	ok(t, "--home", a, "roster", "init", "--org", "acme")
	file := filepath.Join(a, "roster.cbor")

	// Usage errors.
	fails(t, 2, []string{"--home", a, "roster", "add", "nokey", "--role", "member"}, "KEY")
	fails(t, 2, []string{"--home", a, "roster", "add", bkey}, "--role is required")
	fails(t, 2, []string{"--home", a, "roster", "add", bkey, "--role", "king"}, "unknown role")
	fails(t, 2, []string{"--home", a, "roster", "quorum", "0"}, "positive")
	fails(t, 2, []string{"--home", a, "roster", "role", "alice", "boss"}, "unknown role")

	res := decode[editResult](t, ok(t, "--home", a, "roster", "add", bkey, "--role", "member", "--name", "bob", "--json"))
	if res.Version != 2 || !res.Complete || res.File != file || res.Signatures != 1 || res.Required != 1 {
		t.Fatalf("add: %+v", res)
	}
	out := ok(t, "--home", a, "roster", "add", ckey, "--name", "carol", "--role", "operator", "--archive")
	if !strings.Contains(out, `roster "acme" v3: added carol`) || !strings.Contains(out, "1 of 1 required") {
		t.Fatalf("add output:\n%s", out)
	}
	fails(t, 1, []string{"--home", a, "roster", "add", bkey, "--role", "admin"}, "already a member")
	show := decode[rosterJSON](t, ok(t, "--home", a, "roster", "show", "--json"))
	if show.Version != 3 || len(show.Members) != 3 {
		t.Fatalf("show: %+v", show)
	}
	var carol memberJSON
	for _, m := range show.Members {
		if m.Name == "carol" {
			carol = m
		}
	}
	if !carol.Archive || carol.Role.String() != "operator" {
		t.Fatalf("carol: %+v", carol)
	}

	// Members by fingerprint, prefix and name.
	ok(t, "--home", a, "roster", "role", carol.Fingerprint, "member")
	ok(t, "--home", a, "roster", "role", carol.Fingerprint[:8], "observer")
	fails(t, 1, []string{"--home", a, "roster", "role", "carol", "observer"}, "already observer")
	fails(t, 1, []string{"--home", a, "roster", "remove", "nobody"}, "not a member")
	// An ambiguous name: dave is called like carol's fingerprint prefix.
	_, dkey := node(t, "dave")
	ok(t, "--home", a, "roster", "add", dkey, "--role", "member", "--name", carol.Fingerprint[:8])
	r := fails(t, 1, []string{"--home", a, "roster", "remove", carol.Fingerprint[:8]}, "ambiguous member", "matches 2 members")
	if !strings.Contains(r.stderr, "hint: ") {
		t.Errorf("no hint: %q", r.stderr)
	}
	ok(t, "--home", a, "roster", "remove", carol.Fingerprint)
	fails(t, 1, []string{"--home", a, "roster", "remove", "alice"}, "last admin")
	fails(t, 1, []string{"--home", a, "roster", "quorum", "2"}, "quorum exceeds admins")

	// A member that is not an admin cannot edit.
	copyFile := filepath.Join(t.TempDir(), "copy.cbor")
	data, _ := os.ReadFile(file)
	os.WriteFile(copyFile, data, 0o644)
	r = fails(t, 1, []string{"--home", b, "roster", "add", ckey, "--role", "admin", "--file", copyFile},
		"this node (bob, ", `is not an admin of roster org "acme" v7`)
	if after, _ := os.ReadFile(copyFile); !bytes.Equal(after, data) {
		t.Fatal("refused edit changed the file")
	}
	// --out writes elsewhere and leaves the file alone.
	out2 := filepath.Join(t.TempDir(), "next.cbor")
	ok(t, "--home", a, "roster", "add", ckey, "--role", "admin", "--file", copyFile, "--out", out2)
	if after, _ := os.ReadFile(copyFile); !bytes.Equal(after, data) {
		t.Fatal("--out changed the input")
	}
	ok(t, "roster", "verify", out2, "--current", copyFile)
}

func TestRosterQuorumFlow(t *testing.T) {
	t.Parallel()
	a, _ := node(t, "alice")
	c, ckey := node(t, "carol")
	_, dkey := node(t, "dave")
	ok(t, "--home", a, "roster", "init", "--org", "acme")
	ok(t, "--home", a, "roster", "add", ckey, "--role", "admin", "--name", "carol")
	ok(t, "--home", a, "roster", "quorum", "2")
	file := filepath.Join(a, "roster.cbor")
	v3, _ := os.ReadFile(file)

	res := decode[editResult](t, ok(t, "--home", a, "roster", "add", dkey, "--role", "member", "--json"))
	pending := filepath.Join(a, "roster-v4.cbor")
	if res.Complete || res.Missing != 1 || res.Signatures != 1 || res.Required != 2 || res.File != pending {
		t.Fatalf("add under quorum 2: %+v", res)
	}
	if now, _ := os.ReadFile(file); !bytes.Equal(now, v3) {
		t.Fatal("an update short of signatures replaced the current roster")
	}
	fails(t, 1, []string{"roster", "verify", pending, "--current", file}, "too few signatures", "1 of 2 required admin signatures")
	// A second edit would clobber the pending file.
	_, ekey := node(t, "eve")
	fails(t, 1, []string{"--home", a, "roster", "add", ekey, "--role", "observer"}, "already exists")

	// carol has no roster in her home: the file's own admins count.
	sr := decode[signResult](t, ok(t, "--home", c, "roster", "sign", pending, "--json"))
	if !sr.Complete || sr.Signatures != 2 || sr.Authority != "its own admins" {
		t.Fatalf("sign: %+v", sr)
	}
	ok(t, "roster", "verify", pending, "--current", file)
	v := decode[verifyResult](t, ok(t, "roster", "verify", pending, "--current", file, "--json"))
	if !v.Valid || v.Version != 4 {
		t.Fatalf("verify: %+v", v)
	}
	// Signing again is idempotent; alice's home roster (v3) is the authority.
	sr = decode[signResult](t, ok(t, "--home", a, "roster", "sign", pending, "--json"))
	if sr.Signatures != 2 || !strings.Contains(sr.Authority, "v3") {
		t.Fatalf("re-sign: %+v", sr)
	}
	// Signing something that cannot replace --current is refused.
	fails(t, 1, []string{"--home", a, "roster", "sign", file, "--current", pending}, "will not sign", "rollback")
	// A non-admin cannot sign.
	b, _ := node(t, "bob")
	fails(t, 1, []string{"--home", b, "roster", "sign", pending}, "is not an admin")
}

func TestRosterVerify(t *testing.T) {
	t.Parallel()
	a, _ := node(t, "alice")
	_, bkey := node(t, "bob")
	e, _ := node(t, "eve")
	dir := t.TempDir()
	save := func(home, name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(home, "roster.cbor"))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		return p
	}
	ok(t, "--home", a, "roster", "init", "--org", "acme")
	v1 := save(a, "v1.cbor")
	ok(t, "--home", a, "roster", "add", bkey, "--role", "member", "--name", "bob")
	v2 := save(a, "v2.cbor")
	// eve makes her own "acme" roster, v3, and another org.
	ok(t, "--home", e, "roster", "init", "--org", "acme")
	ok(t, "--home", e, "roster", "add", bkey, "--role", "member")
	ok(t, "--home", e, "roster", "role", bkey, "observer")
	evilAcme := save(e, "evil-acme.cbor")
	ok(t, "--home", e, "roster", "init", "--org", "evil", "--force")
	evilOrg := save(e, "evil-org.cbor")

	data, _ := os.ReadFile(v2)
	tampered := filepath.Join(dir, "tampered.cbor")
	b := bytes.Clone(data)
	b[bytes.Index(b, []byte("acme"))+3] ^= 0x01 // "acme" -> "acmd", inside the signed body
	os.WriteFile(tampered, b, 0o644)
	truncated := filepath.Join(dir, "truncated.cbor")
	os.WriteFile(truncated, data[:len(data)-5], 0o644)

	if out := ok(t, "roster", "verify", v1); !strings.HasPrefix(out, "ok") {
		t.Fatalf("verify output %q", out)
	}
	if out := ok(t, "roster", "verify", v2, "--current", v1); !strings.HasPrefix(out, "ok") || !strings.Contains(out, "update of v1") {
		t.Fatalf("verify output %q", out)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{tampered}, []string{"bad signature", `"acmd" v2`}},
		{[]string{tampered, "--current", v1}, []string{"bad signature"}},
		{[]string{truncated}, []string{"malformed cbor"}},
		{[]string{v1, "--current", v2}, []string{"roster rollback", "v1 is not newer than the current v2"}},
		{[]string{v2, "--current", v2}, []string{"roster rollback", "v2 is not newer than the current v2"}},
		{[]string{evilOrg, "--current", v1}, []string{"wrong org", `"evil"`, `"acme"`}},
		{[]string{evilAcme, "--current", v1}, []string{"unknown signer", "none of them an admin of the current v1"}},
		{[]string{filepath.Join(dir, "missing.cbor")}, []string{"no roster at"}},
		{[]string{v1, "--current", filepath.Join(dir, "missing.cbor")}, []string{"current roster: no roster at"}},
	} {
		fails(t, 1, append([]string{"roster", "verify"}, tc.args...), tc.want...)
	}

	r := mc(t, "roster", "verify", v1, "--current", v2, "--json")
	v := decode[verifyResult](t, r.stdout)
	if r.code != 1 || v.Valid || !strings.Contains(v.Reason, "rollback") || v.Version != 1 {
		t.Fatalf("verify --json: exit %d, %+v", r.code, v)
	}
	r = mc(t, "roster", "verify", tampered, "--json")
	if v := decode[verifyResult](t, r.stdout); r.code != 1 || v.Valid || !strings.Contains(v.Reason, "bad signature") {
		t.Fatalf("verify --json of tampered: exit %d, %+v", r.code, v)
	}
}

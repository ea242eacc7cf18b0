package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/meshd/meshd/internal/testbin"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testtmp"
)

// moduleRoot finds the directory holding go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// built is the meshctl binary, built once for all the tests that run it.
var built struct {
	once    sync.Once
	cleanup func()
	bin     string
	err     error
}

// buildMeshctl builds the real binary, once per test run, and returns its
// path.
func buildMeshctl(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the meshctl binary; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool in PATH")
	}
	built.once.Do(func() {
		var dir string
		if dir, built.cleanup, built.err = testbin.Build(moduleRoot(t), "./cmd/meshctl"); built.err != nil {
			return
		}
		built.bin = filepath.Join(dir, "meshctl")
		if runtime.GOOS == "windows" {
			built.bin += ".exe" // go build -o DIR/ names it as the system does
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	testpar.Default()
	testtmp.Use()
	code := m.Run()
	if built.cleanup != nil {
		built.cleanup()
	}
	os.Exit(code)
}

// TestEndToEnd drives the real binary through the offline roster flow:
// two nodes, a member added, a non-admin refused, tampering and rollback
// detected, and a quorum-2 update that needs a second admin's signature.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildMeshctl(t)
	tmp := t.TempDir()
	homeA, homeB, homeC := filepath.Join(tmp, "A"), filepath.Join(tmp, "B"), filepath.Join(tmp, "C")

	type res struct {
		code           int
		stdout, stderr string
	}
	exe := func(args ...string) res {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "MESH_HOME=") // only --home decides
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("run meshctl: %v", err)
		}
		return res{code, out.String(), errb.String()}
	}
	ok := func(args ...string) string {
		t.Helper()
		r := exe(args...)
		if r.code != 0 {
			t.Fatalf("meshctl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	fail := func(want string, args ...string) {
		t.Helper()
		r := exe(args...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "meshctl: ") || !strings.Contains(r.stderr, want) {
			t.Fatalf("meshctl %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
	key := func(home string) string {
		t.Helper()
		var id struct{ Key string }
		if err := json.Unmarshal([]byte(ok("--home", home, "id", "--json")), &id); err != nil {
			t.Fatal(err)
		}
		return id.Key
	}
	snapshot := func(name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(homeA, "roster.cbor"))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Two nodes.
	if out := ok("--home", homeA, "init", "--name", "alice"); !strings.Contains(out, "created") {
		t.Fatalf("init A:\n%s", out)
	}
	ok("--home", homeB, "init", "--name", "bob")
	if st, err := os.Stat(filepath.Join(homeA, "identity.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity.key: %v %v", st.Mode(), err)
	}
	if out := ok("--home", homeA, "init"); !strings.Contains(out, "already exists") {
		t.Fatalf("second init:\n%s", out)
	}
	keyA, keyB := key(homeA), key(homeB)

	// A creates the org and adds B.
	ok("--home", homeA, "roster", "init", "--org", "acme")
	v1 := snapshot("v1.cbor")
	ok("--home", homeA, "roster", "add", keyB, "--role", "member", "--name", "bob")
	v2 := snapshot("v2.cbor")
	var show struct {
		Org     string
		Version uint64
		Members []struct{ Name, Role, Key string }
	}
	if err := json.Unmarshal([]byte(ok("--home", homeA, "roster", "show", "--json")), &show); err != nil {
		t.Fatal(err)
	}
	roles := map[string]string{}
	for _, m := range show.Members {
		roles[m.Key] = m.Role + "/" + m.Name
	}
	if show.Org != "acme" || show.Version != 2 || len(show.Members) != 2 || roles[keyA] != "admin/alice" || roles[keyB] != "member/bob" {
		t.Fatalf("roster show: %+v", show)
	}
	if out := ok("roster", "verify", v2); !strings.HasPrefix(out, "ok") {
		t.Fatalf("verify v2: %q", out)
	}
	ok("roster", "verify", v2, "--current", v1)

	// B is only a member: it may not edit a copy.
	bCopy := filepath.Join(homeB, "roster.cbor")
	data, _ := os.ReadFile(v2)
	os.WriteFile(bCopy, data, 0o644)
	fail(`this node (bob, `, "--home", homeB, "roster", "add", keyA, "--role", "admin", "--file", bCopy)
	fail(`is not an admin of roster org "acme" v2`, "--home", homeB, "roster", "add", keyA, "--role", "admin")

	// One flipped byte in the signed body.
	tampered := filepath.Join(tmp, "tampered.cbor")
	b := bytes.Clone(data)
	body := signedBody(t, b)
	body[bytes.Index(body, []byte("bob"))] ^= 0x20 // "bob" -> "Bob", in place in b
	os.WriteFile(tampered, b, 0o644)
	fail("bad signature", "roster", "verify", tampered)
	fail("bad signature", "roster", "verify", tampered, "--current", v1)

	// Rollback and replay.
	fail("rollback", "roster", "verify", v1, "--current", v2)
	fail("not newer", "roster", "verify", v2, "--current", v2)

	// Quorum 2: carol becomes the second admin, then the quorum is raised.
	ok("--home", homeC, "init", "--name", "carol")
	keyC := key(homeC)
	ok("--home", homeA, "roster", "add", keyC, "--role", "admin", "--name", "carol")
	ok("--home", homeA, "roster", "quorum", "2")
	v4 := snapshot("v4.cbor")
	out := ok("--home", homeA, "roster", "role", "bob", "operator")
	pending := filepath.Join(homeA, "roster-v5.cbor")
	if !strings.Contains(out, "1 of 2 required") || !strings.Contains(out, "needs 1 more") || !strings.Contains(out, "meshctl roster sign "+pending) {
		t.Fatalf("role under quorum 2:\n%s", out)
	}
	fail("too few signatures", "roster", "verify", pending, "--current", v4)
	fail("1 of 2 required admin signatures", "roster", "verify", pending, "--current", v4)

	before, _ := os.ReadFile(pending)
	out = ok("--home", homeC, "roster", "sign", pending)
	if !strings.Contains(out, "2 of 2 required") {
		t.Fatalf("sign:\n%s", out)
	}
	after, _ := os.ReadFile(pending)
	if len(after) <= len(before) || !bytes.Contains(after, signedBody(t, before)) {
		t.Fatal("roster sign changed the signed body")
	}
	if out := ok("roster", "verify", pending, "--current", v4); !strings.HasPrefix(out, "ok") {
		t.Fatalf("verify after sign: %q", out)
	}
	var vr struct {
		Valid  bool
		Reason string
	}
	json.Unmarshal([]byte(ok("roster", "verify", pending, "--current", v4, "--json")), &vr)
	if !vr.Valid {
		t.Fatalf("verify --json: %+v", vr)
	}
	r := exe("roster", "verify", v1, "--current", v4, "--json")
	json.Unmarshal([]byte(r.stdout), &vr)
	if r.code != 1 || vr.Valid || !strings.Contains(vr.Reason, "rollback") {
		t.Fatalf("verify --json of a rollback: exit %d %+v", r.code, vr)
	}

	// Usage errors exit 2.
	if r := exe("roster", "add"); r.code != 2 || !strings.Contains(r.stderr, "usage:") {
		t.Fatalf("usage error: exit %d %q", r.code, r.stderr)
	}
	if r := exe("roster", "verify", "-h"); r.code != 0 || !strings.Contains(r.stdout, "usage: meshctl roster verify") {
		t.Fatalf("-h: exit %d %q", r.code, r.stdout)
	}
}

// signedBody returns the body of a roster document, a subslice of doc: the
// document is {0: bstr body, ...} and the body's length head is 2 bytes
// (24..255 bytes) or 3 bytes (256..65535 bytes).
func signedBody(t *testing.T, doc []byte) []byte {
	t.Helper()
	if len(doc) < 5 || doc[0] != 0xa2 || doc[1] != 0x00 {
		t.Fatalf("not a signed document: %x", doc[:5])
	}
	switch doc[2] {
	case 0x58:
		return doc[4 : 4+int(doc[3])]
	case 0x59:
		return doc[5 : 5+(int(doc[3])<<8|int(doc[4]))]
	}
	t.Fatalf("unexpected body head %x", doc[2])
	return nil
}

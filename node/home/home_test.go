package home

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

func newHome(t *testing.T) Home {
	return Home{Dir: filepath.Join(t.TempDir(), "home")}
}

func TestResolve(t *testing.T) {
	t.Setenv(EnvHome, "")
	t.Setenv("HOME", "/home/u")
	if got := Resolve(""); got != "/home/u/.meshd" {
		t.Errorf("Resolve default = %q", got)
	}
	t.Setenv(EnvHome, "/env/home")
	if got := Resolve(""); got != "/env/home" {
		t.Errorf("Resolve env = %q", got)
	}
	if got := Resolve("/flag"); got != "/flag" {
		t.Errorf("Resolve flag = %q", got)
	}
	if got := Open("/flag").Dir; got != "/flag" {
		t.Errorf("Open = %q", got)
	}
}

func TestPaths(t *testing.T) {
	h := Home{Dir: "/h"}
	for got, want := range map[string]string{
		h.KeyPath(): "/h/identity.key", h.PubPath(): "/h/identity.pub", h.NamePath(): "/h/name",
		h.RosterPath(): "/h/roster.cbor", h.ConfigPath(): "/h/meshd.toml", h.LockPath(): "/h/meshd.lock",
		h.ControlSocket(): "/h/meshd.sock", h.LinkSocket(): "/h/link.sock", h.DBPath(): "/h/history.db",
		h.MailboxDir(): "/h/mailbox",
	} {
		if got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestInit(t *testing.T) {
	h := newHome(t)
	id, created, err := h.Init("alice")
	if err != nil {
		t.Fatal(err)
	}
	if !created || id.Name != "alice" || !id.Pub.Equal(proto.PubKeyOf(id.Key)) {
		t.Fatalf("Init = %+v, %v", id, created)
	}
	if m := mode(t, h.Dir); m != 0o700 {
		t.Errorf("home mode %04o", m)
	}
	if m := mode(t, h.KeyPath()); m != 0o600 {
		t.Errorf("key mode %04o", m)
	}
	keyFile, _ := os.ReadFile(h.KeyPath())
	block, _ := pem.Decode(keyFile)
	if block == nil || block.Type != PEMType || !bytes.Equal(block.Bytes, id.Key.Seed()) {
		t.Fatalf("key file %q", keyFile)
	}
	if pubFile, _ := os.ReadFile(h.PubPath()); string(pubFile) != id.Pub.String()+"\n" {
		t.Errorf("pub file %q", pubFile)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(h.Dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left %s", e.Name())
		}
	}

	// A second Init keeps the key; a new name replaces only the name.
	again, created, err := h.Init("")
	if err != nil || created || !again.Pub.Equal(id.Pub) || again.Name != "alice" {
		t.Fatalf("second Init = %+v, %v, %v", again, created, err)
	}
	renamed, created, err := h.Init("alicia")
	if err != nil || created || !renamed.Pub.Equal(id.Pub) || renamed.Name != "alicia" {
		t.Fatalf("rename = %+v, %v, %v", renamed, created, err)
	}
	if after, _ := os.ReadFile(h.KeyPath()); !bytes.Equal(after, keyFile) {
		t.Fatal("Init rewrote the key")
	}
	loaded, err := h.LoadIdentity()
	if err != nil || !loaded.Pub.Equal(id.Pub) || loaded.Name != "alicia" || !loaded.Key.Equal(id.Key) {
		t.Fatalf("LoadIdentity = %+v, %v", loaded, err)
	}

	if _, _, err := h.Init("bad\nname"); err == nil {
		t.Error("Init accepted a name with a newline")
	}
}

func TestInitConcurrent(t *testing.T) {
	h := newHome(t)
	const n = 8
	ids := make([]Identity, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i], created[i], errs[i] = h.Init("") })
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if created[i] {
			winners++
		}
		if !ids[i].Pub.Equal(ids[0].Pub) {
			t.Fatal("concurrent Inits disagree on the key")
		}
	}
	if winners != 1 {
		t.Fatalf("%d Inits report creating the key", winners)
	}
}

func TestLoadIdentityErrors(t *testing.T) {
	h := newHome(t)
	_, err := h.LoadIdentity()
	if !errors.Is(err, ErrNoIdentity) || !strings.Contains(err.Error(), "meshctl init") {
		t.Fatalf("LoadIdentity of empty home: %v", err)
	}

	if _, _, err := h.Init(""); err != nil {
		t.Fatal(err)
	}
	for _, perm := range []fs.FileMode{0o640, 0o604, 0o644, 0o660} {
		if err := os.Chmod(h.KeyPath(), perm); err != nil {
			t.Fatal(err)
		}
		_, err := h.LoadIdentity()
		if !errors.Is(err, ErrKeyPermissions) {
			t.Fatalf("mode %04o: %v", perm, err)
		}
		for _, s := range []string{h.KeyPath(), fmt.Sprintf("%04o", perm), "chmod 600"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q lacks %q", err, s)
			}
		}
		// Init refuses too, and does not replace the key.
		if _, _, err := h.Init(""); !errors.Is(err, ErrKeyPermissions) {
			t.Errorf("Init with mode %04o: %v", perm, err)
		}
	}
	if err := os.Chmod(h.KeyPath(), 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadIdentity(); err != nil {
		t.Fatalf("mode 0400: %v", err)
	}

	writeKey := func(data string) {
		t.Helper()
		if err := os.WriteFile(h.KeyPath(), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(h.KeyPath(), 0o600)
	}
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	good := string(pem.EncodeToMemory(&pem.Block{Type: PEMType, Bytes: seed}))
	for name, data := range map[string]string{
		"not pem":       "hello",
		"wrong type":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: seed})),
		"short seed":    string(pem.EncodeToMemory(&pem.Block{Type: PEMType, Bytes: seed[:31]})),
		"headers":       string(pem.EncodeToMemory(&pem.Block{Type: PEMType, Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: seed})),
		"trailing data": good + "junk",
		"huge":          strings.Repeat("x", 10<<10),
	} {
		writeKey(data)
		if _, err := h.LoadIdentity(); !errors.Is(err, ErrBadKeyFile) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A key that does not match identity.pub is refused.
	writeKey(good)
	if _, err := h.LoadIdentity(); !errors.Is(err, ErrBadKeyFile) || !strings.Contains(err.Error(), "identity.pub") {
		t.Errorf("mismatched identity.pub: %v", err)
	}
	os.Remove(h.PubPath())
	id, err := h.LoadIdentity()
	if err != nil || !id.Key.Equal(ed25519.NewKeyFromSeed(seed)) {
		t.Fatalf("LoadIdentity without identity.pub: %v", err)
	}
}

func TestLock(t *testing.T) {
	h := newHome(t)
	release, err := h.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, h.LockPath()); m != 0o600 {
		t.Errorf("lock file mode %04o", m)
	}
	// flock belongs to the open file description: a second open in the
	// same process conflicts, as another meshd would.
	_, err = h.Lock()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: %v", err)
	}
	want := fmt.Sprintf("home %s is in use by another meshd (pid %d)", h.Dir, os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	release2, err := h.Lock()
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	defer release2()
	if b, _ := os.ReadFile(h.LockPath()); string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Errorf("lock file holds %q", b)
	}
}

func TestRosterFile(t *testing.T) {
	h := newHome(t)
	_, err := h.LoadRoster()
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "roster init") {
		t.Fatalf("LoadRoster of empty home: %v", err)
	}
	id, _, err := h.Init("alice")
	if err != nil {
		t.Fatal(err)
	}
	r, err := roster.New("acme", id.Key, id.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SaveRoster(r); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, h.RosterPath()); m != 0o644 {
		t.Errorf("roster mode %04o", m)
	}
	got, err := h.LoadRoster()
	if err != nil {
		t.Fatal(err)
	}
	if got.Org != "acme" || got.Version != 1 || !got.IsAdmin(id.Pub) {
		t.Fatalf("LoadRoster = %+v", got)
	}

	// Replacing keeps the file whole.
	n := got.Next()
	if err := n.SetQuorum(1); err != nil {
		t.Fatal(err)
	}
	if err := n.Sign(id.Key); err != nil {
		t.Fatal(err)
	}
	if err := h.SaveRoster(n); err != nil {
		t.Fatal(err)
	}
	if got, err = h.LoadRoster(); err != nil || got.Version != 2 {
		t.Fatalf("after save: %v, %v", got, err)
	}

	// A corrupt file is an error naming the file, not "not exist".
	b, _ := os.ReadFile(h.RosterPath())
	b[len(b)-1] ^= 1
	os.WriteFile(h.RosterPath(), b, 0o644)
	_, err = h.LoadRoster()
	if err == nil || errors.Is(err, os.ErrNotExist) || !errors.Is(err, proto.ErrBadSignature) || !strings.Contains(err.Error(), h.RosterPath()) {
		t.Fatalf("corrupt roster: %v", err)
	}
	// An unsigned edit cannot be saved.
	n.Version++
	if err := h.SaveRoster(n); !errors.Is(err, roster.ErrUnsigned) {
		t.Fatalf("SaveRoster of unsigned edit: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFileAtomic(p, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" || mode(t, p) != 0o640 {
		t.Fatalf("%q %04o", b, mode(t, p))
	}
	if err := createAtomic(p, []byte("three"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("createAtomic over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatal("createAtomic replaced the file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left temporary files: %v", entries)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

package home

import (
	"errors"
	"os"
	"testing"

	"github.com/meshd/meshd/proto"
)

func TestAdoptNextKey(t *testing.T) {
	h := newHome(t)
	old, _, err := h.Init("n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadNextKey(); !errors.Is(err, ErrNoNextKey) {
		t.Fatalf("LoadNextKey with none = %v", err)
	}
	pub, created, err := h.MakeNextKey()
	if err != nil || !created || pub == old.Pub {
		t.Fatalf("MakeNextKey = %s, %v, %v", pub.Fingerprint(), created, err)
	}
	again, created, err := h.MakeNextKey()
	if err != nil || created || again != pub {
		t.Fatalf("MakeNextKey again = %s, %v, %v; want the same key", again.Fingerprint(), created, err)
	}
	if cur, err := h.LoadIdentity(); err != nil || cur.Pub != old.Pub {
		t.Fatalf("a pending key changed the identity: %v, %v", cur.Pub.Fingerprint(), err)
	}
	id, err := h.AdoptNextKey()
	if err != nil {
		t.Fatal(err)
	}
	if id.Pub != pub || id.Name != "n" {
		t.Fatalf("adopted identity %s %q, want %s n", id.Pub.Fingerprint(), id.Name, pub.Fingerprint())
	}
	if _, err := os.Stat(h.NextKeyPath()); !os.IsNotExist(err) {
		t.Fatalf("pending key still there: %v", err)
	}
	b, err := os.ReadFile(h.PrevKeyPath())
	if err != nil {
		t.Fatal(err)
	}
	prev, err := parseKeyFile(b)
	if err != nil || proto.PubKeyOf(prev) != old.Pub {
		t.Fatalf("previous key file holds %v, %v", prev, err)
	}
	if fi, err := os.Stat(h.PrevKeyPath()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("previous key file mode: %v, %v", fi, err)
	}
	// A restart loads the new key, identity.pub agreeing.
	if cur, err := h.LoadIdentity(); err != nil || cur.Pub != pub {
		t.Fatalf("LoadIdentity after adopt = %v, %v", cur.Pub.Fingerprint(), err)
	}
}

func TestLoadNextKeyRefusesBadFiles(t *testing.T) {
	h := newHome(t)
	if _, _, err := h.Init(""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.NextKeyPath(), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadNextKey(); !errors.Is(err, ErrBadKeyFile) {
		t.Fatalf("damaged pending key: %v", err)
	}
	if _, err := h.AdoptNextKey(); !errors.Is(err, ErrBadKeyFile) {
		t.Fatalf("adopting a damaged pending key: %v", err)
	}
	if err := os.Chmod(h.NextKeyPath(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.LoadNextKey(); !errors.Is(err, ErrKeyPermissions) {
		t.Fatalf("group-readable pending key: %v", err)
	}
}

package channel

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	r := testRoster(t)
	dir := filepath.Join(t.TempDir(), "policies") // Save creates it
	var s Set
	for _, g := range goldenVectors(t) {
		if g.p.Deleted() {
			continue // general's tombstone: the test edits general itself
		}
		mustApply(t, &s, r, g.p)
	}
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.All() {
		path := filepath.Join(dir, p.ID.String()+".cbor")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, mustEncode(t, p)) {
			t.Fatalf("%s does not hold the wire form", path)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v", path, fi.Mode())
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", fi.Mode())
	}

	var back Set
	if err := back.Load(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.All(), s.All()) {
		t.Fatalf("loaded %v, want %v", names(back.All()), names(s.All()))
	}

	// Saving again leaves unchanged files alone (no new inode).
	path := filepath.Join(dir, idGeneral.String()+".cbor")
	before, _ := os.Stat(path)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Fatal("unchanged policy rewritten")
	}

	// An update is rewritten, a dropped channel's file removed, crash
	// leftovers removed, and files that are not ours kept.
	mustApply(t, &s, r, signed(t, idGeneral, "general", 2, 10, nil))
	loser := signed(t, v7(100, 0), "late", 1, 100, nil)
	mustApply(t, &s, r, loser)
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, loser.ID.String()+".cbor")); err != nil {
		t.Fatal(err)
	}
	if o := mustApply(t, &s, r, signed(t, v7(1, 0), "late", 1, 1, nil)); o.Dropped == nil {
		t.Fatal("no drop")
	}
	leftover := filepath.Join(dir, ".tmp-"+idGeneral.String()+".cbor.123")
	foreign := filepath.Join(dir, "README")
	foreignTemp := filepath.Join(dir, ".tmp-subscriptions.json.123")
	for _, f := range []string{leftover, foreign, foreignTemp} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, loser.ID.String()+".cbor")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dropped channel's file kept: %v", err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file kept: %v", err)
	}
	for _, f := range []string{foreign, foreignTemp} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("foreign file removed: %v", err)
		}
	}
	back = Set{}
	if err := back.Load(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Digest(), s.Digest()) {
		t.Fatalf("loaded %v, want %v", names(back.All()), names(s.All()))
	}
}

func TestLoadErrors(t *testing.T) {
	var s Set
	if err := s.Load(filepath.Join(t.TempDir(), "missing")); err != nil || s.Len() != 0 {
		t.Fatalf("missing dir: %v", err)
	}

	dir := t.TempDir()
	good := signed(t, idGeneral, "general", 1, 0, nil)
	write := func(name string, b []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write(good.ID.String()+".cbor", mustEncode(t, good))
	corrupt := mustEncode(t, signed(t, idDeploys, "deploys", 1, 0, nil))
	corrupt[len(corrupt)-1] ^= 1
	badPath := write(idDeploys.String()+".cbor", corrupt)
	other := signed(t, v7(1, 0), "other", 1, 0, nil)
	misnamed := write(v7(2, 0).String()+".cbor", mustEncode(t, other))
	// Not policy file names: ignored.
	write("notes.txt", []byte("x"))
	write(strings.ToUpper(v7(3, 0).String())+".cbor", []byte("x"))
	// Authority is not checked on load: a policy signed by a member loads.
	write(v7(4, 0).String()+".cbor", mustEncode(t, signed(t, v7(4, 0), "bobs", 1, 0, nil, bob)))

	err := s.Load(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{badPath, misnamed} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("loaded %v", names(s.All()))
	}
	if _, ok := s.ByID(idGeneral); !ok {
		t.Fatal("good file not loaded")
	}
	if _, stale := s.Revalidate(testRoster(t)); len(stale) != 1 || stale[0].Name != "bobs" {
		t.Fatalf("stale %v", names(stale))
	}

	// Two files claiming one name: the lower id wins whatever the
	// directory order, and the error reports the loser.
	dir2 := t.TempDir()
	for _, p := range []*Policy{signed(t, v7(9, 0), "ops", 1, 0, nil), signed(t, v7(8, 0), "ops", 1, 0, nil)} {
		if err := os.WriteFile(filepath.Join(dir2, p.ID.String()+".cbor"), mustEncode(t, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var s2 Set
	err = s2.Load(dir2)
	wantErr(t, err, ErrNameTaken)
	if p, ok := s2.ByName("ops"); !ok || p.ID != v7(8, 0) || s2.Len() != 1 {
		t.Fatalf("loaded %v", names(s2.All()))
	}
}

func TestSaveErrors(t *testing.T) {
	var s Set
	mustApply(t, &s, testRoster(t), signed(t, idGeneral, "general", 1, 0, nil))
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(filepath.Join(file, "policies")); err == nil {
		t.Fatal("saved under a file")
	}
}

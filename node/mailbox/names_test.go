package mailbox

import (
	"path/filepath"
	"testing"
)

func TestTagOf(t *testing.T) {
	for name, want := range map[string]string{
		"101530-0123456789ab.txt":   "0123456789ab",
		"101530-0123456789ab-2.txt": "0123456789ab",
		"index.txt":                 "",
		"101530-0123.txt":           "",
		".tmp-123":                  "",
		"101530_0123456789ab.txt":   "",
	} {
		got, ok := TagOf(name)
		if got != want || ok != (want != "") {
			t.Errorf("TagOf(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestNamesRoundTrip: the name and folder the mirror writes a file under
// are what nameBase and InboxDir give, and TagOf reads the tag back.
func TestNamesRoundTrip(t *testing.T) {
	root := t.TempDir()
	m, err := Open(root, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	it := linkItem(t, 1)
	paths, err := m.Write(it)
	if err != nil || len(paths) != 1 {
		t.Fatalf("write: %v %v", paths, err)
	}
	id := it.Env.ID.String()
	if want := filepath.Join(InboxDir(root, it.Delivered), nameBase(it.Delivered, id)+".txt"); paths[0] != want {
		t.Fatalf("written as %s, want %s", paths[0], want)
	}
	if tag, ok := TagOf(filepath.Base(paths[0])); !ok || tag != Tag(id) || tag != id[len(id)-12:] {
		t.Fatalf("tag %q %v of %s, want %q", tag, ok, paths[0], Tag(id))
	}
	if !IsDay(filepath.Base(filepath.Dir(filepath.Dir(paths[0])))) || IsDay("inbox") {
		t.Fatal("IsDay")
	}
}

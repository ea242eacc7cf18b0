//go:build !windows

package mailbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPlaceAttachmentModes: an attachment placed in a shared mailbox is a
// read-only hard link (0440, the group's) to the blob, in folders the
// group may read and pass but not write (0750 and setgid), the day's
// included when the attachment comes first; owner only, 0400 and 0700. A
// later repair to the group keeps the file read-only.
func TestPlaceAttachmentModes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a        Access
		dir, doc fs.FileMode
	}{
		{"owner only", OwnerOnly, 0o700, 0o400},
		{"group", GroupAccess(os.Getgid()), 0o750 | fs.ModeSetgid, 0o440},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			blob := filepath.Join(tmp, "blob")
			if err := os.WriteFile(blob, []byte("content"), 0o400); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(tmp, "mailbox")
			day := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
			dir := AttachmentDir(root, day, "0193a1c2-7f4e-7cc1-9a4e-3b1f0c2d9e11")
			p, err := tc.a.PlaceAttachment(root, dir, "fix.patch", blob)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{filepath.Join(root, "2026-11-26"), filepath.Join(root, "2026-11-26", "attachments"), dir} {
				fi, err := os.Stat(d)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode()&(fs.ModePerm|fs.ModeSetgid) != tc.dir {
					t.Errorf("%s: mode %v, want %v", d, fi.Mode(), tc.dir)
				}
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.doc {
				t.Errorf("%s: mode %v, want %v", p, fi.Mode(), tc.doc)
			}
			bi, _ := os.Stat(blob)
			if !os.SameFile(fi, bi) {
				t.Error("the attachment is not a hard link to the blob")
			}
			// Placing it again changes nothing and fails nothing.
			if _, err := tc.a.PlaceAttachment(root, dir, "fix.patch", blob); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.a.PlaceAttachment(root, filepath.Join(tmp, "elsewhere"), "x", blob); err == nil {
				t.Error("a folder outside the mailbox was taken")
			}
			// A repair to the group keeps the file read-only.
			if _, err := GroupAccess(os.Getgid()).repairTree(root, nil); err != nil {
				t.Fatal(err)
			}
			fi, _ = os.Stat(p)
			if fi.Mode().Perm() != 0o440 || int(fi.Sys().(*syscall.Stat_t).Gid) != os.Getgid() {
				t.Errorf("after a repair to the group: mode %v, want 0440", fi.Mode())
			}
		})
	}
}

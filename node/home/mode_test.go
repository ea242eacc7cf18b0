//go:build !windows

package home

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSecure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		home      os.FileMode // 0: missing
		mailbox   os.FileMode // 0: missing
		share     bool
		wantHome  os.FileMode
		wantMbox  os.FileMode
		repaired  int
		refuse    string // in the error, when refused
		refuseFix string
	}{
		{name: "missing", wantHome: 0o700},
		{name: "owner only", home: 0o700, mailbox: 0o700, wantHome: 0o700, wantMbox: 0o700},
		{name: "readable home repaired", home: 0o755, wantHome: 0o700, repaired: 1},
		{name: "old mailbox repaired", home: 0o700, mailbox: 0o755, wantHome: 0o700, wantMbox: 0o700, repaired: 1},
		{name: "group-writable home refused", home: 0o775, refuse: "mode 0775", refuseFix: "chmod 700 "},
		{name: "world-writable mailbox refused", home: 0o700, mailbox: 0o777, refuse: "mode 0777", refuseFix: "chmod 700 "},
		{name: "shared", home: 0o700, mailbox: 0o700, share: true, wantHome: 0o710, wantMbox: 0o750 | os.ModeSetgid, repaired: 2},
		{name: "shared back to owner only", home: 0o710, mailbox: 0o750, wantHome: 0o700, wantMbox: 0o700, repaired: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := syscall.Umask(0)
			defer syscall.Umask(old)
			h := Home{Dir: filepath.Join(t.TempDir(), "home")}
			if tc.home != 0 {
				if err := os.Mkdir(h.Dir, tc.home); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mailbox != 0 {
				if err := os.Mkdir(h.MailboxDir(), tc.mailbox); err != nil {
					t.Fatal(err)
				}
			}
			repaired, err := h.Secure(Sharing{GroupID: os.Getgid(), GroupSet: tc.share})
			if tc.refuse != "" {
				if !errors.Is(err, ErrUnsafeMode) || !strings.Contains(err.Error(), tc.refuse) || !strings.Contains(err.Error(), tc.refuseFix) {
					t.Fatalf("err %v, want ErrUnsafeMode naming %q and %q", err, tc.refuse, tc.refuseFix)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(repaired) != tc.repaired {
				t.Errorf("repaired %q, want %d", repaired, tc.repaired)
			}
			if fi, err := os.Stat(h.Dir); err != nil || fi.Mode().Perm()|fi.Mode()&os.ModeSetgid != tc.wantHome {
				t.Errorf("home mode %v, %v; want %v", fi.Mode(), err, tc.wantHome)
			}
			if tc.wantMbox != 0 {
				if fi, err := os.Stat(h.MailboxDir()); err != nil || fi.Mode().Perm()|fi.Mode()&os.ModeSetgid != tc.wantMbox {
					t.Errorf("mailbox mode %v, %v; want %v", fi.Mode(), err, tc.wantMbox)
				}
			}
			// A second check finds nothing to do.
			if again, err := h.Secure(Sharing{GroupID: os.Getgid(), GroupSet: tc.share}); err != nil || len(again) != 0 {
				t.Errorf("second Secure: %q, %v", again, err)
			}
		})
	}
}

// A home owned by another user is refused (root only: it chowns).
func TestSecureOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := os.Mkdir(h.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(h.Dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := h.Secure(Sharing{})
	if !errors.Is(err, ErrUnsafeMode) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("err %v, want ErrUnsafeMode naming the owner", err)
	}
}

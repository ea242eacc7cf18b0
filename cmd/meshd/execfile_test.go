package main

import (
	"os"
	"os/exec"
	"testing"
)

// installExec copies the file src to dst, executable by every user. The
// copy is written by cp, never by this process: a child that another
// parallel test forks while this process holds dst open for writing
// inherits that descriptor until it execs, and an exec of dst meanwhile
// fails with ETXTBSY ("text file busy"; setpriv then exits 126).
func installExec(t testing.TB, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v\n%s", src, dst, err, out)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
}

// writeExec writes an executable file (a script) at dst, as installExec
// does: the bytes go to a file beside it that is never run, which cp
// copies.
func writeExec(t testing.TB, dst string, data []byte) {
	t.Helper()
	tmp := dst + ".src"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	installExec(t, tmp, dst)
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
}

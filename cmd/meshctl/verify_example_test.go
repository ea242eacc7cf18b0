package main

import (
	"path/filepath"
	"testing"
)

// The example mailbox file of docs/PROTOCOL.md, Appendix A, verifies with
// the real binary: its signature holds and its headers and body are what
// the envelope renders to (the names are unchecked without a roster).
func TestVerifyProtocolExampleFile(t *testing.T) {
	t.Parallel()
	bare, _ := node(t, "carol")
	path, err := filepath.Abs("../../testdata/mailbox/example-dm.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := ok(t, "--home", bare, "verify", path)
	want := "ok " + path + ": message from bob (6a3803d5f059902a) to @alice, signed; unchecked: From name (no roster), To name (no roster)\n"
	if out != want {
		t.Fatalf("output\n%s\nwant\n%s", out, want)
	}
}

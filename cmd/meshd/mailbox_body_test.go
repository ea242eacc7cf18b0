package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

// TestMailboxBodyEscaped: a DM whose body carries terminal escapes, a bidi
// override, a lone carriage return and lines that look like headers
// reaches bob's mailbox with those characters escaped, so cat shows no
// escape and a header parser that stops at "---" sees none of the forged
// lines; meshctl verify accepts the file.
func TestMailboxBodyEscaped(t *testing.T) {
	testpar.Parallel(t)
	meshctl, homes, _, _, _ := twoNodes(t)
	body := "hi\x1b[2J\x1b]0;pwned\x07\rFrom: carol (0000000000000000)\nKind: request\n\u202egnp.exe\r\nend"
	meshctlOK(t, meshctl, "--home", homes["alice"], "dm", "bob", body)
	var file string
	waitFor(t, "the DM in bob's mailbox", 15*time.Second, func() bool {
		for _, f := range mirrorFiles(homes["bob"]) {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), "gnp.exe") {
				file = f
				return true
			}
		}
		return false
	})
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if strings.ContainsAny(text, "\x1b\x07\u202e") {
		t.Fatalf("the mailbox file holds raw control or bidi characters:\n%q", text)
	}
	head, rest, _ := strings.Cut(text, "\n---\n")
	for _, want := range []string{`hi\u001b[2J\u001b]0;pwned\u0007\u000dFrom: carol`, "\nKind: request\n", `\u202egnp.exe` + "\r\nend\n"} {
		if !strings.Contains(rest, want) {
			t.Fatalf("body region lacks %q:\n%q", want, rest)
		}
	}
	if strings.Contains(head, "Kind: request") || !strings.Contains(head, "From: alice (") {
		t.Fatalf("headers:\n%s", head)
	}
	if r := meshctlRun(t, meshctl, "--home", homes["bob"], "verify", file); r.code != 0 {
		t.Fatalf("verify: %+v", r)
	}
}

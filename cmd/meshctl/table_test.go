package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestTableMatchesTabwriter: on ASCII the column writer lays out exactly
// as text/tabwriter did, column blocks included.
func TestTableMatchesTabwriter(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"NAME\tROLE\tKEY\nalice\tadmin\tabc\nbob\tmember\tdefghij\n",
		"node\tx (y)\nkey\tz\n\ncounters:\n  a.b\t1\n  long.counter.name\t22\n",
		"a\tb\tc\nlonger\tb\nx\tyy\tzzz\tw\nno tabs here\nq\tr",
		"",
	} {
		var want, got bytes.Buffer
		tw := tabwriter.NewWriter(&want, 0, 8, 2, ' ', 0)
		tw.Write([]byte(in))
		tw.Flush()
		cw := table(&got)
		cw.Write([]byte(in))
		if err := cw.Flush(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("input %q:\ngot\n%s\nwant\n%s", in, got.String(), want.String())
		}
	}
}

// TestTableWideCharacters: cells with emoji, CJK and combining marks keep
// the next column aligned on screen.
func TestTableWideCharacters(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	tw := table(&b)
	for _, row := range [][2]string{{"NAME", "ROLE"}, {"alice", "admin"}, {"测试机", "member"}, {"build 🚀", "operator"}, {"café", "observer"}, {"👩‍💻 dev", "member"}} {
		tw.Write([]byte(row[0] + "\t" + row[1] + "\n"))
	}
	tw.Flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	col := -1
	for _, l := range lines {
		// The display column where the second cell starts.
		i := strings.LastIndex(l, "  ")
		c := displayWidth(l[:i+2])
		if col == -1 {
			col = c
		}
		if c != col {
			t.Errorf("line %q: second column at %d, want %d\n%s", l, c, col, b.String())
		}
	}
	if displayWidth("测试机") != 6 || displayWidth("🚀") != 2 || displayWidth("e\u0301") != 1 || displayWidth("👩‍💻") != 2 {
		t.Errorf("widths: %d %d %d %d", displayWidth("测试机"), displayWidth("🚀"), displayWidth("e\u0301"), displayWidth("👩‍💻"))
	}
}

func TestNameText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"alice":           "alice",
		"测试机":             "测试机",
		"build 🚀":         "build 🚀",
		"alice\u200b":     `alice\u200b`,
		"\u202eecila":     `\u202eecila`,
		"a\u00adb\ufe0fc": `a\u00adb\ufe0fc`,
		"\u3164x":         `\u3164x`,
		"bad\xffutf8\x1b": `bad\xffutf8\x1b`,
		"car\u043el":      "car\u043el", // a look-alike is not hidden, only not unique
	} {
		if got := nameText(in); got != want {
			t.Errorf("nameText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := claimedText("car\u043el"); got != `"car\u043el"` {
		t.Errorf("claimedText = %s", got)
	}
}

package mailbox

import (
	"strings"
	"testing"
)

func TestBodyText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nline two":       "plain\ttext\nline two",
		"crlf\r\nkept\r\n":            "crlf\r\nkept\r\n",
		"lone\rcr":                    `lone\u000dcr`,
		"\x1b[2Jclear\x07":            `\u001b[2Jclear\u0007`,
		"\u202eexe.txt \u2066x\u2069": `\u202eexe.txt \u2066x\u2069`,
		"sep\u2028arator\u0085":       `sep\u2028arator\u0085`,
		"zero\u200bwidth stays":       "zero\u200bwidth stays",
		`a literal \u001b stays`:      `a literal \u001b stays`,
	} {
		if got := bodyText(in); got != want {
			t.Errorf("bodyText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlainTextAgreesWithBodyEscaped: the byte loop that lets plain ASCII
// through unchanged says plain for exactly the ASCII strings in which
// bodyEscaped finds nothing, byte by byte and for whole strings.
func TestPlainTextAgreesWithBodyEscaped(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		s := "ab" + string(rune(c)) + "cd"
		if plainText(s) == strings.ContainsFunc(s, bodyEscaped) {
			t.Errorf("byte %#x: plainText %v, bodyEscaped finds %v", c, plainText(s), strings.ContainsFunc(s, bodyEscaped))
		}
	}
	for _, s := range []string{"", "plain\ttext\nlines", "é", "\u202e", "a\r\nb", "\x1b[31m"} {
		if plainText(s) && strings.ContainsFunc(s, bodyEscaped) {
			t.Errorf("%q: plain, but bodyEscaped finds a character to escape", s)
		}
		if want := !strings.ContainsFunc(s, bodyEscaped); want && bodyText(s) != s {
			t.Errorf("%q: changed to %q", s, bodyText(s))
		}
	}
}

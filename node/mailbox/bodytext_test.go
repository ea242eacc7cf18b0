package mailbox

import "testing"

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

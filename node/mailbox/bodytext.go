package mailbox

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// bodyText is a message body as the file shows it: every control
// character but tab and line feed (and a carriage return right before a
// line feed), U+2028, U+2029 and every bidi control becomes \uXXXX, so
// that cat, less or an agent reading the file sees no terminal escapes,
// no overwritten lines and no reordered text. The envelope in the armor
// block keeps the exact text.
func bodyText(s string) string {
	if plainText(s) || !strings.ContainsFunc(s, bodyEscaped) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, r := range s {
		if bodyEscaped(r) && (r != '\r' || !strings.HasPrefix(s[i+1:], "\n")) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// plainText reports whether s is ASCII that bodyText leaves as it is:
// no control character but tab and line feed. A byte loop, for the common
// body: the rune-by-rune check through the unicode tables took most of
// the time of rendering a mailbox file.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || c == 0x7f || (c < 0x20 && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

// bodyEscaped reports whether bodyText may escape r.
func bodyEscaped(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r), r == '\u2028', r == '\u2029', unicode.Is(unicode.Bidi_Control, r):
		return true
	}
	return false
}

package roster

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/secure/precis"
	"golang.org/x/text/unicode/norm"

	"github.com/meshd/meshd/proto"
)

// Names that enter a roster (roster add and rename, an invite's name, the
// name a joiner or a pending node claims) pass [CheckName]: no format,
// zero-width, bidi or other invisible characters, and a valid PRECIS
// nickname (RFC 8266). They must also be unique under [Skeleton], so that
// "carоl" (Cyrillic о) or "alice" with a zero-width space cannot pose as
// another member. A roster that parses may still hold names older tools
// let in: [Parse] only applies [CheckStoredName], and displays use
// [Roster.NameUnique] to decide when a name needs its fingerprint beside it.

// CheckName checks a display name a person or a node proposes: the rules
// of [CheckStoredName], and none of the characters that hide or reorder
// text (Unicode format characters such as zero-width spaces and joiners,
// bidi controls, variation selectors and other default-ignorable code
// points), and a valid nickname under PRECIS (RFC 8266). The empty name
// is valid: no name.
func CheckName(name string) error {
	if err := CheckStoredName(name); err != nil {
		return err
	}
	for _, c := range name {
		if what := invisible(c); what != "" {
			return fmt.Errorf("name %s contains %U, %s", quoteName(name), c, what)
		}
	}
	if name == "" {
		return nil
	}
	if _, err := precis.Nickname.String(name); err != nil {
		return fmt.Errorf("name %s is not a valid nickname (RFC 8266): %w", quoteName(name), err)
	}
	return nil
}

// CheckStoredName checks a name already in a signed roster or a node's
// name file: at most [MaxNameLen] bytes of UTF-8 without control
// characters (names appear in mailbox headers, where a newline would
// forge a header).
func CheckStoredName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("name of %d bytes exceeds %d", len(name), MaxNameLen)
	}
	return checkText("name", name)
}

// invisible says what c is when it hides or reorders text, or "".
func invisible(c rune) string {
	switch {
	case unicode.Is(unicode.Bidi_Control, c):
		return "a bidi control"
	case unicode.Is(unicode.Join_Control, c), c == '\u200b', c == '\u2060', c == '\ufeff':
		return "a zero-width character"
	case unicode.Is(unicode.Cf, c):
		return "a format character"
	case unicode.Is(unicode.Variation_Selector, c), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, c):
		return "an invisible character"
	case unicode.In(c, unicode.Zl, unicode.Zp):
		return "a line or paragraph separator"
	}
	return ""
}

// quoteName quotes a name with every non-ASCII character escaped, so an
// error message shows what the name really holds.
func quoteName(s string) string { return fmt.Sprintf("%+q", s) }

var folder = cases.Fold()

// Skeleton returns the forms under which two names look alike: two names
// are confusable when either form is equal. Both follow Unicode TR39's
// skeleton: compatibility decomposition (NFKD), each character mapped to
// its prototype, "rn" read as "m", composed (NFC); invisible characters
// are dropped and runs of spaces become one. The first form maps before
// case folding (capital I reads as l, as in TR39), the second folds case
// first (ALICE reads as alice). The prototype table covers the
// homoglyphs of Latin, Cyrillic and Greek and the digits 0 and 1 (see
// confusables); look-alikes from other scripts are not folded together.
func Skeleton(name string) [2]string {
	d := norm.NFKD.String(name)
	return [2]string{
		skeleton(folder.String(strings.Map(prototype, d))),
		skeleton(strings.Map(prototype, folder.String(d))),
	}
}

func skeleton(s string) string {
	s = strings.Map(prototype, s)
	s = strings.ReplaceAll(s, "rn", "m")
	s = strings.Join(strings.Fields(s), " ")
	return norm.NFC.String(s)
}

// Confusable reports whether names a and b look alike (see [Skeleton]).
func Confusable(a, b string) bool {
	x, y := Skeleton(a), Skeleton(b)
	return x[0] == y[0] || x[1] == y[1]
}

// prototype maps c to the character it is confused with, and drops
// invisible characters.
func prototype(c rune) rune {
	if invisible(c) != "" || unicode.IsControl(c) {
		return -1
	}
	if p, ok := confusables[c]; ok {
		return p
	}
	return c
}

// NameTaken returns the member other than self whose name looks like
// name (the same [Skeleton]), if any.
func (r *Roster) NameTaken(name string, self proto.PubKey) (Member, bool) {
	if name == "" {
		return Member{}, false
	}
	sk := Skeleton(name)
	for _, o := range r.Members {
		if o.Name == "" || o.Key.Equal(self) {
			continue
		}
		if osk := Skeleton(o.Name); osk[0] == sk[0] || osk[1] == sk[1] {
			return o, true
		}
	}
	return Member{}, false
}

// NameIndex counts the members under each name skeleton, so displays can
// tell a unique name from one that another member's name resembles.
type NameIndex [2]map[string]int

// Names indexes the members' names by [Skeleton].
func (r *Roster) Names() NameIndex {
	ix := NameIndex{make(map[string]int, len(r.Members)), make(map[string]int, len(r.Members))}
	for _, m := range r.Members {
		if m.Name != "" {
			sk := Skeleton(m.Name)
			ix[0][sk[0]]++
			ix[1][sk[1]]++
		}
	}
	return ix
}

// Unique reports whether name is a valid name that no other member's
// name resembles: one a display may show without a fingerprint.
func (ix NameIndex) Unique(name string) bool {
	if name == "" || CheckName(name) != nil {
		return false
	}
	sk := Skeleton(name)
	return ix[0][sk[0]] == 1 && ix[1][sk[1]] == 1
}

package roster

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

func TestCheckNameRefusesInvisible(t *testing.T) {
	for _, name := range []string{
		"alice\u200b", // zero-width space
		"al\u200dice", // zero-width joiner
		"\u202eecila", // right-to-left override
		"alice\u2066", // left-to-right isolate
		"a\u00adlice", // soft hyphen (format)
		"alice\ufeff", // byte order mark
		"alice\ufe0f", // variation selector
		"\u3164alice", // Hangul filler
		"alice\u2028", // line separator
		"alice\n",     // control
		strings.Repeat("a", MaxNameLen+1),
	} {
		if err := CheckName(name); err == nil {
			t.Errorf("CheckName(%+q) accepted it", name)
		}
		if strings.ContainsAny(name, "\n") || len(name) > MaxNameLen {
			continue
		}
		if err := CheckStoredName(name); err != nil {
			t.Errorf("CheckStoredName(%+q) = %v: a signed roster holding it must still parse", name, err)
		}
	}
	for _, name := range []string{"", "alice", "bob's laptop", "测试机", "build 🚀", "Zoë", "ci-runner-2", "Ωmega"} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}

func TestSkeletonConfusables(t *testing.T) {
	same := [][2]string{
		{"carol", "car\u043el"},     // Cyrillic о
		{"alice", "\u0430lice"},     // Cyrillic а
		{"alice", "alice\u200b"},    // zero-width space
		{"alice", "ALICE"},          // case
		{"alice", "\uff41lice"},     // fullwidth a
		{"alice", "a1ice"},          // 1 for l
		{"alice", "aIice"},          // capital I for l
		{"bob", "b\u03bfb"},         // Greek ο
		{"bob", "b0b"},              // zero for o
		{"tom", "t\u043em"},         // Cyrillic о
		{"modern", "rnodern"},       // rn for m
		{"paypal", "\u0440aypal"},   // Cyrillic р
		{"ci runner", "ci  runner"}, // double space
		{"ci runner", " ci runner"}, // leading space
		{"zoë", "zoe\u0308"},        // decomposed
	}
	for _, p := range same {
		if !Confusable(p[0], p[1]) {
			t.Errorf("Skeleton(%+q) = %+q, Skeleton(%+q) = %+q: want equal", p[0], Skeleton(p[0]), p[1], Skeleton(p[1]))
		}
	}
	for _, p := range [][2]string{{"alice", "alicia"}, {"bob", "bobby"}, {"ci-1", "ci-2"}, {"zoe", "zoë"}} {
		if Confusable(p[0], p[1]) {
			t.Errorf("Skeleton(%q) == Skeleton(%q): want different", p[0], p[1])
		}
	}
}

// TestAddRefusesLookalike: a name that looks like a member's is refused
// on add and rename; the NameIndex flags both of two lookalike names in
// a roster older tools made.
func TestAddRefusesLookalike(t *testing.T) {
	r, err := New("acme", alice, "alice")
	if err != nil {
		t.Fatal(err)
	}
	c := Member{Key: pub(carol), Role: RoleMember, Name: "carol"}
	if err := r.Add(c); err != nil {
		t.Fatal(err)
	}
	fake := Member{Key: pub(dave), Role: RoleMember, Name: "car\u043el"}
	if err := r.Add(fake); !errors.Is(err, ErrDuplicateName) || !strings.Contains(err.Error(), `"car\u043el" looks like "carol"`) {
		t.Fatalf("add a lookalike: %v", err)
	}
	fake.Name = "x"
	if err := r.Add(fake); err != nil {
		t.Fatal(err)
	}
	if err := r.SetName(fake.Key, "CAROL"); !errors.Is(err, ErrDuplicateName) {
		t.Fatalf("rename to a lookalike: %v", err)
	}
	if err := r.SetName(fake.Key, "carol\u200b"); err == nil || !strings.Contains(err.Error(), "zero-width") {
		t.Fatalf("rename with a zero-width space: %v", err)
	}
	if !r.Names().Unique("carol") {
		t.Fatal("carol is unique")
	}
	// A roster older tools made: both names stand, and neither is unique.
	r.Members[r.indexOf(t, fake.Key)].Name = "car\u043el"
	ix := r.Names()
	if ix.Unique("carol") || ix.Unique("car\u043el") {
		t.Fatal("lookalike names reported unique")
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("a roster holding lookalike names must still validate: %v", err)
	}
}

func (r *Roster) indexOf(t *testing.T, k proto.PubKey) int {
	t.Helper()
	for i, m := range r.Members {
		if m.Key.Equal(k) {
			return i
		}
	}
	t.Fatal("no such member")
	return -1
}

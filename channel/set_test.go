package channel

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// v7 returns a UUIDv7 created ms milliseconds after t0, with rnd as its
// random bits, so ids order by (ms, rnd).
func v7(ms int64, rnd uint16) uuid.UUID {
	s := fmt.Sprintf("%012x", t0+ms)
	return uuid.MustParse(fmt.Sprintf("%s-%s-7000-8000-%012x", s[:8], s[8:], rnd))
}

// signed returns a signed policy of channel id named name at version v
// with timestamp t0+ms, edited by edit if not nil.
func signed(t testing.TB, id uuid.UUID, name string, v uint64, ms int64, edit func(*Policy), keys ...ed25519.PrivateKey) *Policy {
	t.Helper()
	p := testPolicy(id, name)
	p.Version, p.Timestamp = v, t0+ms
	if edit != nil {
		edit(p)
	}
	if len(keys) == 0 {
		keys = []ed25519.PrivateKey{alice}
	}
	return mustSign(t, p, keys...)
}

func names(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = fmt.Sprintf("%s=%s@v%d", p.Name, p.ID, p.Version)
	}
	return out
}

func TestSetApply(t *testing.T) {
	r := testRoster(t)
	var s Set // the zero value is ready
	v1 := signed(t, idGeneral, "general", 1, 0, nil)
	if changed, err := s.Apply(r, v1); !changed || err != nil {
		t.Fatalf("new channel: %v %v", changed, err)
	}
	if changed, err := s.Apply(r, v1); changed || err != nil {
		t.Fatalf("same version again: %v %v", changed, err)
	}
	v2 := signed(t, idGeneral, "general", 2, 1000, func(p *Policy) { p.AllowHistory = true }, carol)
	o, err := s.Merge(r, v2)
	if err != nil || !o.Changed || o.Replaced == nil || o.Replaced.Version != 1 || o.Dropped != nil {
		t.Fatalf("update: %+v %v", o, err)
	}
	if _, err := s.Apply(r, v1); !errors.Is(err, ErrRollback) {
		t.Fatalf("older version: %v", err)
	}
	// The set holds its own copy.
	v2.Name = "mutated"
	if p, ok := s.ByID(idGeneral); !ok || p.Name != "general" || p.Version != 2 {
		t.Fatalf("ByID: %v %v", p, ok)
	}
	// A policy signed by a member is refused and not held.
	rogue := signed(t, idDeploys, "deploys", 1, 0, nil, bob)
	if _, err := s.Apply(r, rogue); !errors.Is(err, ErrNotAdmin) {
		t.Fatalf("signed by a member: %v", err)
	}
	if _, ok := s.ByID(idDeploys); ok {
		t.Fatal("rogue policy held")
	}
	mustApply(t, &s, r, signed(t, idDeploys, "deploys", 1, 0, nil))

	for _, q := range []string{"general", "#general", "#General", idGeneral.String()} {
		p, err := s.Lookup(q)
		if err != nil || p.ID != idGeneral {
			t.Errorf("Lookup(%q) = %v, %v", q, p, err)
		}
	}
	for _, q := range []string{"nope", "", "#", uuid.NewString()} {
		if _, err := s.Lookup(q); !errors.Is(err, ErrUnknownChannel) {
			t.Errorf("Lookup(%q): %v", q, err)
		}
	}
	if p, ok := s.ByName("DEPLOYS"); !ok || p.ID != idDeploys {
		t.Fatalf("ByName: %v %v", p, ok)
	}
	if got := names(s.All()); len(got) != 2 || !strings.HasPrefix(got[0], "deploys=") || !strings.HasPrefix(got[1], "general=") {
		t.Fatalf("All not sorted by name: %v", got)
	}
	if s.Len() != 2 {
		t.Fatalf("Len %d", s.Len())
	}
}

func mustApply(t testing.TB, s *Set, r *roster.Roster, p *Policy) Outcome {
	t.Helper()
	o, err := s.Merge(r, p)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestSetNames(t *testing.T) {
	r := testRoster(t)
	first, second := v7(0, 1), v7(5, 0) // first was created 5 ms earlier

	t.Run("taken", func(t *testing.T) {
		var s Set
		mustApply(t, &s, r, signed(t, first, "ops", 1, 0, nil))
		_, err := s.Apply(r, signed(t, second, "ops", 1, 5, nil, carol))
		wantErr(t, err, ErrNameTaken)
		if !strings.Contains(err.Error(), first.String()) {
			t.Fatalf("error %q does not name the holder", err)
		}
		if _, ok := s.ByID(second); ok || s.Len() != 1 {
			t.Fatal("the loser is held")
		}
	})

	t.Run("concurrent create", func(t *testing.T) {
		a := signed(t, first, "ops", 1, 0, nil)
		b := signed(t, second, "ops", 1, 5, nil, carol)
		// The later-created one arrives first at this node: the earlier
		// one displaces it, and the outcome reports it.
		var s1 Set
		mustApply(t, &s1, r, b)
		o := mustApply(t, &s1, r, a)
		if o.Dropped == nil || o.Dropped.ID != second || !o.Changed {
			t.Fatalf("outcome %+v", o)
		}
		// In the other order the later one is refused.
		var s2 Set
		mustApply(t, &s2, r, a)
		if _, err := s2.Apply(r, b); !errors.Is(err, ErrNameTaken) {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s1.Digest(), s2.Digest()) {
			t.Fatalf("orders disagree: %v vs %v", names(s1.All()), names(s2.All()))
		}
		// The version timestamp does not matter, only the id: an edit of
		// the later channel with an early timestamp still loses.
		b2 := signed(t, second, "ops", 2, -1000, nil)
		if _, err := s2.Apply(r, b2); !errors.Is(err, ErrNameTaken) {
			t.Fatal(err)
		}
	})

	t.Run("rename onto a taken name", func(t *testing.T) {
		var s Set
		mustApply(t, &s, r, signed(t, first, "ops", 1, 0, nil))
		mustApply(t, &s, r, signed(t, second, "x", 1, 5, nil))
		_, err := s.Apply(r, signed(t, second, "ops", 2, 10, nil))
		wantErr(t, err, ErrNameTaken)
		if p, _ := s.ByID(second); p.Version != 1 || p.Name != "x" {
			t.Fatalf("refused rename changed the channel: %v", p)
		}
		// A rename frees the old name.
		mustApply(t, &s, r, signed(t, second, "y", 2, 10, nil))
		if _, ok := s.ByName("x"); ok {
			t.Fatal("old name still held")
		}
		mustApply(t, &s, r, signed(t, v7(20, 0), "x", 1, 20, nil))
		if p, ok := s.ByName("y"); !ok || p.ID != second {
			t.Fatal("renamed channel not found by its new name")
		}
	})

	t.Run("older channel renamed onto a newer one's name", func(t *testing.T) {
		var s Set
		mustApply(t, &s, r, signed(t, first, "x", 1, 0, nil))
		mustApply(t, &s, r, signed(t, second, "ops", 1, 5, nil))
		o := mustApply(t, &s, r, signed(t, first, "ops", 2, 10, nil))
		if o.Dropped == nil || o.Dropped.ID != second || o.Replaced == nil || o.Replaced.Name != "x" {
			t.Fatalf("outcome %+v", o)
		}
		if p, ok := s.ByName("ops"); !ok || p.ID != first {
			t.Fatal("name not moved")
		}
		if _, ok := s.ByName("x"); ok || s.Len() != 1 {
			t.Fatalf("set %v", names(s.All()))
		}
	})

	t.Run("same channel keeps its name across versions", func(t *testing.T) {
		var s Set
		mustApply(t, &s, r, signed(t, second, "ops", 1, 0, nil))
		mustApply(t, &s, r, signed(t, second, "ops", 2, 10, nil))
		if p, ok := s.ByName("ops"); !ok || p.Version != 2 {
			t.Fatal("update of the name holder")
		}
	})
}

func TestSetConcurrentEdits(t *testing.T) {
	r := testRoster(t)
	base := signed(t, idGeneral, "general", 1, 0, nil)
	early := signed(t, idGeneral, "general", 2, 100, func(p *Policy) { p.AllowHistory = true }, alice)
	late := signed(t, idGeneral, "general", 2, 200, func(p *Policy) { p.RetentionHours = 1 }, carol)
	tieA := signed(t, idGeneral, "general", 3, 300, func(p *Policy) { p.RetentionHours = 2 })
	tieB := signed(t, idGeneral, "general", 3, 300, func(p *Policy) { p.RetentionHours = 3 })
	for _, order := range [][]*Policy{{base, early, late}, {base, late, early}, {late, base, early}} {
		var s Set
		for _, p := range order {
			s.Apply(r, p)
		}
		if p, _ := s.ByID(idGeneral); p.RetentionHours != 1 {
			t.Fatalf("the later edit of v2 must win, got %+v", p)
		}
		_, err := s.Apply(r, early)
		wantErr(t, err, ErrRollback)
	}
	var s1, s2 Set
	mustApply(t, &s1, r, tieA)
	s1.Apply(r, tieB)
	mustApply(t, &s2, r, tieB)
	s2.Apply(r, tieA)
	p1, _ := s1.ByID(idGeneral)
	p2, _ := s2.ByID(idGeneral)
	if p1.RetentionHours != p2.RetentionHours {
		t.Fatalf("equal timestamps: orders disagree: %d vs %d", p1.RetentionHours, p2.RetentionHours)
	}
}

// TestSetConverges applies one bag of documents in many orders, each
// twice over (the second round stands in for the digest exchange that
// re-sends what a node lacks), and checks every node ends up the same.
func TestSetConverges(t *testing.T) {
	r := testRoster(t)
	a, b, c, x, y := v7(0, 1), v7(0, 2), v7(7, 0), v7(3, 0), v7(8, 0)
	bag := []*Policy{
		signed(t, c, "ops", 1, 7, nil),
		signed(t, b, "ops", 1, 0, nil, carol),
		signed(t, a, "ops", 1, 0, nil),
		signed(t, a, "ops", 2, 50, func(p *Policy) { p.AllowHistory = true }),
		signed(t, c, "ops2", 2, 60, nil),
		signed(t, x, "x", 1, 3, nil),
		signed(t, x, "x", 2, 40, func(p *Policy) { p.RetentionHours = 5 }),
		signed(t, x, "ops", 3, 45, nil),              // rename onto a's name: loses
		signed(t, b, "ops", 2, 55, nil),              // still loses to a
		signed(t, b, "b", 3, 65, nil),                // renamed away: wins its own name
		signed(t, x, "x", 3, 46, func(p *Policy) {}), // a concurrent edit of v3
		// y's only rename loses; a node that held the rename when a arrived
		// drops y and takes y v1 again when it is re-sent.
		signed(t, y, "y", 1, 8, nil),
		signed(t, y, "ops", 2, 9, nil),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var want proto.PolicyDigest
	var wantNames []string
	for i := range 60 {
		var s Set
		for round := 0; round < 3; round++ {
			for _, j := range rng.Perm(len(bag)) {
				s.Apply(r, bag[j])
			}
		}
		got, gotNames := s.Digest(), names(s.All())
		if i == 0 {
			want, wantNames = got, gotNames
			continue
		}
		if !reflect.DeepEqual(got, want) || !slices.Equal(gotNames, wantNames) {
			t.Fatalf("order %d: %v, want %v", i, gotNames, wantNames)
		}
	}
	t.Log(wantNames)
}

func TestDigestNewer(t *testing.T) {
	r := testRoster(t)
	var s Set
	ids := []uuid.UUID{v7(30, 0), v7(10, 0), v7(20, 0)}
	for i, id := range ids {
		mustApply(t, &s, r, signed(t, id, fmt.Sprintf("c%d", i), uint64(i+1), 0, nil))
	}
	d := s.Digest()
	want := []proto.PolicyVersion{{Channel: ids[1], Version: 2}, {Channel: ids[2], Version: 3}, {Channel: ids[0], Version: 1}}
	if !reflect.DeepEqual(d.Policies, want) {
		t.Fatalf("digest %v, want %v", d.Policies, want)
	}
	if got := s.Newer(proto.PolicyDigest{}); len(got) != 3 || got[0].ID != ids[1] || got[2].ID != ids[0] {
		t.Fatalf("Newer(empty) = %v", names(got))
	}
	if got := s.Newer(d); len(got) != 0 {
		t.Fatalf("Newer(own digest) = %v", names(got))
	}
	peer := proto.PolicyDigest{Policies: []proto.PolicyVersion{
		{Channel: ids[0], Version: 1},    // same
		{Channel: ids[1], Version: 1},    // older
		{Channel: ids[2], Version: 9},    // newer than ours
		{Channel: v7(99, 0), Version: 1}, // one we lack
		{Channel: ids[1], Version: 2},    // listed twice: the greater counts
	}}
	if got := s.Newer(peer); len(got) != 0 {
		t.Fatalf("Newer(peer) = %v", names(got))
	}
	peer.Policies = peer.Policies[:4]
	if got := s.Newer(peer); len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("Newer(peer) = %v", names(got))
	}
	var empty Set
	if d := empty.Digest(); len(d.Policies) != 0 || empty.Newer(d) != nil {
		t.Fatal("empty set")
	}
	// The digest is a wire type: it encodes canonically with the ids as
	// 16-byte strings.
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back proto.PolicyDigest
	if err := proto.UnmarshalCanonical(b, &back); err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("digest round trip: %v", err)
	}
}

func TestRevalidate(t *testing.T) {
	r := testRoster(t)
	var s Set
	byAlice := signed(t, idGeneral, "general", 1, 0, nil, alice)
	byCarol := signed(t, idDeploys, "deploys", 1, 0, nil, carol)
	listsCarol := signed(t, v7(1, 0), "carols", 1, 0, func(p *Policy) { p.Admins = append(p.Admins, pub(carol)) }, alice)
	for _, p := range []*Policy{byAlice, byCarol, listsCarol} {
		mustApply(t, &s, r, p)
	}
	// Inject a policy of another org, as a stray file could.
	other := signed(t, v7(2, 0), "elsewhere", 1, 0, func(p *Policy) { p.Org = "other" })
	s.mu.Lock()
	s.addLocked(other.clone())
	s.mu.Unlock()

	if dropped, stale := s.Revalidate(r); len(stale) != 0 || len(dropped) != 1 || dropped[0].Org != "other" {
		t.Fatalf("dropped %v stale %v", names(dropped), names(stale))
	}
	r2 := r.Next()
	if err := r2.SetRole(pub(carol), roster.RoleOperator); err != nil {
		t.Fatal(err)
	}
	if err := r2.Sign(alice); err != nil {
		t.Fatal(err)
	}
	dropped, stale := s.Revalidate(r2)
	if len(dropped) != 0 || !slices.Equal(names(stale), names([]*Policy{listsCarol, byCarol})) {
		t.Fatalf("dropped %v stale %v", names(dropped), names(stale))
	}
	if s.Len() != 3 {
		t.Fatal("stale policies must be kept")
	}
	// A new version signed by a current admin replaces a stale one.
	fixed := byCarol.Next()
	mustSign(t, fixed, alice)
	mustApply(t, &s, r2, fixed)
	if _, stale := s.Revalidate(r2); len(stale) != 1 {
		t.Fatalf("stale %v", names(stale))
	}
}

// TestSetConcurrent exercises the set from many goroutines; run with -race.
func TestSetConcurrent(t *testing.T) {
	r := testRoster(t)
	dir := t.TempDir()
	var ps []*Policy
	for i := range 20 {
		ps = append(ps, signed(t, v7(int64(i), 0), fmt.Sprintf("c%d", i%10), 1, int64(i), nil))
		ps = append(ps, signed(t, v7(int64(i), 0), fmt.Sprintf("c%d", i%10), 2, int64(i)+100, nil))
	}
	s := NewSet()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range ps {
				p := ps[(i*7+g)%len(ps)]
				s.Apply(r, p)
				s.ByName(p.Name)
				s.ByID(p.ID)
				s.Newer(s.Digest())
				s.All()
			}
			if g%4 == 0 {
				if err := s.Save(dir); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if s.Len() != 10 {
		t.Fatalf("%d channels, want 10: %v", s.Len(), names(s.All()))
	}
	for _, p := range s.All() {
		if p.Version != 2 || p.ID != v7(int64(p.Name[1]-'0'), 0) {
			t.Fatalf("%v", names(s.All()))
		}
	}
	if err := s.Save(dir); err != nil {
		t.Fatal(err)
	}
	var back Set
	if err := back.Load(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Digest(), s.Digest()) {
		t.Fatal("saved set differs")
	}
}

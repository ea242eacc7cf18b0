package testpar

import (
	"flag"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

var got int

func TestMain(m *testing.M) {
	got = Default()
	os.Exit(m.Run())
}

func TestDefault(t *testing.T) {
	explicit := false
	flag.Visit(func(v *flag.Flag) { explicit = explicit || v.Name == "test.parallel" })
	f := flag.Lookup("test.parallel")
	if explicit {
		if got != 0 && strconv.Itoa(got) != f.Value.String() {
			t.Fatalf("Default() = %d, but -test.parallel is %s", got, f.Value)
		}
		t.Skip("-test.parallel was given; Default keeps it")
	}
	want := max(Min, PerCPU*runtime.GOMAXPROCS(0))
	if raceEnabled {
		want /= 3
	}
	if got != want || f.Value.String() != strconv.Itoa(want) {
		t.Fatalf("Default() = %d, -test.parallel %s; want %d", got, f.Value, want)
	}
}

// granted reports which of chs are closed.
func granted(chs ...<-chan struct{}) []bool {
	out := make([]bool, len(chs))
	for i, ch := range chs {
		select {
		case <-ch:
			out[i] = true
		default:
		}
	}
	return out
}

// TestGateOrder: the gate admits nobody until every registered test has
// arrived, then First tests up to half its places, the rest in order,
// and a First test past half only when no other test waits.
func TestGateOrder(t *testing.T) {
	g := newGate(4)
	for range 6 {
		g.register()
	}
	r1 := g.arrive(classRest)
	f1 := g.arrive(classFirst)
	r2 := g.arrive(classRest)
	f2 := g.arrive(classFirst)
	f3 := g.arrive(classFirst)
	if got := granted(r1, f1, r2, f2, f3); slices.Contains(got, true) {
		t.Fatalf("granted %v before every test arrived", got)
	}
	r3 := g.arrive(classRest)
	if got, want := granted(f1, f2, f3, r1, r2, r3), []bool{true, true, false, true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("granted %v once all arrived, want %v (two First, then the rest in order)", got, want)
	}
	g.release(classRest) // r1: r3 waits, and is next before f3
	if got, want := granted(f3, r3), []bool{false, true}; !slices.Equal(got, want) {
		t.Fatalf("after a release granted %v, want %v", got, want)
	}
	g.release(classFirst) // f1: a First place is free
	if got := granted(f3); !got[0] {
		t.Fatal("f3 not granted when a First test ended")
	}
	for _, c := range []int{classFirst, classFirst, classRest, classRest} {
		g.release(c)
	}
	if g.free != 4 || g.open {
		t.Fatalf("after the round: %d places free, open %v; want 4 and closed", g.free, g.open)
	}
	// A second round (-test.count) waits for all its tests again.
	g.register()
	g.register()
	a := g.arrive(classRest)
	if granted(a)[0] {
		t.Fatal("second round: granted before every test arrived")
	}
	b := g.arrive(classRest)
	if got := granted(a, b); !got[0] || !got[1] {
		t.Fatalf("second round: granted %v", got)
	}
}

// TestGateFirstAlone: with only First tests waiting, they take every
// place.
func TestGateFirstAlone(t *testing.T) {
	g := newGate(2)
	g.register()
	g.register()
	a, b := g.arrive(classFirst), g.arrive(classFirst)
	if got := granted(a, b); !got[0] || !got[1] {
		t.Fatalf("granted %v, want both", got)
	}
}

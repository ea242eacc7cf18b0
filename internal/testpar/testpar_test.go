package testpar

import (
	"flag"
	"os"
	"runtime"
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

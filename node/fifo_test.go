package node

import "testing"

func TestFIFOMapEvictsOldest(t *testing.T) {
	f := newFIFOMap[int, string](3)
	for i := range 3 {
		f.put(i, "v")
	}
	f.put(1, "updated") // an update keeps 1's place and evicts nothing
	if f.len() != 3 {
		t.Fatalf("len %d after an update, want 3", f.len())
	}
	for i := 3; i < 6; i++ {
		f.put(i, "v")
		if _, ok := f.get(i - 3); ok {
			t.Fatalf("key %d held after %d newer keys", i-3, 3)
		}
		if f.len() != 3 {
			t.Fatalf("len %d, want 3", f.len())
		}
	}
	for i := 3; i < 6; i++ {
		if _, ok := f.get(i); !ok {
			t.Fatalf("key %d forgotten", i)
		}
	}
	if v, _ := f.get(4); v != "v" {
		t.Fatalf("get(4) = %q", v)
	}
}
